"""ONNX converters for the integer and quantized linear operators: MatMulInteger, ConvInteger,
QLinearMatMul and QLinearConv.

Note: each is graph code on the existing ops, exact in integers: the inputs and their zero points are
widened to int32 and subtracted, the product (``matmul``, or Conv's graph code `ops_nn.conv_nd`, with
zero padding, which is the zero point's value before the subtraction) accumulates in int32. The QLinear
ops then requantize as ONNX's reference does: the multiplier ``a_scale * b_scale / y_scale`` is computed
in the scales' own type (float32 or float16), the int32 sum is scaled in float64 (every int32 and the
product's rounding are exact enough there that the result does not depend on the order of operations),
``y_zero_point`` added, rounded half to even, saturated to the output type's range and converted (as
`ops_extra`'s QuantizeLinear). Zero points and scales may be per tensor (a scalar or one element), per
row of ``a`` / per column of ``b`` (MatMul: ``(M,)`` or ``(..., M, 1)``; ``(N,)`` or ``(..., 1, N)``) or
per output channel (Conv's ``w``: ``(M,)``); they may be run-time inputs.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> all(get_converter(op, 21) is not None for op in ("MatMulInteger", "ConvInteger", "QLinearMatMul",
    ...                                                  "QLinearConv"))
    True
"""
from __future__ import annotations

from typing import Any

from ingot import graph as G

from .importer import register
from .ops_extra import _qrange
from .ops_nn import conv_nd

_INTEGER_INPUTS = ("int8", "uint8")


def _check_type(node: Any, ctx: Any, value: Any, what: str) -> str:
    dtype = ctx.dtype(value)
    if dtype not in _INTEGER_INPUTS:
        raise node.error(f"{what} must be int8 or uint8, got {dtype}")
    return dtype


def _per_tensor(shape: tuple, rank: int = 1) -> bool:
    """A single value (a scalar, or all dims 1 and no more of them than the operand's ``rank``)."""
    return len(shape) <= max(rank, 1) and all(d == 1 for d in shape)


def _matmul_param(ctx: Any, node: Any, param: Any, operand: tuple, side: str, what: str) -> Any:
    """A zero point or scale of a MatMul operand, shaped to broadcast against it: ``side`` ``"row"`` (of
    ``a`` (..., M, K)) or ``"col"`` (of ``b`` (..., K, N))."""
    shape, e = tuple(ctx.shape(param)), ctx.expr(param)
    if _per_tensor(shape, len(operand)):
        return e
    m_or_n = operand[-2] if side == "row" else operand[-1]
    if len(shape) == 1 and shape[0] == m_or_n:
        return ctx.expr(ctx.emit(G.op.reshape(e, (m_or_n, 1)))) if side == "row" else e
    keep = -2 if side == "row" else -1
    if len(shape) == len(operand) and shape[keep] == m_or_n and shape[-1 if side == "row" else -2] == 1:
        return e
    want = f"({m_or_n},) or (..., {m_or_n}, 1)" if side == "row" else f"({m_or_n},) or (..., 1, {m_or_n})"
    raise node.error(f"{what} of shape {shape} matches neither per-tensor quantization (a scalar) nor one value "
                     f"per {'row of a' if side == 'row' else 'column of b'} {operand}: give {want}")


def _channel_param(ctx: Any, node: Any, param: Any, channels: int, rank: int, what: str) -> Any:
    """A zero point or scale of a Conv weight (M, C/group, k...): per tensor or one per output channel,
    shaped ``(M, 1, ...)`` with ``rank - 1`` ones."""
    shape, e = tuple(ctx.shape(param)), ctx.expr(param)
    if _per_tensor(shape, rank):
        return e
    if len(shape) == 1 and shape[0] == channels:
        return ctx.expr(ctx.emit(G.op.reshape(e, (channels,) + (1,) * (rank - 1))))
    raise node.error(f"{what} of shape {shape} must be a scalar or one value per output channel ({channels},)")


def _scalar(ctx: Any, node: Any, param: Any, what: str) -> Any:
    shape = tuple(ctx.shape(param))
    if not _per_tensor(shape):
        raise node.error(f"{what} must be a scalar (per-tensor quantization), got shape {shape}")
    return ctx.expr(param)


def _centered(ctx: Any, value: Any, zero_point: Any) -> Any:
    """``int32(value) - int32(zero_point)`` (``zero_point`` None: 0)."""
    out = ctx.expr(ctx.emit(G.op.astype(ctx.expr(value), "int32")))
    if zero_point is None:
        return out
    return ctx.expr(ctx.emit(G.op.subtract(out, ctx.expr(ctx.emit(G.op.astype(zero_point, "int32"))))))


