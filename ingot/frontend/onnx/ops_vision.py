"""ONNX converters for DeformConv (2-D), RoiAlign and TensorScatter (opset 24 KV-cache update).

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("RoiAlign", 22) is not None and get_converter("TensorScatter", 24) is not None
    True
"""
from __future__ import annotations

from typing import Any

from ingot.graph.op import deform_roi as D

from .importer import register


@register("DeformConv", since=19)
def _deform_conv(ctx: Any, node: Any) -> Any:
    xs, ws = ctx.shape(node.input(0)), ctx.shape(node.input(1))
    if len(xs) != 4:
        raise node.error(f"DeformConv is supported for 2-D images (4-D X), got X of shape {xs}")
    kernel = node.attr("kernel_shape")
    if kernel is not None and tuple(kernel) != tuple(ws[2:]):
        raise node.error(f"kernel_shape {tuple(kernel)} differs from W's spatial shape {tuple(ws[2:])}")
    bias, mask = node.input(3), node.input(4)
    return ctx.emit(D.deform_conv2d(
        ctx.expr(node.input(0)), ctx.expr(node.input(1)), ctx.expr(node.input(2)),
        ctx.expr(bias) if bias is not None else None, ctx.expr(mask) if mask is not None else None,
        node.attr("strides") or (1, 1), node.attr("pads") or (0, 0, 0, 0), node.attr("dilations") or (1, 1),
        node.attr("group", 1), node.attr("offset_group", 1)))


@register("RoiAlign", since=10)
def _roi_align(ctx: Any, node: Any) -> Any:
    # opset 10 had no coordinate_transformation_mode: it behaved as output_half_pixel (no half-pixel shift)
    default = "half_pixel" if node.opset >= 16 else "output_half_pixel"
    return ctx.emit(D.roi_align(
        ctx.expr(node.input(0)), ctx.expr(node.input(1)), ctx.expr(node.input(2)), node.attr("mode", "avg"),
        node.attr("output_height", 1), node.attr("output_width", 1), node.attr("sampling_ratio", 0),
        node.attr("spatial_scale", 1.0), node.attr("coordinate_transformation_mode", default)))


@register("TensorScatter", since=24)
def _tensor_scatter(ctx: Any, node: Any) -> Any:
    indices = node.input(2)
    return ctx.emit(D.tensor_scatter(ctx.expr(node.input(0)), ctx.expr(node.input(1)),
                                     ctx.expr(indices) if indices is not None else None,
                                     node.attr("mode", "linear"), node.attr("axis", -2)))
