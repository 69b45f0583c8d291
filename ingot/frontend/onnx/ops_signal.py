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

from ingot import graph as G
from ingot.graph.op import signal as S
from ingot.ops import signal as signal_ops

from . import ops_dynamic
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
    x = node.input(0)
    ndim = len(ctx.shape(x))
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    n_in, axis_in = node.input(1), node.input(2) if node.opset >= 20 else None
    if not all(v is None or is_static(v) for v in (n_in, axis_in)):
        return _dynamic_dft(ctx, node, ndim, inverse, onesided)
    n = _static_scalar(node, 1, "dft_length")
    if node.opset >= 20:
        axis = _static_scalar(node, 2, "axis")
        axis = -2 if axis is None else int(axis)
    else:
        axis = int(node.attr("axis", 1))
    axis = axis + ndim if axis < 0 else axis
    return ctx.emit(S.dft(ctx.expr(x), None if n is None else int(n), axis, inverse, onesided))


def _dynamic_dft(ctx: Any, node: Any, ndim: int, inverse: bool, onesided: bool) -> Any:
    """DFT whose length or (opset 20) axis is computed at run time: the transformed axis has a fresh
    size (every signal axis has, when the axis itself is not known), the values the dft numpy reference's."""
    x = node.input(0)
    shape = list(ctx.shape(x))
    axis_in = node.input(2) if node.opset >= 20 else None
    runtime = {"n": (node.input(1), "int")}
    if node.opset < 20 or axis_in is None or is_static(axis_in):
        axis = int(node.attr("axis", 1)) if node.opset < 20 else (
            -2 if axis_in is None else int(as_array(axis_in).reshape(-1)[0]))
        axis = axis + ndim if axis < 0 else axis
        attrs = {"axis": axis, "inverse": inverse, "onesided": onesided}
        shape[axis] = ops_dynamic.fresh_dims(ctx, 1)[0]
    else:
        attrs = {"inverse": inverse, "onesided": onesided}
        runtime["axis"] = (axis_in, "int")
        shape[:-1] = ops_dynamic.fresh_dims(ctx, ndim - 1)
    shape[-1] = 1 if inverse and onesided else 2
    return ops_dynamic.op_builtin(ctx, "dft", [x], attrs, runtime, ((tuple(shape), ctx.dtype(x)),))


@register("STFT", since=17)
def _stft(ctx: Any, node: Any) -> Any:
    signal, step_in, window, length_in = (node.input(i) for i in range(4))
    onesided = bool(node.attr("onesided", 1))
    if length_in is None:
        if window is None:
            raise node.error("STFT needs a window or a frame_length")
        length_in = np.array(ctx.shape(window)[0], "int64")
    tensors = [signal] + ([window] if window is not None else [])
    if not (is_static(step_in) and is_static(length_in)):
        # Run-time frame_step / frame_length: the frame count (and bins) are fresh, the values the reference's.
        batch = ctx.shape(signal)[0]
        frames = ops_dynamic.fresh_dims(ctx, 1)[0]
        bins: Any = ops_dynamic.fresh_dims(ctx, 1)[0]
        if is_static(length_in):
            length = int(as_array(length_in).reshape(-1)[0])
            bins = length // 2 + 1 if onesided else length
        return ops_dynamic.op_builtin(ctx, "stft", tensors, {"onesided": onesided},
                                      {"frame_step": (step_in, "int"), "frame_length": (length_in, "int")},
                                      (((batch, frames, bins, 2), ctx.dtype(signal)),))
    step = int(as_array(step_in).reshape(-1)[0])
    length = int(as_array(length_in).reshape(-1)[0])
    win = None if window is None else ctx.expr(window)
    return ctx.emit(S.stft(ctx.expr(signal), step, length, win, onesided))


def _window(kind: str) -> Any:
    def convert(ctx: Any, node: Any) -> Any:
        dtype = np_dtype(int(node.attr("output_datatype", 1)))
        periodic = int(node.attr("periodic", 1))
        if not is_static(node.input(0)):  # a run-time length: the window is computed by the executor
            params = {"kind": kind, "periodic": periodic, "dtype": str(np.dtype(dtype))}
            return ctx.emit(G.op.builtin("window", ctx.expr(node.input(0)), params=params,
                                         outputs=((ops_dynamic.fresh_dims(ctx, 1), str(np.dtype(dtype))),)))
        size = static_ints(node.input(0), node, "the window size")[0]
        return signal_ops.window_numpy(kind, int(size), bool(periodic), dtype)

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
