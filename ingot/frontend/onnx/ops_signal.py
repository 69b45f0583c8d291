"""ONNX converters for signal processing: DFT (opset 17 and 20 forms), STFT, HannWindow/HammingWindow/
BlackmanWindow and MelWeightMatrix (the last four fold to constants: their inputs are sizes).

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("DFT", 20) is not None
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot.graph.op import signal as S
from ingot.ops import signal as signal_ops

from ._common import as_array, is_static, static_ints
from .importer import np_dtype, register


def _static_scalar(node: Any, index: int, what: str) -> "int | float | None":
    value = node.input(index)
    if value is None:
        return None
    if not is_static(value):
        raise node.error(f"{what} (input {index}) must be known at import time (a constant or an initializer); "
                         f"fix the shapes with shape_dict so it folds")
    return as_array(value).reshape(-1)[0].item()


@register("DFT", since=17)
def _dft(ctx: Any, node: Any) -> Any:
    n = _static_scalar(node, 1, "dft_length")
    if node.opset >= 20:
        axis = _static_scalar(node, 2, "axis")
        axis = -2 if axis is None else int(axis)
    else:
        axis = int(node.attr("axis", 1))
    x = node.input(0)
    ndim = len(ctx.shape(x))
    axis = axis + ndim if axis < 0 else axis
    return ctx.emit(S.dft(ctx.expr(x), None if n is None else int(n), axis, bool(node.attr("inverse", 0)),
                          bool(node.attr("onesided", 0))))


@register("STFT", since=17)
def _stft(ctx: Any, node: Any) -> Any:
    step = _static_scalar(node, 1, "frame_step")
    window = node.input(2)
    length = _static_scalar(node, 3, "frame_length")
    if length is None:
        if window is None:
            raise node.error("STFT needs a window or a frame_length")
        length = ctx.shape(window)[0]
    win = None if window is None else ctx.expr(window)
    return ctx.emit(S.stft(ctx.expr(node.input(0)), int(step), int(length), win, bool(node.attr("onesided", 1))))


def _window(kind: str) -> Any:
    def convert(ctx: Any, node: Any) -> np.ndarray:
        size = static_ints(node.input(0), node, "the window size")[0]
        dtype = np_dtype(int(node.attr("output_datatype", 1)))
        return signal_ops.window_numpy(kind, int(size), bool(node.attr("periodic", 1)), dtype)

    return convert


register("HannWindow", since=17)(_window("hann"))
register("HammingWindow", since=17)(_window("hamming"))
register("BlackmanWindow", since=17)(_window("blackman"))


@register("MelWeightMatrix", since=17)
def _mel_weight_matrix(ctx: Any, node: Any) -> np.ndarray:
    values = [_static_scalar(node, i, name) for i, name in enumerate(
        ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"))]
    dtype = np_dtype(int(node.attr("output_datatype", 1)))
    return signal_ops.mel_weight_matrix_numpy(int(values[0]), int(values[1]), int(values[2]), float(values[3]),
                                              float(values[4]), dtype)