def _requantize(ctx: Any, acc: Any, scales: tuple, y_scale: Any, y_zero_point: Any, qdt: str) -> Any:
    """``saturate(round_half_even(acc * (s1 * s2 / y_scale) + y_zero_point))`` as ``qdt`` (see the note)."""
    multiplier = ctx.expr(ctx.emit(G.op.multiply(*scales)))
    multiplier = ctx.expr(ctx.emit(G.op.divide(multiplier, y_scale)))
    wide = ctx.expr(ctx.emit(G.op.astype(acc, "float64")))
    q = ctx.expr(ctx.emit(G.op.multiply(wide, ctx.expr(ctx.emit(G.op.astype(multiplier, "float64"))))))
    if y_zero_point is not None:
        q = ctx.expr(ctx.emit(G.op.add(q, ctx.expr(ctx.emit(G.op.astype(y_zero_point, "float64"))))))
    q = ctx.expr(ctx.emit(G.op.round(q)))
    lo, hi = _qrange(qdt)
    q = ctx.expr(ctx.emit(G.op.clip(q, float(lo), float(hi))))
    return ctx.emit(G.op.astype(q, qdt))


def _integer_matmul(ctx: Any, node: Any, a: Any, a_zp: Any, b: Any, b_zp: Any) -> Any:
    """The int32 ``(a - a_zp) @ (b - b_zp)`` with zero points per tensor, per row of a, per column of b."""
    _check_type(node, ctx, a, "a")
    _check_type(node, ctx, b, "b")
    sa, sb = tuple(ctx.shape(a)), tuple(ctx.shape(b))
    if len(sa) < 2 or len(sb) < 2:
        raise node.error(f"a and b must have at least 2 dimensions, got {sa} and {sb}: reshape a vector to "
                         f"(1, K) or (K, 1) before the node")
    za = _matmul_param(ctx, node, a_zp, sa, "row", "a_zero_point") if a_zp is not None else None
    zb = _matmul_param(ctx, node, b_zp, sb, "col", "b_zero_point") if b_zp is not None else None
    return ctx.emit(G.op.matmul(_centered(ctx, a, za), _centered(ctx, b, zb)))


@register("MatMulInteger", since=10)
def _matmul_integer(ctx: Any, node: Any) -> Any:
    return _integer_matmul(ctx, node, node.input(0), node.input(2), node.input(1), node.input(3))


@register("QLinearMatMul", since=10)
def _qlinear_matmul(ctx: Any, node: Any) -> Any:
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = (node.input(i) for i in range(8))
    acc = ctx.expr(_integer_matmul(ctx, node, a, a_zp, b, b_zp))
    sa, sb = tuple(ctx.shape(a)), tuple(ctx.shape(b))
    scales = (_matmul_param(ctx, node, a_scale, sa, "row", "a_scale"),
              _matmul_param(ctx, node, b_scale, sb, "col", "b_scale"))
    qdt = ctx.dtype(y_zp) if y_zp is not None else ctx.dtype(a)
    return _requantize(ctx, acc, scales, _scalar(ctx, node, y_scale, "y_scale"),
                       _scalar(ctx, node, y_zp, "y_zero_point") if y_zp is not None else None, qdt)


def _integer_conv(ctx: Any, node: Any, x: Any, x_zp: Any, w: Any, w_zp: Any, bias: Any = None) -> Any:
    """The int32 convolution of ``x - x_zp`` (per tensor) with ``w - w_zp`` (per tensor or output channel)."""
    _check_type(node, ctx, x, "x")
    _check_type(node, ctx, w, "w")
    ws = tuple(ctx.shape(w))
    zx = _scalar(ctx, node, x_zp, "x_zero_point") if x_zp is not None else None
    zw = _channel_param(ctx, node, w_zp, ws[0], len(ws), "w_zero_point") if w_zp is not None else None
    return conv_nd(ctx, node, _centered(ctx, x, zx), _centered(ctx, w, zw), bias)


@register("ConvInteger", since=10)
def _conv_integer(ctx: Any, node: Any) -> Any:
    return _integer_conv(ctx, node, node.input(0), node.input(2), node.input(1), node.input(3))


@register("QLinearConv", since=10)
def _qlinear_conv(ctx: Any, node: Any) -> Any:
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias = (node.input(i) for i in range(9))
    if bias is not None and ctx.dtype(bias) != "int32":
        raise node.error(f"B must be int32 (the bias in the accumulator's scale), got {ctx.dtype(bias)}")
    acc = ctx.expr(_integer_conv(ctx, node, x, x_zp, w, w_zp, ctx.expr(bias) if bias is not None else None))
    ws = tuple(ctx.shape(w))
    # the output is (N, M, spatial...): a per-channel scale is (M, 1, ...) with one 1 per spatial axis
    scales = (_scalar(ctx, node, x_scale, "x_scale"),
              _channel_param(ctx, node, w_scale, ws[0], len(ws) - 1, "w_scale"))
    qdt = ctx.dtype(y_zp) if y_zp is not None else ctx.dtype(x)
    return _requantize(ctx, acc, scales, _scalar(ctx, node, y_scale, "y_scale"),
                       _scalar(ctx, node, y_zp, "y_zero_point") if y_zp is not None else None, qdt)
