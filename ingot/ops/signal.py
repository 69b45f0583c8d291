"""Signal processing: ``dft`` (ONNX DFT, forward/inverse, real/complex, one-sided, irfft), ``stft``,
window functions and the mel filter bank: TE computes and numpy references.

Note: complex tensors are real tensors with a last axis of 2 (re, im), as ONNX stores them; a real
signal has a last axis of 1. The DFT is the direct sum (O(N^2) per transform, a reduction the
default schedules handle like any other): signal lengths in models (audio frames of 256-2048) make
that a few million multiply-adds per frame, and the twiddle angle ``2*pi*((k*n) mod N)/N`` is formed
from an exact integer product, so large ``k*n`` lose no accuracy. numpy references use ``np.fft``.

Example:
    >>> import numpy as np
    >>> x = np.array([1, 2, 3, 4], "float32").reshape(1, 4, 1)
    >>> dft_numpy(x, axis=1)[0, :, 0].tolist()
    [10.0, -2.0, -2.0, -2.0]
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ingot import te, tir

from ._util import compute, const_like


def dft_output_length(length: int, n: "int | None", inverse: bool, onesided: bool) -> tuple:
    """``(transform length N, output length along the axis)`` of a DFT of a signal of ``length``.

    Example:
        >>> dft_output_length(8, None, False, True)
        (8, 5)
    """
    if n is None:
        n = 2 * (length - 1) if (inverse and onesided) else length
    if inverse:
        return n, n
    return n, (n // 2 + 1 if onesided else n)


def dft_numpy(x: np.ndarray, n: "int | None" = None, axis: int = 1, inverse: bool = False,
              onesided: bool = False) -> np.ndarray:
    """numpy reference of `dft` (ONNX DFT semantics, ``axis`` a signal axis, not the last one).

    Example: see the module docstring.
    """
    x = np.asarray(x)
    axis = axis % x.ndim
    z = x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]
    length, _ = dft_output_length(x.shape[axis], n, inverse, onesided)
    if inverse and onesided:
        out = np.fft.irfft(z, n=length, axis=axis)[..., None]
    elif inverse:
        y = np.fft.ifft(z, n=length, axis=axis)
        out = np.stack([y.real, y.imag], axis=-1)
    else:
        y = np.fft.fft(z, n=length, axis=axis)
        if onesided:
            y = np.take(y, np.arange(length // 2 + 1), axis=axis)
        out = np.stack([y.real, y.imag], axis=-1)
    return out.astype(x.dtype)


def dft(x: Any, n: "int | None" = None, axis: int = 1, inverse: bool = False, onesided: bool = False) -> Any:
    """TE: the DFT of ``x`` (..., L, ..., 1|2) along ``axis`` (see `dft_numpy`).

    Example:
        >>> y = dft(te.placeholder((2, 16, 1), name="x"), axis=1, onesided=True)
        >>> [int(d) for d in y.shape]
        [2, 9, 2]
    """
    ndim = len(x.shape)
    axis = axis % ndim
    length = int(x.shape[axis])
    complex_in = int(x.shape[-1]) == 2
    N, out_len = dft_output_length(length, n, inverse, onesided)
    irfft = inverse and onesided
    used = min(length, N // 2 + 1) if irfft else min(length, N)
    out_dtype, dtype = str(x.dtype), "float64"   # accumulate in float64: bins that cancel to 0 stay ~0
    j = te.reduce_axis((0, used), name="j")
    shape = list(x.shape)
    shape[axis] = out_len
    shape[-1] = 1 if irfft else 2
    two_pi_over_n = 2.0 * math.pi / N

    def body(idx: tuple) -> Any:
        k, part = idx[axis], idx[-1]
        src = list(idx)
        src[axis] = j
        xr = x[tuple(src[:-1]) + (0,)].astype(dtype)
        xi = x[tuple(src[:-1]) + (1,)].astype(dtype) if complex_in else None
        angle = tir.floormod(k.astype("int64") * j.astype("int64"), tir.const(N, "int64")).astype(dtype) \
            * const_like(two_pi_over_n, dtype)
        c, s = tir.cos(angle), tir.sin(angle)
        if irfft:
            # x[n] = 1/N sum_k w_k Re(Z_k e^{i theta}), w = 1 at 0 and N/2, else 2 (Hermitian half)
            weight = tir.select((j.var == 0) | (j.var * 2 == N), const_like(1.0, dtype), const_like(2.0, dtype))
            term = (xr * c - xi * s) if xi is not None else xr * c
            return te.sum(term * weight * const_like(1.0 / N, dtype), axis=j)
        sign = const_like(1.0 if inverse else -1.0, dtype)       # e^{sign * i * theta}
        s = s * sign
        if xi is None:
            re, im = xr * c, xr * s
        else:
            re, im = xr * c - xi * s, xi * c + xr * s
        term = tir.select(part == 0, re, im)
        if inverse:
            term = term * const_like(1.0 / N, dtype)
        return te.sum(term, axis=j)

    acc = compute(shape, body, "T_dft", tag="dft")
    return acc if out_dtype == dtype else compute(shape, lambda idx: acc[tuple(idx)].astype(out_dtype), "T_dft_cast",
                                                  tag="elemwise")


# -- windows -------------------------------------------------------------------------------------

#: ONNX's cosine-sum windows: coefficients a0, a1, a2 of a0 - a1 cos(2 pi n/N) + a2 cos(4 pi n/N).
WINDOWS = {
    "hann": (0.5, 0.5, 0.0),
    "hamming": (25.0 / 46.0, 1.0 - 25.0 / 46.0, 0.0),
    "blackman": (0.42, 0.5, 0.08),
}


def window_numpy(kind: str, size: int, periodic: bool = True, dtype: str = "float32") -> np.ndarray:
    """ONNX HannWindow/HammingWindow/BlackmanWindow (computed in float64, rounded once).

    Example:
        >>> window_numpy("hann", 4).tolist()
        [0.0, 0.5, 1.0, 0.5]
    """
    a0, a1, a2 = WINDOWS[kind]
    denom = size if periodic else size - 1
    k = np.arange(size, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = a0 - a1 * np.cos(2 * np.pi * k / denom) + a2 * np.cos(4 * np.pi * k / denom)
    return w.astype(dtype)


# -- mel filter bank -------------------------------------------------------------------------------


def mel_weight_matrix_numpy(num_mel_bins: int, dft_length: int, sample_rate: int, lower_edge_hertz: float,
                            upper_edge_hertz: float, dtype: str = "float32") -> np.ndarray:
    """ONNX MelWeightMatrix: (dft_length // 2 + 1, num_mel_bins) triangular filters. The
    ``num_mel_bins + 2`` edges are equally spaced in mel (``2595 log10(1 + f/700)``; the step
    divides the range by the number of edges, as ONNX does) and truncated to FFT bins
    ``(dft_length + 1) * f // sample_rate``; filter ``i`` rises from edge ``i`` to ``i+1`` and falls to ``i+2``.

    Example:
        >>> mel_weight_matrix_numpy(2, 8, 8000, 0, 4000).shape
        (5, 2)
    """
    edges_mel = np.arange(num_mel_bins + 2) * ((_mel(upper_edge_hertz) - _mel(lower_edge_hertz))
                                               / (num_mel_bins + 2)) + _mel(lower_edge_hertz)
    hertz = 700 * np.expm1(edges_mel / 2595 * np.log(10))
    edges = ((dft_length + 1) * hertz // sample_rate).astype(np.int64)
    lo, centre, hi = edges[:-2], edges[1:-1], edges[2:]
    j = np.arange(dft_length // 2 + 1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        rising = np.where(centre > lo, (j - lo) / (centre - lo), (j == centre).astype(np.float64))
        falling = (hi - j) / (hi - centre)
    out = np.where((j >= centre) & (j < hi), falling, np.where((j >= lo) & (j <= centre), rising, 0.0))
    return out.astype(dtype)


def _mel(hertz: float) -> float:
    return 2595 * np.log1p(hertz / 700) / np.log(10)


# -- STFT --------------------------------------------------------------------------------------------


def stft_output_shape(signal_shape: tuple, frame_step: int, frame_length: int, onesided: bool) -> tuple:
    """``(batch, frames, bins, 2)`` of ONNX STFT.

    Example:
        >>> stft_output_shape((1, 128, 1), 8, 16, True)
        (1, 15, 9, 2)
    """
    frames = 1 + (int(signal_shape[1]) - frame_length) // frame_step
    return (signal_shape[0], frames, frame_length // 2 + 1 if onesided else frame_length, 2)


def stft_numpy(signal: np.ndarray, frame_step: int, window: "np.ndarray | None", frame_length: int,
               onesided: bool = True) -> np.ndarray:
    """numpy reference of `stft`: windowed frames of ``signal`` (batch, length, 1|2), each transformed.

    Example:
        >>> stft_numpy(np.ones((1, 8, 1), "float32"), 4, None, 4)[0, :, 0, 0].tolist()
        [4.0, 4.0]
    """
    signal = np.asarray(signal)
    _, frames, bins, _ = stft_output_shape(signal.shape, frame_step, frame_length, onesided)
    z = signal[..., 0] if signal.shape[-1] == 1 else signal[..., 0] + 1j * signal[..., 1]
    starts = np.arange(frames)[:, None] * frame_step + np.arange(frame_length)[None, :]
    framed = z[:, starts]                                     # (batch, frames, frame_length)
    if window is not None:
        framed = framed * np.asarray(window)
    y = np.fft.fft(framed, axis=-1)[..., :bins]
    return np.stack([y.real, y.imag], axis=-1).astype(signal.dtype)


def stft(signal: Any, frame_step: int, window: Any, frame_length: int, onesided: bool = True) -> Any:
    """TE of `stft_numpy` (``window`` a (frame_length,) tensor or None).

    Example:
        >>> y = stft(te.placeholder((1, 64, 1), name="s"), 8, None, 16)
        >>> [int(d) for d in y.shape]
        [1, 7, 9, 2]
    """
    shape = stft_output_shape(tuple(signal.shape), frame_step, frame_length, onesided)
    complex_in = int(signal.shape[-1]) == 2
    out_dtype, dtype = str(signal.dtype), "float64"   # accumulated in float64, as in `dft`
    n = te.reduce_axis((0, frame_length), name="n")

    def body(idx: tuple) -> Any:
        b, f, k, part = idx
        pos = f * frame_step + n
        xr = signal[b, pos, 0].astype(dtype)
        xi = signal[b, pos, 1].astype(dtype) if complex_in else None
        if window is not None:
            w = window[n] if str(window.dtype) == dtype else window[n].astype(dtype)
            xr = xr * w
            xi = xi * w if xi is not None else None
        angle = tir.floormod(k.astype("int64") * n.astype("int64"), tir.const(frame_length, "int64")).astype(dtype) \
            * const_like(2.0 * math.pi / frame_length, dtype)
        c, s = tir.cos(angle), -tir.sin(angle)
        re, im = (xr * c, xr * s) if xi is None else (xr * c - xi * s, xi * c + xr * s)
        return te.sum(tir.select(part == 0, re, im), axis=n)

    acc = compute(list(shape), body, "T_stft", tag="dft")
    return acc if out_dtype == dtype else compute(list(shape), lambda idx: acc[tuple(idx)].astype(out_dtype),
                                                  "T_stft_cast", tag="elemwise")
