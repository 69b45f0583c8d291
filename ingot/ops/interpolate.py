"""Interpolation taps written once for numpy and for TIR: GridSample (`ingot.ops.grid_sample`),
DeformConv and RoiAlign (`ingot.ops.deform_roi`) share them.

Note: a sampling op computes, per spatial axis, a pixel coordinate and from it the taps
``[(index, weight, in_range), ...]`` (1 for nearest, 2 for linear, 4 for cubic). That arithmetic is
written once against a tiny math namespace — `NumpyMath` (numpy arrays, the reference) or `TirMath`
(TIR expressions, the kernel) — so the compiled kernel and its reference are the same computation
and agree to the last bit rather than to a tolerance; only the pixel gather differs per op.

Per spatial axis of size ``L``:

* `axis_coord`: ``x = (g + 1) / 2 * (L - 1)`` (``align_corners``) or ``((g + 1) * L - 1) / 2`` from a
  normalized ``g`` in [-1, 1]; ``nearest`` rounds to even; a coordinate outside ``[lo, hi]``
  (`axis_bounds`) is clamped (``border``) or reflected (``reflection``, `reflect`);
* `axis_taps`: taps ``floor(x) + k`` (``k`` in 0..1 for linear, -1..2 for cubic, Keys' a = -0.75,
  `cubic_weights`); a tap outside the image reads 0 (``zeros``: ``in_range`` says which), the clamped
  pixel (``border``) or the reflected one.

Example:
    >>> import numpy as np
    >>> m = NumpyMath("float32")
    >>> [(int(i), float(w)) for i, w, _ in axis_taps(m, np.float32(1.25), 4, "linear", "zeros", True)]
    [(1, 0.75), (2, 0.25)]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import tir

from ._util import const_like

__all__ = ["CUBIC_A", "NumpyMath", "TirMath", "axis_bounds", "axis_coord", "axis_taps", "cubic_weights", "reflect"]

#: Keys' cubic convolution parameter of PyTorch's and ONNX's bicubic sampling.
CUBIC_A = -0.75


class NumpyMath:
    """The math namespace over numpy arrays (the reference side).

    Example:
        >>> import numpy as np
        >>> m = NumpyMath("float32")
        >>> m.clamp_int(np.array([-2, 1, 9]), 0, 3).tolist(), m.c(0.5).dtype.name
        ([0, 1, 3], 'float32')
    """

    floor, abs, trunc = staticmethod(np.floor), staticmethod(np.abs), staticmethod(np.trunc)
    select = staticmethod(np.where)
    rint = staticmethod(np.rint)

    def __init__(self, dtype: Any):
        self.dtype = np.dtype(dtype)

    def c(self, v: float) -> Any:
        """The constant ``v`` in the float dtype."""
        return self.dtype.type(v)

    def to_int(self, v: Any) -> Any:
        """``v`` as int64 (truncation)."""
        return v.astype(np.int64)

    def to_float(self, v: Any) -> Any:
        """``v`` in the float dtype."""
        return v.astype(self.dtype)

    def clamp_int(self, i: Any, lo: int, hi: Any) -> Any:
        """Integer ``i`` clamped to ``[lo, hi]``."""
        return np.clip(i, lo, hi)

    def clamp(self, v: Any, lo: Any, hi: Any) -> Any:
        """``v`` clamped to ``[lo, hi]``."""
        return np.minimum(np.maximum(v, lo), hi)

    def is_even(self, i: Any) -> Any:
        """Whether integer ``i`` is even."""
        return i % 2 == 0


class TirMath:
    """The math namespace over TIR expressions (the kernel side), with `NumpyMath`'s methods.

    Example:
        >>> from ingot.ir import Var
        >>> m = TirMath("float32")
        >>> str(m.to_float(Var("i", "int64")).dtype)
        'float32'
    """

    floor, abs, trunc = staticmethod(tir.floor), staticmethod(tir.abs), staticmethod(tir.trunc)
    select = staticmethod(tir.select)
    rint = staticmethod(tir.nearbyint)

    def __init__(self, dtype: Any):
        self.dtype = str(dtype)

    def c(self, v: float) -> Any:
        """The constant ``v`` in the float dtype."""
        return const_like(v, self.dtype)

    def to_int(self, v: Any) -> Any:
        """``v`` as int64 (truncation)."""
        return v.astype("int64")

    def to_float(self, v: Any) -> Any:
        """``v`` in the float dtype."""
        return v.astype(self.dtype)

    def clamp_int(self, i: Any, lo: int, hi: Any) -> Any:
        """Integer ``i`` clamped to ``[lo, hi]`` (``hi`` an int or an int64 expression)."""
        return tir.min(tir.max(i, tir.const(lo, "int64")), tir.const(hi, "int64") if isinstance(hi, int) else hi)

    def clamp(self, v: Any, lo: Any, hi: Any) -> Any:
        """``v`` clamped to ``[lo, hi]``."""
        return tir.min(tir.max(v, lo), hi)

    def is_even(self, i: Any) -> Any:
        """Whether integer ``i`` is even."""
        return tir.floormod(i, tir.const(2, "int64")) == tir.const(0, "int64")


def reflect(m: Any, x: Any, lo: float, hi: float) -> Any:
    """``x`` folded back into ``[lo, hi]`` by reflecting at the borders (as many times as needed).

    Example:
        >>> import numpy as np
        >>> reflect(NumpyMath("float32"), np.array([-1.0, 2.0, 7.5], "float32"), 0.0, 3.0).tolist()
        [1.0, 2.0, 1.5]
    """
    span = hi - lo
    if span <= 0:
        return m.select(x == x, m.c(lo), x)   # a 1-pixel axis: every coordinate is that pixel
    below = x < m.c(lo)
    dx = m.select(below, m.c(lo) - x, x - m.c(hi))
    n = m.trunc(dx / m.c(span))
    r = dx - n * m.c(span)
    even = m.is_even(m.to_int(n))
    from_lo, from_hi = m.c(lo) + r, m.c(hi) - r
    folded = m.select(below, m.select(even, from_lo, from_hi), m.select(even, from_hi, from_lo))
    return m.select((x < m.c(lo)) | (x > m.c(hi)), folded, x)


def cubic_weights(m: Any, t: Any) -> list:
    """The 4 cubic-convolution weights (taps ``-1, 0, 1, 2``) at fraction ``t`` (Keys, a = `CUBIC_A`).

    Example:
        >>> [float(w) for w in cubic_weights(NumpyMath("float32"), np.float32(0.0))]
        [0.0, 1.0, 0.0, 0.0]
    """
    a = m.c(CUBIC_A)
    one, two = m.c(1.0), m.c(2.0)

    def near(d: Any) -> Any:
        return ((a + m.c(2.0)) * d - (a + m.c(3.0))) * d * d + one

    def far(d: Any) -> Any:
        return ((a * d - m.c(5.0) * a) * d + m.c(8.0) * a) * d - m.c(4.0) * a

    return [far(t + one), near(t), near(one - t), far(two - t)]


def axis_bounds(length: int, align_corners: bool) -> tuple:
    """``(lo, hi)``: the coordinates inside an axis of ``length`` pixels (pixel centres with
    ``align_corners``, pixel edges without).

    Example:
        >>> axis_bounds(4, True), axis_bounds(4, False)
        ((0.0, 3.0), (-0.5, 3.5))
    """
    return (0.0, float(length - 1)) if align_corners else (-0.5, length - 0.5)


def axis_coord(m: Any, g: Any, length: int, mode: str, padding_mode: str, align_corners: bool) -> Any:
    """The pixel coordinate of the normalized ``g`` (in [-1, 1]) on one axis, rounded (``nearest``) and
    brought inside the image (``border``, ``reflection``).

    Example:
        >>> float(axis_coord(NumpyMath("float32"), np.float32(0.0), 4, "linear", "zeros", True))
        1.5
    """
    if align_corners:
        x = (g + m.c(1.0)) / m.c(2.0) * m.c(length - 1)
    else:
        x = ((g + m.c(1.0)) * m.c(length) - m.c(1.0)) / m.c(2.0)
    lo, hi = axis_bounds(length, align_corners)
    if mode == "nearest":
        x = m.rint(x)
    if padding_mode == "border":   # only outside [lo, hi]: cubic taps of -0.3 differ from those of 0
        x = m.select((x < m.c(lo)) | (x > m.c(hi)), m.clamp(x, m.c(0.0), m.c(length - 1)), x)
    elif padding_mode == "reflection":
        x = reflect(m, x, lo, hi)
    return x


def axis_taps(m: Any, x: Any, length: int, mode: str, padding_mode: str, align_corners: bool) -> list:
    """``[(index, weight, in_range), ...]`` of one axis at pixel coordinate ``x`` (`axis_coord`):
    one tap for ``nearest`` (weight None), 2 for ``linear``, 4 for ``cubic``. ``index`` is always
    inside ``[0, length)``; ``in_range`` (is the tap inside the image?) is None unless padding is
    ``zeros``.

    Example:
        >>> taps = axis_taps(NumpyMath("float32"), np.float32(-0.5), 4, "linear", "zeros", True)
        >>> [(int(i), float(w), bool(ok)) for i, w, ok in taps]
        [(0, 0.5, False), (0, 0.5, True)]
    """
    lo, hi = axis_bounds(length, align_corners)

    def pixel(i: Any) -> tuple:
        if padding_mode == "zeros":
            return m.clamp_int(i, 0, length - 1), (i >= 0) & (i < length)
        if padding_mode == "reflection":
            i = m.to_int(reflect(m, m.to_float(i), lo, hi))
        return m.clamp_int(i, 0, length - 1), None

    if mode == "nearest":
        idx, ok = pixel(m.to_int(x))   # x is integral here: the conversion is exact (truncation)
        return [(idx, None, ok)]
    x0 = m.floor(x)
    t = x - x0
    i0 = m.to_int(x0)
    if mode == "linear":
        (a_idx, a_ok), (b_idx, b_ok) = pixel(i0), pixel(i0 + 1)
        return [(a_idx, m.c(1.0) - t, a_ok), (b_idx, t, b_ok)]
    taps = [pixel(i0 + k) for k in (-1, 0, 1, 2)]
    return [(idx, w, ok) for (idx, ok), w in zip(taps, cubic_weights(m, t))]
