"""Signal-processing graph operators: ``dft`` and ``stft`` (ONNX DFT/STFT; TE computes and numpy
references in `ingot.ops.signal`). Complex tensors carry a last axis of 2 (re, im); real ones of 1.

Note: registered when this module is imported (the ONNX frontend's ``ops_signal`` imports it), with
the idempotent registration of `onnx_extra`.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2, 16, 1), "float32"))
    >>> str(dft(x, axis=1, onesided=True).struct_info)
    'R.Tensor((2, 9, 2), dtype="float32")'
"""
from __future__ import annotations

from typing import Any

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error
from ..struct_info import TensorStructInfo
from ._common import known_shape, tensor_sinfo, topi
from .onnx_extra import _register


def _signal_sinfo(op: str, arg: Any, index: int = 0) -> tuple:
    s = tensor_sinfo(op, arg, index)
    shape = list(known_shape(op, s, index))
    if not shape or shape[-1] not in (1, 2):
        raise op_error(op, f"argument {index} must end in an axis of 1 (real) or 2 (re, im), got {tuple(shape)}")
    if not s.dtype.is_float:
        raise op_error(op, f"needs a floating-point signal, got {s.dtype}")
    return shape, s.dtype


def _infer_dft(args: Any, attrs: Any) -> TensorStructInfo:
    from ingot.ops.signal import dft_output_length

    shape, dtype = _signal_sinfo("dft", args[0])
    axis = attrs["axis"] % len(shape)
    if axis == len(shape) - 1 or axis == 0 and len(shape) < 2:
        raise op_error("dft", f"axis {attrs['axis']} must be a signal axis, not the last (re, im) axis of {tuple(shape)}")
    if not isinstance(shape[axis], int):
        raise op_error("dft", f"the transformed axis must have a static length, got {shape[axis]}")
    _, out_len = dft_output_length(shape[axis], attrs["n"], attrs["inverse"], attrs["onesided"])
    shape[axis] = out_len
    shape[-1] = 1 if attrs["inverse"] and attrs["onesided"] else 2
    return TensorStructInfo(shape, dtype)


_register(
    "dft", num_inputs=1, pattern=OpPattern.OPAQUE,
    attrs={"n": None, "axis": 1, "inverse": False, "onesided": False},
    normalize_attrs=lambda attrs, args: {"n": None if attrs["n"] is None else int(attrs["n"]),
                                         "axis": int(attrs["axis"]), "inverse": bool(attrs["inverse"]),
                                         "onesided": bool(attrs["onesided"])},
    infer=_infer_dft,
    legalize=lambda inputs, attrs, out: topi("signal").dft(inputs[0], attrs["n"], attrs["axis"], attrs["inverse"],
                                                           attrs["onesided"]),
    numpy=lambda args, attrs: topi("signal").dft_numpy(args[0], attrs["n"], attrs["axis"], attrs["inverse"],
                                                       attrs["onesided"]),
)


def dft(x: Expr, n: "int | None" = None, axis: int = 1, inverse: bool = False, onesided: bool = False) -> Call:
    """The discrete Fourier transform of ``x`` along ``axis`` (ONNX DFT): zero-padded or truncated to
    ``n`` points; ``inverse`` scales by 1/n; ``onesided`` keeps n//2+1 bins (forward) or takes a
    one-sided spectrum to a real signal (inverse, numpy's irfft).

    Example: see the module docstring.
    """
    return make_call("dft", [x], n=n, axis=axis, inverse=inverse, onesided=onesided)


def _infer_stft(args: Any, attrs: Any) -> TensorStructInfo:
    from ingot.ops.signal import stft_output_shape

    shape, dtype = _signal_sinfo("stft", args[0])
    if len(shape) != 3:
        raise op_error("stft", f"the signal must be (batch, length, 1|2), got {tuple(shape)}")
    if len(args) > 1:
        wshape = known_shape("stft", tensor_sinfo("stft", args[1], 1), 1)
        if tuple(wshape) != (attrs["frame_length"],):
            raise op_error("stft", f"window of shape {tuple(wshape)} must be ({attrs['frame_length']},)")
    if not isinstance(shape[1], int) or shape[1] < attrs["frame_length"]:
        raise op_error("stft", f"signal length {shape[1]} must be static and at least frame_length "
                               f"{attrs['frame_length']}")
    return TensorStructInfo(stft_output_shape(tuple(shape), attrs["frame_step"], attrs["frame_length"],
                                              attrs["onesided"]), dtype)


_register(
    "stft", num_inputs=None, pattern=OpPattern.OPAQUE,
    attrs={"frame_step": None, "frame_length": None, "onesided": True},
    normalize_attrs=lambda attrs, args: {"frame_step": int(attrs["frame_step"]),
                                         "frame_length": int(attrs["frame_length"]),
                                         "onesided": bool(attrs["onesided"])},
    infer=_infer_stft,
    legalize=lambda inputs, attrs, out: topi("signal").stft(
        inputs[0], attrs["frame_step"], inputs[1] if len(inputs) > 1 else None, attrs["frame_length"],
        attrs["onesided"]),
    numpy=lambda args, attrs: topi("signal").stft_numpy(
        args[0], attrs["frame_step"], args[1] if len(args) > 1 else None, attrs["frame_length"], attrs["onesided"]),
)


def stft(signal: Expr, frame_step: int, frame_length: int, window: "Expr | None" = None,
         onesided: bool = True) -> Call:
    """Short-time Fourier transform (ONNX STFT): frames of ``frame_length`` every ``frame_step``
    samples, times ``window``, transformed; (batch, frames, bins, 2).

    Example:
        >>> from ingot import graph as G
        >>> s = G.Var("s", G.TensorStructInfo((1, 64, 1), "float32"))
        >>> str(stft(s, 8, 16).struct_info)
        'R.Tensor((1, 7, 9, 2), dtype="float32")'
    """
    args = [signal] if window is None else [signal, window]
    return make_call("stft", args, frame_step=frame_step, frame_length=frame_length, onesided=onesided)
