"""``matmul`` (numpy semantics with batch broadcasting), ``linear``/``dense`` (x @ W.T + b).

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 784), "float32"))
    >>> w = G.Var("w", G.TensorStructInfo((128, 784), "float32"))
    >>> str(linear(x, w).struct_info)
    'R.Tensor((1, 128), dtype="float32")'
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error, register_op
from ..struct_info import TensorStructInfo, dims_equal
from ._common import accumulate_in_float32, broadcast_shapes, known_shape, tensor_sinfo, topi


def _check_k(name: str, ka: Any, kb: Any) -> None:
    if not dims_equal(ka, kb):
        raise op_error(name, f"reduction dimensions differ: {ka} vs {kb} (the last axis of the first operand "
                             f"must match the contracted axis of the second)")


def _out_dtype(name: str, a: TensorStructInfo, b: TensorStructInfo, out_dtype: Any) -> str:
    if a.dtype != b.dtype:
        raise op_error(name, f"operand dtypes differ ({a.dtype} vs {b.dtype}); cast one with G.op.cast")
    return str(out_dtype) if out_dtype else str(a.dtype)


def _infer_matmul(args: Any, attrs: Any) -> TensorStructInfo:
    a, b = tensor_sinfo("matmul", args[0], 0), tensor_sinfo("matmul", args[1], 1)
    sa, sb = known_shape("matmul", a, 0), known_shape("matmul", b, 1)
    if len(sa) == 0 or len(sb) == 0:
        raise op_error("matmul", "operands must have rank >= 1")
    a2 = sa if len(sa) > 1 else (1,) + sa
    b2 = sb if len(sb) > 1 else sb + (1,)
    _check_k("matmul", a2[-1], b2[-2])
    batch = broadcast_shapes("matmul", a2[:-2], b2[:-2]) if (len(a2) > 2 or len(b2) > 2) else ()
    shape = batch + (() if len(sa) == 1 else (a2[-2],)) + (() if len(sb) == 1 else (b2[-1],))
    return TensorStructInfo(shape, _out_dtype("matmul", a, b, attrs["out_dtype"]))


register_op(
    "matmul", num_inputs=2, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, attrs={"out_dtype": None},
    infer=_infer_matmul,
    legalize=accumulate_in_float32(
        lambda inputs, attrs, out: topi("linalg").matmul(inputs[0], inputs[1], out_dtype=str(out.dtype))),
    numpy=lambda args, attrs: np.matmul(args[0], args[1]).astype(attrs["out_dtype"] or args[0].dtype),
)


def matmul(a: Expr, b: Expr, out_dtype: "str | None" = None) -> Call:
    """``numpy.matmul(a, b)``: batch axes broadcast, 1-D operands are vectors.

    Example:
        >>> from ingot import graph as G
        >>> a = G.Var("a", G.TensorStructInfo((8, 1, 4, 16), "float32"))
        >>> b = G.Var("b", G.TensorStructInfo((3, 16, 5), "float32"))
        >>> G.op.matmul(a, b).struct_info.shape
        (8, 3, 4, 5)
    """
    return make_call("matmul", [a, b], out_dtype=out_dtype)


def _infer_linear(args: Any, attrs: Any) -> TensorStructInfo:
    x, w = tensor_sinfo("linear", args[0], 0), tensor_sinfo("linear", args[1], 1)
    sx, sw = known_shape("linear", x, 0), known_shape("linear", w, 1)
    if len(sw) != 2 or len(sx) < 1:
        raise op_error("linear", f"weight must be 2-D (out_features, in_features), got shape {sw}")
    _check_k("linear", sx[-1], sw[1])
    dtype = _out_dtype("linear", x, w, attrs["out_dtype"])
    if len(args) == 3:
        b = tensor_sinfo("linear", args[2], 2)
        sb = known_shape("linear", b, 2)
        if len(sb) != 1 or not dims_equal(sb[0], sw[0]):
            raise op_error("linear", f"bias must have shape ({sw[0]},), got {sb}")
    return TensorStructInfo(sx[:-1] + (sw[0],), dtype)


def _np_linear(args: Any, attrs: Any) -> np.ndarray:
    out = np.matmul(args[0], args[1].T)
    if len(args) == 3:
        out = out + args[2]
    return out.astype(attrs["out_dtype"] or args[0].dtype)


register_op(
    "linear", num_inputs=None, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, attrs={"out_dtype": None},
    infer=_infer_linear,
    legalize=accumulate_in_float32(lambda inputs, attrs, out: topi("nn").dense(
        inputs[0], inputs[1], inputs[2] if len(inputs) == 3 else None, out_dtype=str(out.dtype))),
    numpy=_np_linear,
    doc="x @ weight.T + bias (PyTorch's Linear; TVM's dense + bias_add).",
)


def linear(x: Expr, weight: Expr, bias: "Expr | None" = None, out_dtype: "str | None" = None) -> Call:
    """``x @ weight.T + bias`` with ``weight`` of shape ``(out_features, in_features)`` (torch.nn.Linear).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 8), "float32"))
        >>> w = G.Var("w", G.TensorStructInfo((4, 8), "float32"))
        >>> b = G.Var("b", G.TensorStructInfo((4,), "float32"))
        >>> G.op.linear(x, w, b).struct_info.shape
        (2, 4)
    """
    args = [x, weight] + ([bias] if bias is not None else [])
    return make_call("linear", args, out_dtype=out_dtype)


def dense(x: Expr, weight: Expr, out_dtype: "str | None" = None) -> Call:
    """``x @ weight.T`` (TVM's ``nn.dense``): `linear` without bias.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 8), "float32"))
        >>> G.op.dense(x, G.Var("w", G.TensorStructInfo((4, 8), "float32"))).struct_info.shape
        (2, 4)
    """
    return linear(x, weight, None, out_dtype)


_ = Any
