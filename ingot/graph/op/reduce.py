"""Reductions: ``sum``, ``mean``, ``max``, ``min``, ``prod`` over axes, with ``keepdims``.

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
from ..op_registry import OpPattern, make_call, register_op
from ..struct_info import TensorStructInfo
from ._common import known_shape, norm_axis, tensor_sinfo, topi


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
        legalize=lambda inputs, attrs, out: getattr(topi("reduce"), _TOPI[name])(
            inputs[0], axis=list(attrs["axis"]), keepdims=attrs["keepdims"]),
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

_ = builtins
