"""Image operators: ``resize2d`` (nearest and bilinear, TVM/ONNX coordinate transformation modes).

Note: for each output coordinate ``x`` along an axis of input size ``in`` and output size ``out``
the source coordinate is (ONNX ``coordinate_transformation_mode``, TVM's names):
  * ``half_pixel``: ``(x + 0.5) * in / out - 0.5``;
  * ``pytorch_half_pixel``: the same, but 0 when ``out == 1``;
  * ``align_corners``: ``x * (in - 1) / (out - 1)`` (0 when ``out == 1``);
  * ``asymmetric``: ``x * in / out``.
Nearest rounds it (``rounding_method``: ``floor``, ``ceil``, ``round`` (half away from zero),
``round_prefer_floor``, ``round_prefer_ceil``; the default ``""`` is ``round`` for
``align_corners`` and ``floor`` otherwise, as TVM); linear interpolates between the two
neighbours ``floor(c)`` and ``floor(c) + 1``, both clamped into the input (so a coordinate
below 0 reads the first row, as PyTorch's clamp of the source index). The same formulas are the
numpy reference (`resize2d_numpy`).

Example:
    >>> from ingot import te
    >>> y = resize2d(te.placeholder((1, 3, 4, 4), name="x"), (8, 8), method="linear")
    >>> [int(d) for d in y.shape]
    [1, 3, 8, 8]
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ingot import tir
from ingot.ir import convert

from ._util import compute, const_like

METHODS = ("nearest_neighbor", "linear")
MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
ROUNDING = ("", "floor", "ceil", "round", "round_prefer_floor", "round_prefer_ceil")


def check_resize_attrs(method: str, mode: str, rounding: str) -> None:
    """Raise a ValueError naming the bad attribute and the accepted values.

    Example:
        >>> check_resize_attrs("linear", "half_pixel", "")
    """
    for what, value, allowed in (("method", method, METHODS), ("coordinate_transformation_mode", mode, MODES),
                                 ("rounding_method", rounding, ROUNDING)):
        if value not in allowed:
            raise ValueError(f"resize2d: {what}={value!r} is not supported; use one of {allowed}")


def _source(x: Any, in_size: Any, out_size: Any, mode: str) -> Any:
    """The source coordinate (float32 expression) of output coordinate ``x``."""
    f = "float32"
    xf, n_in, n_out = x.astype(f), convert(in_size).astype(f), convert(out_size).astype(f)
    if mode == "align_corners":
        if isinstance(out_size, int) and out_size == 1:
            return const_like(0.0, f)
        return xf * (n_in - 1.0) / (n_out - 1.0)
    if mode == "asymmetric":
        return xf * n_in / n_out
    c = (xf + 0.5) * n_in / n_out - 0.5
    if mode == "pytorch_half_pixel" and isinstance(out_size, int) and out_size == 1:
        return const_like(0.0, f)
    return c


def _round(c: Any, rounding: str) -> Any:
    if rounding == "floor":
        return tir.floor(c)
    if rounding == "ceil":
        return tir.ceil(c)
    if rounding == "round_prefer_ceil":
        return tir.floor(c + 0.5)
    if rounding == "round_prefer_floor":
        return tir.ceil(c - 0.5)
    # Half away from zero, written out (C's round(); tir.round's C mapping may round half to even).
    return tir.Select(c >= const_like(0.0, "float32"), tir.floor(c + 0.5), tir.ceil(c - 0.5))


def _clamp(i: Any, size: Any) -> Any:
    return tir.min(tir.max(i, 0), convert(size).astype("int64") - 1)


def resize2d(data: Any, size: Sequence[int], layout: str = "NCHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "") -> Any:
    """``data`` resized to ``size = (out_h, out_w)`` over the H and W axes of ``layout``.

    Example:
        >>> from ingot import te
        >>> y = resize2d(te.placeholder((1, 2, 3, 3), name="x"), (6, 6), method="nearest_neighbor",
        ...              coordinate_transformation_mode="asymmetric")
    """
    mode, rounding = coordinate_transformation_mode, rounding_method
    check_resize_attrs(method, mode, rounding)
    if not rounding:
        rounding = "round" if mode == "align_corners" else "floor"
    h_axis, w_axis = layout.index("H"), layout.index("W")
    in_h, in_w = data.shape[h_axis], data.shape[w_axis]
    out_h, out_w = size
    out_shape = list(data.shape)
    out_shape[h_axis], out_shape[w_axis] = out_h, out_w

    def at(idx: tuple, y: Any, x: Any) -> Any:
        src = list(idx)
        src[h_axis], src[w_axis] = y, x
        return data[tuple(src)]

    if method == "nearest_neighbor":
        def nearest(idx: tuple) -> Any:
            y = _clamp(_round(_source(idx[h_axis], in_h, out_h, mode), rounding).astype("int64"), in_h)
            x = _clamp(_round(_source(idx[w_axis], in_w, out_w, mode), rounding).astype("int64"), in_w)
            return at(idx, y, x)

        return compute(out_shape, nearest, "T_resize2d_nearest", tag="injective")

    def linear(idx: tuple) -> Any:
        cy, cx = _source(idx[h_axis], in_h, out_h, mode), _source(idx[w_axis], in_w, out_w, mode)
        fy, fx = tir.floor(cy), tir.floor(cx)
        wy, wx = cy - fy, cx - fx
        y0, x0 = fy.astype("int64"), fx.astype("int64")
        y0c, y1c, x0c, x1c = _clamp(y0, in_h), _clamp(y0 + 1, in_h), _clamp(x0, in_w), _clamp(x0 + 1, in_w)
        dt = str(data.dtype)
        one = const_like(1.0, "float32")
        top = at(idx, y0c, x0c).astype("float32") * (one - wx) + at(idx, y0c, x1c).astype("float32") * wx
        bottom = at(idx, y1c, x0c).astype("float32") * (one - wx) + at(idx, y1c, x1c).astype("float32") * wx
        value = top * (one - wy) + bottom * wy
        return value if dt == "float32" else value.astype(dt)

    return compute(out_shape, linear, "T_resize2d_linear", tag="injective")


# -- numpy reference -----------------------------------------------------------------------------


def _np_source(out_size: int, in_size: int, mode: str) -> np.ndarray:
    x = np.arange(out_size, dtype=np.float32)
    if mode == "align_corners":
        return np.zeros_like(x) if out_size == 1 else x * np.float32(in_size - 1) / np.float32(out_size - 1)
    if mode == "asymmetric":
        return x * np.float32(in_size) / np.float32(out_size)
    if mode == "pytorch_half_pixel" and out_size == 1:
        return np.zeros_like(x)
    return (x + np.float32(0.5)) * np.float32(in_size) / np.float32(out_size) - np.float32(0.5)


def _np_round(c: np.ndarray, rounding: str) -> np.ndarray:
    if rounding == "floor":
        return np.floor(c)
    if rounding == "ceil":
        return np.ceil(c)
    if rounding == "round_prefer_ceil":
        return np.floor(c + 0.5)
    if rounding == "round_prefer_floor":
        return np.ceil(c - 0.5)
    return np.sign(c) * np.floor(np.abs(c) + 0.5)


def resize2d_numpy(x: np.ndarray, size: Sequence[int], layout: str = "NCHW", method: str = "linear",
                   coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "") -> np.ndarray:
    """numpy reference of `resize2d` (same formulas, separable per axis).

    Example:
        >>> resize2d_numpy(np.arange(4, dtype="float32").reshape(1, 1, 2, 2), (4, 4))[0, 0, 0]
        array([0.  , 0.25, 0.75, 1.  ], dtype=float32)
    """
    mode, rounding = coordinate_transformation_mode, rounding_method
    check_resize_attrs(method, mode, rounding)
    rounding = rounding or ("round" if mode == "align_corners" else "floor")
    h_axis, w_axis = layout.index("H"), layout.index("W")
    out = x.astype(np.float32)
    for axis, n_out in ((h_axis, size[0]), (w_axis, size[1])):
        n_in = out.shape[axis]
        c = _np_source(n_out, n_in, mode)
        if method == "nearest_neighbor":
            out = np.take(out, np.clip(_np_round(c, rounding).astype(np.int64), 0, n_in - 1), axis=axis)
            continue
        f = np.floor(c)
        w = (c - f).astype(np.float32)
        i0 = np.clip(f.astype(np.int64), 0, n_in - 1)
        i1 = np.clip(f.astype(np.int64) + 1, 0, n_in - 1)
        shape = [1] * out.ndim
        shape[axis] = n_out
        w = w.reshape(shape)
        out = np.take(out, i0, axis=axis) * (1 - w) + np.take(out, i1, axis=axis) * w
    return out.astype(x.dtype)
