"""ONNX converters for image ops: GridSample (1-3 spatial axes), AffineGrid, Col2Im; and Det.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("GridSample", 20) is not None
    True
"""
from __future__ import annotations

import math
from typing import Any

from ingot.graph.op import col2im_det as C
from ingot.graph.op import sampling as S

from . import ops_dynamic
from ._common import is_static, static_ints
from .importer import register


@register("GridSample", since=16)
def _grid_sample(ctx: Any, node: Any) -> Any:
    mode = node.attr("mode", "linear" if node.opset >= 20 else "bilinear")
    padding = node.attr("padding_mode", "zeros")
    x, grid = ctx.expr(node.input(0)), ctx.expr(node.input(1))
    spatial = len(ctx.shape(node.input(0))) - 2
    if spatial != 2 and node.opset < 20:
        raise node.error(f"GridSample before opset 20 takes 4-D input, got {spatial + 2}-D")
    return ctx.emit(S.grid_sample(x, grid, mode, padding, bool(node.attr("align_corners", 0))))


@register("AffineGrid", since=20)
def _affine_grid(ctx: Any, node: Any) -> Any:
    theta, size = node.input(0), node.input(1)
    align = bool(node.attr("align_corners", 0))
    if not is_static(size):  # a run-time size: the grid's spatial dims are fresh, its values the numpy reference's
        n, d = ctx.shape(theta)[:2]
        dims = (n, *ops_dynamic.fresh_dims(ctx, int(d)), d)
        return ops_dynamic.op_builtin(ctx, "affine_grid", [theta], {"align_corners": align},
                                      {"size": (size, "ints")}, ((dims, ctx.dtype(theta)),))
    return ctx.emit(S.affine_grid(ctx.expr(theta), static_ints(size, node, "AffineGrid's size"), align))


@register("Col2Im", since=18)
def _col2im(ctx: Any, node: Any) -> Any:
    if not (is_static(node.input(1)) and is_static(node.input(2))):
        return _dynamic_col2im(ctx, node)
    image = static_ints(node.input(1), node, "Col2Im's image_shape")
    block = static_ints(node.input(2), node, "Col2Im's block_shape")
    return ctx.emit(C.col2im(ctx.expr(node.input(0)), image, block, node.attr("dilations"), node.attr("pads"),
                             node.attr("strides")))


def _dynamic_col2im(ctx: Any, node: Any) -> Any:
    """Col2Im whose image or block shape is computed at run time: the image's dims are fresh (and the
    channels too when the block is not known), the values the col2im numpy reference's."""
    x, image, block = node.input(0), node.input(1), node.input(2)
    n, ck = ctx.shape(x)[:2]
    spatial = ops_dynamic.fresh_dims(ctx, ops_dynamic.static_length(ctx, node, image, "Col2Im's image_shape"))
    c = ck // math.prod(static_ints(block, node, "block_shape")) if is_static(block) else ops_dynamic.fresh_dims(
        ctx, 1)[0]
    attrs = {k: node.attr(k) for k in ("dilations", "pads", "strides")}
    return ops_dynamic.op_builtin(ctx, "col2im", [x], attrs, {"image_shape": (image, "ints"),
                                                              "block_shape": (block, "ints")},
                                  (((n, c, *spatial), ctx.dtype(x)),))


@register("Det", since=11)
def _det(ctx: Any, node: Any) -> Any:
    return ctx.emit(C.det(ctx.expr(node.input(0))))
