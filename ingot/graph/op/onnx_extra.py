"""Graph operators the ONNX frontend needs beyond the core set: gather_elements, argmax, argmin,
topk_indices (TE computes in `ingot.ops.onnx_extra`).

Note: registered when this module is imported (``ingot.frontend.onnx`` imports it); the names are
the ones TVM uses (``gather_elements``, ``argmax``, ``argmin``), so the graph engineer can move them
into the core families later without changing callers. Indices read from tensors are wrapped
(negative) and clamped into range by both the kernel and the numpy reference.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2, 5), "float32"))
    >>> str(argmax(x, axis=1, keepdims=False).struct_info)
    'R.Tensor((2,), dtype="int64")'
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import Call, Expr
from ..op_registry import OpPattern, _REGISTRY, make_call, op_error, register_op
from ..struct_info import TensorStructInfo
from ._common import known_shape, norm_axis, tensor_sinfo, topi


def _register(name: str, **kwargs: Any) -> None:
    # Idempotent: a second import of this module (reload in tests) must not fail.
    if name not in _REGISTRY:
        register_op(name, **kwargs)


def _np_index(indices: np.ndarray, dim: int) -> np.ndarray:
    indices = np.where(indices < 0, indices + dim, indices)
    return np.clip(indices, 0, dim - 1)


# -- gather_elements ----------------------------------------------------------------------------


def _infer_gather_elements(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("gather_elements", args[0], 0)
    idx = tensor_sinfo("gather_elements", args[1], 1)
    if not idx.dtype.is_integer:
        raise op_error("gather_elements", f"indices must be integers, got {idx.dtype}")
    if x.ndim != idx.ndim:
        raise op_error("gather_elements", f"data (rank {x.ndim}) and indices (rank {idx.ndim}) must have the same rank")
    norm_axis("gather_elements", attrs["axis"], x.ndim)
    return TensorStructInfo(known_shape("gather_elements", idx, 1), x.dtype)


def _np_gather_elements(args: Any, attrs: Any) -> np.ndarray:
    x, idx = args
    axis = attrs["axis"] % x.ndim
    return np.take_along_axis(x, _np_index(idx.astype("int64"), x.shape[axis]), axis=axis)


_register(
    "gather_elements", num_inputs=2, pattern=OpPattern.INJECTIVE, attrs={"axis": 0},
    normalize_attrs=lambda attrs, args: {"axis": int(attrs["axis"])},
    infer=_infer_gather_elements,
    legalize=lambda inputs, attrs, out: topi("onnx_extra").gather_elements(inputs[0], inputs[1], attrs["axis"]),
    numpy=_np_gather_elements,
)


def gather_elements(x: Expr, indices: Expr, axis: int = 0) -> Call:
    """ONNX ``GatherElements`` / ``torch.gather`` (indices wrapped if negative, then clamped).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((3, 4), "float32"))
        >>> i = G.Var("i", G.TensorStructInfo((3, 2), "int64"))
        >>> gather_elements(x, i, axis=1).struct_info.shape
        (3, 2)
    """
    return make_call("gather_elements", [x, indices], axis=axis)


# -- argmax / argmin -----------------------------------------------------------------------------


def _infer_arg(name: str) -> Any:
    def infer(args: Any, attrs: Any) -> TensorStructInfo:
        x = tensor_sinfo(name, args[0])
        shape = list(known_shape(name, x))
        axis = norm_axis(name, attrs["axis"], len(shape))
        if attrs["keepdims"]:
            shape[axis] = 1
        else:
            del shape[axis]
        return TensorStructInfo(shape, "int64")

    return infer


def _np_arg(kind: str) -> Any:
    def ref(args: Any, attrs: Any) -> np.ndarray:
        x = args[0]
        axis = attrs["axis"] % x.ndim
        f = np.argmax if kind == "max" else np.argmin
        if attrs["select_last_index"]:
            out = x.shape[axis] - 1 - f(np.flip(x, axis), axis=axis)
        else:
            out = f(x, axis=axis)
        out = out.astype("int64")
        return np.expand_dims(out, axis) if attrs["keepdims"] else out

    return ref


for _kind in ("max", "min"):
    _register(
        f"arg{_kind}", num_inputs=1, pattern=OpPattern.OPAQUE,
        attrs={"axis": 0, "keepdims": True, "select_last_index": False},
        normalize_attrs=lambda attrs, args: {"axis": int(attrs["axis"]), "keepdims": bool(attrs["keepdims"]),
                                             "select_last_index": bool(attrs["select_last_index"])},
        infer=_infer_arg(f"arg{_kind}"),
        legalize=(lambda kind: lambda inputs, attrs, out: topi("onnx_extra").arg_reduce(
            inputs[0], attrs["axis"], attrs["keepdims"], attrs["select_last_index"], kind))(_kind),
        numpy=_np_arg(_kind),
    )


def argmax(x: Expr, axis: int = 0, keepdims: bool = True, select_last_index: bool = False) -> Call:
    """Index (int64) of the maximum along ``axis`` (first on ties unless ``select_last_index``).

    Example:
        >>> from ingot import graph as G
        >>> argmax(G.Var("x", G.TensorStructInfo((2, 5), "float32")), axis=1).struct_info.shape
        (2, 1)
    """
    return make_call("argmax", [x], axis=axis, keepdims=keepdims, select_last_index=select_last_index)


def argmin(x: Expr, axis: int = 0, keepdims: bool = True, select_last_index: bool = False) -> Call:
    """Index (int64) of the minimum along ``axis`` (first on ties unless ``select_last_index``).

    Example:
        >>> from ingot import graph as G
        >>> argmin(G.Var("x", G.TensorStructInfo((2, 5), "float32")), axis=0, keepdims=False).struct_info.shape
        (5,)
    """
    return make_call("argmin", [x], axis=axis, keepdims=keepdims, select_last_index=select_last_index)


# -- topk_indices --------------------------------------------------------------------------------


def _infer_topk(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("topk_indices", args[0])
    shape = list(known_shape("topk_indices", x))
    axis = norm_axis("topk_indices", attrs["axis"], len(shape))
    k = attrs["k"]
    if isinstance(shape[axis], int) and not 0 <= k <= shape[axis]:
        raise op_error("topk_indices", f"k={k} must be between 0 and the axis length {shape[axis]}")
    shape[axis] = k
    return TensorStructInfo(shape, "int64")


def _np_topk(args: Any, attrs: Any) -> np.ndarray:
    x = args[0]
    axis = attrs["axis"] % x.ndim
    # A stable sort keeps ties in index order (ONNX: the smaller index first). Descending order is
    # the stable ascending sort of the flipped array, read backwards (no negation: unsigned dtypes).
    if attrs["largest"]:
        n = x.shape[axis]
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    return np.take(order, np.arange(attrs["k"]), axis=axis).astype("int64")


_register(
    "topk_indices", num_inputs=1, pattern=OpPattern.OPAQUE, attrs={"k": 1, "axis": -1, "largest": True},
    normalize_attrs=lambda attrs, args: {"k": int(attrs["k"]), "axis": int(attrs["axis"]),
                                         "largest": bool(attrs["largest"])},
    infer=_infer_topk,
    legalize=lambda inputs, attrs, out: topi("onnx_extra").topk_indices(inputs[0], attrs["k"], attrs["axis"],
                                                                        attrs["largest"]),
    numpy=_np_topk,
)


def topk_indices(x: Expr, k: int, axis: int = -1, largest: bool = True) -> Call:
    """Indices (int64) of the ``k`` largest/smallest elements along ``axis``, sorted (ties: smaller
    index first); the values are ``gather_elements(x, indices, axis)``.

    Example:
        >>> from ingot import graph as G
        >>> topk_indices(G.Var("x", G.TensorStructInfo((2, 8), "float32")), 3).struct_info.shape
        (2, 3)
    """
    return make_call("topk_indices", [x], k=k, axis=axis, largest=largest)


# -- bitwise -------------------------------------------------------------------------------------

_BITWISE = ("and", "or", "xor", "shift_left", "shift_right")


def _infer_bitwise(args: Any, attrs: Any) -> TensorStructInfo:
    from ._common import broadcast_shapes

    a, b = tensor_sinfo("bitwise", args[0], 0), tensor_sinfo("bitwise", args[1], 1)
    if attrs["kind"] not in _BITWISE:
        raise op_error("bitwise", f"kind must be one of {_BITWISE}, got {attrs['kind']!r}")
    if not a.dtype.is_integer or str(a.dtype) != str(b.dtype):
        raise op_error("bitwise", f"operands must be integers of the same dtype, got {a.dtype} and {b.dtype}")
    return TensorStructInfo(broadcast_shapes("bitwise", known_shape("bitwise", a), known_shape("bitwise", b, 1)),
                            a.dtype)


def _np_bitwise(args: Any, attrs: Any) -> np.ndarray:
    a, b = np.broadcast_arrays(*args)
    kind = attrs["kind"]
    if kind in ("and", "or", "xor"):
        return getattr(np, f"bitwise_{kind}")(a, b)
    bits = np.iinfo(a.dtype).bits
    valid = (b >= 0) & (b < bits)
    amount = np.clip(b, 0, bits - 1)
    if kind == "shift_left":
        u = np.dtype(f"u{a.dtype.itemsize}")
        shifted = np.left_shift(a.view(u) if a.dtype.kind == "i" else a, amount.astype(u)).view(a.dtype)
        return np.where(valid, shifted, 0).astype(a.dtype)
    fill = np.where(a < 0, -1, 0) if a.dtype.kind == "i" else 0
    return np.where(valid, np.right_shift(a, amount.astype(a.dtype)), fill).astype(a.dtype)


_register(
    "bitwise", num_inputs=2, pattern=OpPattern.BROADCAST, attrs={"kind": "and"},
    normalize_attrs=lambda attrs, args: {"kind": str(attrs["kind"])},
    infer=_infer_bitwise,
    legalize=lambda inputs, attrs, out: topi("onnx_extra").bitwise(inputs[0], inputs[1], attrs["kind"]),
    numpy=_np_bitwise,
)


def bitwise(a: Expr, b: Expr, kind: str) -> Call:
    """Integer ``and``/``or``/``xor``/``shift_left``/``shift_right`` with broadcasting (shifts out of
    ``[0, bits)`` give 0, or -1 for right shifts of negative signed values, as in ONNX).

    Example:
        >>> from ingot import graph as G
        >>> a = G.Var("a", G.TensorStructInfo((2, 3), "uint8"))
        >>> bitwise(a, a, "xor").struct_info.shape
        (2, 3)
    """
    return make_call("bitwise", [a, b], kind=kind)


def _infer_bitwise_not(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("bitwise_not", args[0])
    if not x.dtype.is_integer:
        raise op_error("bitwise_not", f"the operand must be an integer tensor, got {x.dtype}")
    return x


_register(
    "bitwise_not", num_inputs=1, pattern=OpPattern.ELEMWISE, infer=_infer_bitwise_not,
    legalize=lambda inputs, attrs, out: topi("onnx_extra").bitwise_not(inputs[0]),
    numpy=lambda args, attrs: np.invert(args[0]),
)


def bitwise_not(x: Expr) -> Call:
    """Integer ``~x``.

    Example:
        >>> from ingot import graph as G
        >>> str(bitwise_not(G.Var("x", G.TensorStructInfo((4,), "int32"))).struct_info)
        'R.Tensor((4,), dtype="int32")'
    """
    return make_call("bitwise_not", [x])
