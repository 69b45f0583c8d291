"""Graph operators the ONNX frontend needs beyond the core set: topk_indices, bitwise, bitwise_not
(TE computes in `ingot.ops.onnx_extra`).

Note: registered when this module is imported (``ingot.frontend.onnx`` imports it); a name the core
families already register is skipped, so the graph layer can take an op over without changing
callers (gather_elements/argmax/argmin moved there in ec4613f).

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2, 5), "float32"))
    >>> str(topk_indices(x, 2).struct_info)
    'R.Tensor((2, 2), dtype="int64")'
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import Call, Expr
from ..op_registry import OpPattern, _REGISTRY, make_call, op_error, register_op
from ..struct_info import TensorStructInfo
from ._common import known_shape, norm_axis, tensor_sinfo, topi
from .sort import _np_topk


def _register(name: str, **kwargs: Any) -> None:
    # Idempotent: a second import of this module (reload in tests) must not fail.
    if name not in _REGISTRY:
        register_op(name, **kwargs)


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


def _np_topk_indices(args: Any, attrs: Any) -> np.ndarray:
    # the core topk's reference (stable: ties keep the smaller index first, as ONNX wants)
    return _np_topk(args, {**dict(attrs), "ret_type": "indices", "dtype": "int64"})


_register(
    "topk_indices", num_inputs=1, pattern=OpPattern.OPAQUE, attrs={"k": 1, "axis": -1, "largest": True},
    normalize_attrs=lambda attrs, args: {"k": int(attrs["k"]), "axis": int(attrs["axis"]),
                                         "largest": bool(attrs["largest"])},
    infer=_infer_topk,
    legalize=lambda inputs, attrs, out: topi("onnx_extra").topk_indices(inputs[0], attrs["k"], attrs["axis"],
                                                                        attrs["largest"]),
    numpy=_np_topk_indices,
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


# -- scatter_elements ----------------------------------------------------------------------------

_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _infer_scatter(args: Any, attrs: Any) -> TensorStructInfo:
    d = tensor_sinfo("scatter_elements", args[0], 0)
    i = tensor_sinfo("scatter_elements", args[1], 1)
    u = tensor_sinfo("scatter_elements", args[2], 2)
    if not i.dtype.is_integer:
        raise op_error("scatter_elements", f"indices must be integers, got {i.dtype}")
    if attrs["reduction"] not in _REDUCTIONS:
        raise op_error("scatter_elements", f"reduction must be one of {_REDUCTIONS}, got {attrs['reduction']!r}")
    ds, is_, us = known_shape("scatter_elements", d), known_shape("scatter_elements", i, 1), \
        known_shape("scatter_elements", u, 2)
    if len(ds) != len(is_) or tuple(map(str, is_)) != tuple(map(str, us)) or str(u.dtype) != str(d.dtype):
        raise op_error("scatter_elements", f"indices {tuple(map(str, is_))} and updates {tuple(map(str, us))} "
                                           f"({u.dtype}) must have the same shape, of the rank and dtype of data "
                                           f"{tuple(map(str, ds))} ({d.dtype})")
    norm_axis("scatter_elements", attrs["axis"], len(ds))
    return d


def _np_scatter(args: Any, attrs: Any) -> np.ndarray:
    data, idx, upd = args
    axis = attrs["axis"] % data.ndim
    out = data.copy()
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    for j in np.ndindex(*idx.shape):
        k = list(j)
        k[axis] = int(np.clip(idx[j], 0, data.shape[axis] - 1))
        k = tuple(k)
        red = attrs["reduction"]
        if red == "none":
            out[k] = upd[j]
        elif red == "add":
            out[k] = out[k] + upd[j]
        elif red == "mul":
            out[k] = out[k] * upd[j]
        elif red == "max":
            out[k] = max(out[k], upd[j])
        else:
            out[k] = min(out[k], upd[j])
    return out


_register(
    "scatter_elements", num_inputs=3, pattern=OpPattern.OPAQUE, attrs={"axis": 0, "reduction": "none"},
    normalize_attrs=lambda attrs, args: {"axis": int(attrs["axis"]), "reduction": str(attrs["reduction"])},
    infer=_infer_scatter,
    legalize=lambda inputs, attrs, out: topi("onnx_extra").scatter_elements(inputs[0], inputs[1], inputs[2],
                                                                            attrs["axis"], attrs["reduction"]),
    numpy=_np_scatter,
)


def scatter_elements(data: Expr, indices: Expr, updates: Expr, axis: int = 0, reduction: str = "none") -> Call:
    """ONNX ``ScatterElements`` / ``torch.scatter`` (``reduction``: none/add/mul/max/min).

    Example:
        >>> from ingot import graph as G
        >>> d = G.Var("d", G.TensorStructInfo((3, 4), "float32"))
        >>> i = G.Var("i", G.TensorStructInfo((2, 4), "int64"))
        >>> u = G.Var("u", G.TensorStructInfo((2, 4), "float32"))
        >>> scatter_elements(d, i, u).struct_info.shape
        (3, 4)
    """
    return make_call("scatter_elements", [data, indices, updates], axis=axis, reduction=reduction)


# -- unary_math ----------------------------------------------------------------------------------

_MATH = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
         "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}


def _infer_unary_math(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("unary_math", args[0])
    if attrs["fn"] not in _MATH:
        raise op_error("unary_math", f"fn must be one of {sorted(_MATH)}, got {attrs['fn']!r}")
    if not str(x.dtype).startswith(("float", "bfloat")):
        raise op_error("unary_math", f"{attrs['fn']} needs a floating-point tensor, got {x.dtype}; cast it first")
    return x


_register(
    "unary_math", num_inputs=1, pattern=OpPattern.ELEMWISE, attrs={"fn": "asin"},
    normalize_attrs=lambda attrs, args: {"fn": str(attrs["fn"])},
    infer=_infer_unary_math,
    legalize=lambda inputs, attrs, out: topi("onnx_extra").unary_math(inputs[0], attrs["fn"]),
    numpy=lambda args, attrs: _MATH[attrs["fn"]](args[0]).astype(args[0].dtype),
)


def unary_math(x: Expr, fn: str) -> Call:
    """Elementwise ``asin``/``acos``/``atan``/``sinh``/``cosh``/``asinh``/``acosh``/``atanh``.

    Example:
        >>> from ingot import graph as G
        >>> str(unary_math(G.Var("x", G.TensorStructInfo((3,), "float32")), "atan").struct_info)
        'R.Tensor((3,), dtype="float32")'
    """
    return make_call("unary_math", [x], fn=fn)
