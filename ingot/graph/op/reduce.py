"""Reductions: ``sum``, ``mean``, ``max``, ``min``, ``prod`` over axes, with ``keepdims``;
``argmax``/``argmin`` over one axis (or all), int64 result.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((4, 8), "float32"))
    >>> sum(x, axis=1).struct_info.shape
    (4,)
"""
from __future__ import annotations

import builtins
from typing import Any, Callable, Sequence

import numpy as np

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error, register_op
from ..struct_info import TensorStructInfo
from ._common import accumulate_in_float32, known_shape, norm_axis, tensor_sinfo, topi


def _norm_attrs(name: str) -> Callable:
    def normalize(attrs: Any, args: Any) -> dict:
        ndim = tensor_sinfo(name, args[0]).ndim
        axis = attrs["axis"]
        if axis is None:
            axes = tuple(range(ndim))
        else:
            axes = (axis,) if isinstance(axis, int) else tuple(axis)
            axes = tuple(sorted({norm_axis(name, a, ndim) for a in axes}))
        return {"axis": axes, "keepdims": bool(attrs["keepdims"])}

    return normalize


def _infer(name: str) -> Callable:
    def infer(args: Any, attrs: Any) -> TensorStructInfo:
        sinfo = tensor_sinfo(name, args[0])
        shape = known_shape(name, sinfo)
        axes = attrs["axis"]
        if attrs["keepdims"]:
            out = tuple(1 if a in axes else d for a, d in enumerate(shape))
        else:
            out = tuple(d for a, d in enumerate(shape) if a not in axes)
        return TensorStructInfo(out, sinfo.dtype)

    return infer


_REFS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}
_TOPI = {"sum": "sum", "mean": "mean", "max": "max", "min": "min", "prod": "prod"}


def _register(name: str) -> None:
    ref = _REFS[name]
    register_op(
        name, num_inputs=1, pattern=OpPattern.REDUCTION, attrs={"axis": None, "keepdims": False},
        infer=_infer(name), normalize_attrs=_norm_attrs(name),
        # max/min are exact in any dtype; sum/mean/prod of float16/bfloat16 accumulate in float32.
        legalize=(lambda f: f if name in ("max", "min") else accumulate_in_float32(f, cast_inputs=True))(
            lambda inputs, attrs, out: getattr(topi("reduce"), _TOPI[name])(
                inputs[0], axis=list(attrs["axis"]), keepdims=attrs["keepdims"])),
        numpy=lambda args, attrs: np.asarray(ref(args[0], axis=attrs["axis"], keepdims=attrs["keepdims"]))
        .astype(args[0].dtype),
        doc=f"{name} over axes.",
    )


for _name in _REFS:
    _register(_name)


def _builder(name: str) -> Callable[..., Call]:
    def build(x: Expr, axis: "int | Sequence[int] | None" = None, keepdims: bool = False) -> Call:
        return make_call(name, [x], axis=axis, keepdims=keepdims)

    build.__name__ = name
    build.__doc__ = f"""``{name}`` of ``x`` over ``axis`` (all axes when None), keeping them as size 1 if ``keepdims``.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4, 8), "float32"))
        >>> G.op.{name}(x, axis=1, keepdims=True).struct_info.shape
        (4, 1)
    """
    return build


sum = _builder("sum")  # noqa: A001 - numpy/TVM name
mean = _builder("mean")
max = _builder("max")  # noqa: A001
min = _builder("min")  # noqa: A001
prod = _builder("prod")

def _norm_arg_attrs(name: str) -> Callable:
    def normalize(attrs: Any, args: Any) -> dict:
        ndim = tensor_sinfo(name, args[0]).ndim
        axis = attrs["axis"]
        if axis is not None and not isinstance(axis, int):
            raise op_error(name, f"axis must be an int or None (all axes), got {axis!r}")
        return {"axis": None if axis is None else norm_axis(name, axis, ndim), "keepdims": bool(attrs["keepdims"]),
                "select_last_index": bool(attrs["select_last_index"])}

    return normalize


def _infer_arg(name: str) -> Callable:
    def infer(args: Any, attrs: Any) -> TensorStructInfo:
        sinfo = tensor_sinfo(name, args[0])
        shape = known_shape(name, sinfo)
        axes = range(len(shape)) if attrs["axis"] is None else (attrs["axis"],)
        if attrs["keepdims"]:
            out = tuple(1 if a in axes else d for a, d in enumerate(shape))
        else:
            out = tuple(d for a, d in enumerate(shape) if a not in axes)
        return TensorStructInfo(out, "int64")

    return infer


def _np_arg(kind: str) -> Callable:
    def ref(args: Any, attrs: Any) -> np.ndarray:
        x, axis = args[0], attrs["axis"]
        fn = np.argmax if kind == "max" else np.argmin
        if attrs["select_last_index"]:
            # The last occurrence: search the reversed axis, map back.
            if axis is None:
                flat = x.reshape(-1)
                out = np.asarray(flat.size - 1 - fn(flat[::-1]))
                return out.reshape((1,) * x.ndim if attrs["keepdims"] else ()).astype("int64")
            out = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis, keepdims=attrs["keepdims"])
            return np.asarray(out).astype("int64")
        return np.asarray(fn(x, axis=axis, keepdims=attrs["keepdims"])).astype("int64")

    return ref


for _kind in ("max", "min"):
    register_op(
        f"arg{_kind}", num_inputs=1, pattern=OpPattern.REDUCTION,
        attrs={"axis": None, "keepdims": False, "select_last_index": False},
        normalize_attrs=_norm_arg_attrs(f"arg{_kind}"), infer=_infer_arg(f"arg{_kind}"), numpy=_np_arg(_kind),
        legalize=(lambda kind: lambda inputs, attrs, out: getattr(topi("reduce"), f"arg{kind}")(
            inputs[0], attrs["axis"], attrs["keepdims"], attrs["select_last_index"]))(_kind),
        doc=f"Index of the {_kind}imum along an axis (int64).",
    )


def argmax(x: Expr, axis: "int | None" = None, keepdims: bool = False, select_last_index: bool = False) -> Call:
    """Index (int64) of the maximum along ``axis`` (of the flattened tensor when None); ties give the
    first index (the last with ``select_last_index``), as numpy/ONNX/PyTorch.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4, 8), "float32"))
        >>> str(G.op.argmax(x, axis=1).struct_info)
        'R.Tensor((4,), dtype="int64")'
    """
    return make_call("argmax", [x], axis=axis, keepdims=keepdims, select_last_index=select_last_index)


def argmin(x: Expr, axis: "int | None" = None, keepdims: bool = False, select_last_index: bool = False) -> Call:
    """Index (int64) of the minimum along ``axis`` (see `argmax`).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4, 8), "float32"))
        >>> G.op.argmin(x, axis=0, keepdims=True).struct_info.shape
        (1, 8)
    """
    return make_call("argmin", [x], axis=axis, keepdims=keepdims, select_last_index=select_last_index)


_ = builtins
