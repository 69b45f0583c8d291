"""ONNX converters on the frontend's extra graph ops (`ingot.graph.op.onnx_extra`): ArgMax, ArgMin,
TopK, CumSum, BitShift, BitwiseAnd/Or/Xor/Not.

Note: TopK's values are ``gather_elements`` of its indices, so both outputs come from one ranking;
CumSum's ``reverse`` is a flip (``take`` with reversed positions) on both sides of the scan.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("ArgMax", 13) is not None
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import graph as G
from ingot.graph.op import onnx_extra as X

from ._common import as_array, is_static, norm_axes, static_ints
from .importer import register


def _axis(ctx: Any, node: Any, x: Any, axis: int) -> int:
    return norm_axes([axis], len(ctx.shape(x)))[0]


def _arg(kind: str) -> Any:
    def convert(ctx: Any, node: Any) -> Any:
        x = node.input(0)
        axis = _axis(ctx, node, x, node.attr("axis", 0))
        keep, last = bool(node.attr("keepdims", 1)), bool(node.attr("select_last_index", 0))
        fn = G.op.argmax if kind == "max" else G.op.argmin
        return ctx.emit(fn(ctx.expr(x), axis=axis, keepdims=keep, select_last_index=last))

    return convert


register("ArgMax", since=1)(_arg("max"))
register("ArgMin", since=1)(_arg("min"))


@register("TopK", since=1)
def _topk(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    if node.opset >= 10:
        k = static_ints(node.input(1), node, "K")[0]
    else:
        k = int(node.attr("k"))
    axis = _axis(ctx, node, x, node.attr("axis", -1))
    largest = bool(node.attr("largest", 1))
    n = ctx.shape(x)[axis]
    if not isinstance(n, int):
        raise node.error(f"TopK needs a static size on axis {axis}, got {n}; fix it with shape_dict")
    e = ctx.expr(x)
    idx = ctx.emit(X.topk_indices(e, k=int(k), axis=axis, largest=largest))
    values = ctx.emit(G.op.gather_elements(e, ctx.expr(idx), axis=axis))
    return [values, idx]


def _flip(ctx: Any, value: Any, axis: int) -> Any:
    n = ctx.shape(value)[axis]
    return ctx.expr(ctx.emit(G.op.take(ctx.expr(value), G.const(np.arange(n - 1, -1, -1, dtype="int64")), axis=axis)))


@register("CumSum", since=11)
def _cumsum(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    axis = _axis(ctx, node, x, static_ints(node.input(1), node, "axis")[0])
    exclusive, reverse = bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0))
    if is_static(x):
        arr = as_array(x)
        arr = np.flip(arr, axis) if reverse else arr
        out = np.cumsum(arr, axis=axis).astype(arr.dtype)
        out = out - arr if exclusive else out
        return np.flip(out, axis).copy() if reverse else out
    if reverse and not isinstance(ctx.shape(x)[axis], int):
        raise node.error(f"CumSum reverse=1 needs a static size on axis {axis}")
    e = _flip(ctx, x, axis) if reverse else ctx.expr(x)
    out = ctx.emit(G.op.cumsum(e, axis=axis, exclusive=exclusive))
    return _flip(ctx, out, axis) if reverse else out


def _bitwise(kind: str) -> Any:
    def convert(ctx: Any, node: Any) -> Any:
        a, b = node.input(0), node.input(1)
        if kind == "shift":
            direction = str(node.attr("direction", "")).upper()
            if direction not in ("LEFT", "RIGHT"):
                raise node.error(f"BitShift direction must be 'LEFT' or 'RIGHT', got {direction!r}")
            op = "shift_left" if direction == "LEFT" else "shift_right"
        else:
            op = kind
        return ctx.emit(X.bitwise(ctx.expr(a), ctx.expr(b), op))

    return convert


register("BitShift", since=11)(_bitwise("shift"))
register("BitwiseAnd", since=18)(_bitwise("and"))
register("BitwiseOr", since=18)(_bitwise("or"))
register("BitwiseXor", since=18)(_bitwise("xor"))


@register("BitwiseNot", since=18)
def _bitwise_not(ctx: Any, node: Any) -> Any:
    return ctx.emit(X.bitwise_not(ctx.expr(node.input(0))))
