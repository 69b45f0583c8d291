"""ONNX converters for image ops: GridSample (1-3 spatial axes), AffineGrid, Col2Im; and Det.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("GridSample", 20) is not None
    True
"""
from __future__ import annotations

from typing import Any

from ingot.graph.op import col2im_det as C
from ingot.graph.op import sampling as S

from ._common import static_ints
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
    size = static_ints(node.input(1), node, "AffineGrid's size")
    return ctx.emit(S.affine_grid(ctx.expr(node.input(0)), size, bool(node.attr("align_corners", 0))))


@register("Col2Im", since=18)
def _col2im(ctx: Any, node: Any) -> Any:
    image = static_ints(node.input(1), node, "Col2Im's image_shape")
    block = static_ints(node.input(2), node, "Col2Im's block_shape")
    return ctx.emit(C.col2im(ctx.expr(node.input(0)), image, block, node.attr("dilations"), node.attr("pads"),
                             node.attr("strides")))


@register("Det", since=11)
def _det(ctx: Any, node: Any) -> Any:
    return ctx.emit(C.det(ctx.expr(node.input(0))))
