"""``deform_conv2d`` (ONNX DeformConv, torchvision ``deform_conv2d``) and ``roi_align`` (ONNX RoiAlign):
TE computes and numpy references.

Note: both sample an image bilinearly at data-dependent points. ``deform_conv2d`` samples at pixel
coordinates (``align_corners`` grid sampling with zero padding), so it reuses GridSample's tap
formula (`ingot.ops.grid_sample._axis_taps`) in both the kernel and the reference; it runs as two
stages: the sampled columns ``(N, C, KH, KW, OH, OW)`` (mask applied), kept as their own loop nest
because every output channel reads each of them, then a grouped reduction with the weights (the
bias added in the same reduction's epilogue stage). ``roi_align`` follows ONNX's rules exactly: a
sample farther than one pixel outside the image counts as 0, one inside is clamped to the last
pixel; ``avg`` averages the bilinear values of the bin's ``sampling_ratio``² samples, ``max`` takes
the largest *weighted tap* (ONNX's definition, not the max of interpolated values). An adaptive grid
(``sampling_ratio=0``: ``ceil(roi_size / output_size)`` samples per bin, known only at run time)
reduces over a static bound, the grid of a ROI as large as the image plus a pixel, and masks the
samples beyond the ROI's own count; a larger ROI is sampled with that bound.

Example:
    >>> import numpy as np
    >>> x = np.arange(16, dtype="float32").reshape(1, 1, 4, 4)
    >>> rois = np.array([[0, 0, 3, 3]], "float32")
    >>> roi_align_numpy(x, rois, np.zeros(1, "int64"), output_height=1, output_width=1,
    ...                 sampling_ratio=1, coordinate_transformation_mode="output_half_pixel").ravel().tolist()
    [7.5]
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ingot import te, tir

from ._util import KEEP_STAGE_KEY, compute, const_like
from .grid_sample import _axis_taps, _NumpyMath, _TirMath


# -- deform_conv2d -------------------------------------------------------------------------------


def deform_output_size(size: int, kernel: int, stride: int, dilation: int, pad_lo: int, pad_hi: int) -> int:
    """Output length of one spatial axis of a (deformable) convolution.

    Example:
        >>> deform_output_size(3, 2, 1, 1, 1, 1)
        4
    """
    return (size + pad_lo + pad_hi - dilation * (kernel - 1) - 1) // stride + 1


def _deform_point(m: Any, base: Any, delta: Any, length: int) -> list:
    # The sampled pixel coordinate: the kernel tap's position plus its learned offset.
    return _axis_taps(m, m.to_float(base) + delta, length, "linear", "zeros", True)


def deform_conv2d_numpy(x: np.ndarray, w: np.ndarray, offset: np.ndarray, bias: Any = None, mask: Any = None,
                        strides: Sequence[int] = (1, 1), pads: Sequence[int] = (0, 0, 0, 0),
                        dilations: Sequence[int] = (1, 1), group: int = 1, offset_group: int = 1) -> np.ndarray:
    """numpy reference of `deform_conv2d`: ``x`` (N, C, H, W), ``w`` (OC, C/group, KH, KW), ``offset``
    (N, offset_group*KH*KW*2, OH, OW) as (dy, dx) pairs, ``mask`` (N, offset_group*KH*KW, OH, OW).

    Example:
        >>> x = np.arange(9, dtype="float32").reshape(1, 1, 3, 3)
        >>> off = np.full((1, 2, 3, 3), 0.5, "float32")          # 1x1 kernel, shifted half a pixel
        >>> deform_conv2d_numpy(x, np.ones((1, 1, 1, 1), "float32"), off)[0, 0, 0].tolist()
        [2.0, 3.0, 1.75]
    """
    x, w, offset = np.asarray(x), np.asarray(w), np.asarray(offset)
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = offset.shape[2:]
    m = _NumpyMath(x.dtype)
    off = offset.reshape(n, offset_group, kh, kw, 2, oh, ow).astype(x.dtype)
    msk = (np.ones((n, offset_group, kh, kw, oh, ow), x.dtype) if mask is None
           else np.asarray(mask).reshape(n, offset_group, kh, kw, oh, ow).astype(x.dtype))
    gi = np.arange(c) // (c // offset_group)                       # offset group of each channel
    cols = np.zeros((n, c, kh, kw, oh, ow), x.dtype)
    nn = np.arange(n)[:, None, None, None]
    cc = np.arange(c)[None, :, None, None]
    for i in range(kh):
        for j in range(kw):
            base_y = (np.arange(oh) * strides[0] - pads[0] + i * dilations[0])[:, None]
            base_x = (np.arange(ow) * strides[1] - pads[1] + j * dilations[1])[None, :]
            dy, dx = off[:, gi, i, j, 0], off[:, gi, i, j, 1]     # (N, C, OH, OW)
            ty = _deform_point(m, np.broadcast_to(base_y, dy.shape), dy, h)
            tx = _deform_point(m, np.broadcast_to(base_x, dx.shape), dx, wd)
            total = np.zeros((n, c, oh, ow), x.dtype)
            for yi, yw, yok in ty:
                for xi, xw, xok in tx:
                    total = total + np.where(yok & xok, x[nn, cc, yi, xi], 0) * yw * xw
            cols[:, :, i, j] = total * msk[:, gi, i, j]
    cpg, opg = c // group, oc // group
    out = np.zeros((n, oc, oh, ow), x.dtype)
    for g in range(group):
        part = cols[:, g * cpg:(g + 1) * cpg].reshape(n, cpg * kh * kw, oh * ow)
        weights = w[g * opg:(g + 1) * opg].reshape(opg, cpg * kh * kw)
        out[:, g * opg:(g + 1) * opg] = np.einsum("ok,nkp->nop", weights, part).reshape(n, opg, oh, ow)
    if bias is not None:
        out = out + np.asarray(bias).reshape(1, oc, 1, 1)
    return out.astype(x.dtype)


def deform_conv2d(x: Any, w: Any, offset: Any, bias: Any = None, mask: Any = None, strides: Sequence[int] = (1, 1),
                  pads: Sequence[int] = (0, 0, 0, 0), dilations: Sequence[int] = (1, 1), group: int = 1,
                  offset_group: int = 1) -> Any:
    """TE of `deform_conv2d_numpy`.

    Example:
        >>> y = deform_conv2d(te.placeholder((1, 4, 8, 8), name="x"), te.placeholder((6, 4, 3, 3), name="w"),
        ...                   te.placeholder((1, 18, 6, 6), name="off"))
        >>> [int(v) for v in y.shape]
        [1, 6, 6, 6]
    """
    n, c, h, wd = (x.shape[0], int(x.shape[1]), int(x.shape[2]), int(x.shape[3]))
    oc, cpg, kh, kw = (int(v) for v in w.shape)
    oh, ow = int(offset.shape[2]), int(offset.shape[3])
    dtype = str(x.dtype)
    m = _TirMath(dtype)
    per_group = c // offset_group

    def sample(idx: tuple) -> Any:
        b, ch, i, j, y, xo = idx
        g = tir.floordiv(ch, per_group)
        tap = (g * kh + i) * kw + j
        dy, dx = offset[b, tap * 2, y, xo], offset[b, tap * 2 + 1, y, xo]
        dy = dy if str(dy.dtype) == dtype else dy.astype(dtype)
        dx = dx if str(dx.dtype) == dtype else dx.astype(dtype)
        ty = _deform_point(m, y * strides[0] - pads[0] + i * dilations[0], dy, h)
        tx = _deform_point(m, xo * strides[1] - pads[1] + j * dilations[1], dx, wd)
        total = None
        for yi, yw, yok in ty:
            for xi, xw, xok in tx:
                value = tir.select(yok & xok, x[b, ch, yi, xi], const_like(0.0, dtype)) * (yw * xw)
                total = value if total is None else total + value
        if mask is not None:
            scale = mask[b, tap, y, xo]
            total = total * (scale if str(scale.dtype) == dtype else scale.astype(dtype))
        return total

    cols = compute([n, c, kh, kw, oh, ow], sample, "T_deform_cols", tag="injective", attrs={KEEP_STAGE_KEY: 1})
    rc = te.reduce_axis((0, cpg), name="rc")
    ri = te.reduce_axis((0, kh), name="ri")
    rj = te.reduce_axis((0, kw), name="rj")
    opg = oc // group

    def conv(idx: tuple) -> Any:
        b, o, y, xo = idx
        ch = tir.floordiv(o, opg) * cpg + rc
        return te.sum(cols[b, ch, ri, rj, y, xo] * w[o, rc, ri, rj], axis=[rc, ri, rj])

    out = compute([n, oc, oh, ow], conv, "T_deform_conv", tag="deform_conv2d")
    if bias is None:
        return out
    return compute([n, oc, oh, ow], lambda idx: out[idx] + bias[idx[1]], "T_deform_conv_bias", tag="injective")


# -- roi_align -----------------------------------------------------------------------------------


def roi_grid_bound(size: int, output_size: int) -> int:
    """The static bound of an adaptive (``sampling_ratio=0``) sample grid on one axis: the grid of a
    ROI one pixel larger than the image.

    Example:
        >>> roi_grid_bound(10, 5)
        3
    """
    return max(1, math.ceil((size + 1) / output_size))


class _RoiMath:
    """Per-ROI geometry written once for numpy and TIR (``m`` is `_NumpyMath` or `_TirMath`)."""

    def __init__(self, m: Any, spatial_scale: float, half_pixel: bool):
        self.m, self.scale, self.half_pixel = m, spatial_scale, half_pixel

    def axis(self, lo: Any, hi: Any, pooled: int, sampling_ratio: int, bound: int) -> tuple:
        """``(start, bin_size, grid)`` of one axis from the ROI's ends ``lo``, ``hi``."""
        m = self.m
        shift = m.c(0.5 if self.half_pixel else 0.0)
        start = lo * m.c(self.scale) - shift
        length = hi * m.c(self.scale) - shift - start
        if not self.half_pixel:               # ONNX: malformed ROIs become 1x1
            length = m.select(length < m.c(1.0), m.c(1.0), length)
        bin_size = length / m.c(pooled)
        if sampling_ratio > 0:
            grid = m.c(sampling_ratio)
        else:
            # an empty or inverted ROI (half_pixel keeps those) gets no samples and averages to 0
            grid = m.clamp(m.to_float(m.to_int(-m.floor(-(length / m.c(pooled))))), m.c(0.0), m.c(bound))
        return start, bin_size, grid

    def count(self, grid_h: Any, grid_w: Any) -> Any:
        """The divisor of ``avg``: the number of samples in a bin, at least 1."""
        n = grid_h * grid_w
        return self.m.select(n < self.m.c(1.0), self.m.c(1.0), n)

    def taps(self, pos: Any, length: int) -> tuple:
        """``(lo_index, hi_index, lo_weight, hi_weight)`` of the sample ``pos`` on an axis of ``length``;
        the weights are 0 for a sample farther than one pixel outside."""
        m = self.m
        outside = (pos < m.c(-1.0)) | (pos > m.c(length))
        p = m.select(pos < m.c(0.0), m.c(0.0), pos)
        low = m.clamp_int(m.to_int(p), 0, length - 1)
        at_end = m.to_int(p) >= length - 1
        p = m.select(at_end, m.to_float(low), p)
        high = m.select(at_end, low, m.clamp_int(low + 1, 0, length - 1))
        frac = p - m.to_float(low)
        zero = m.c(0.0)
        return low, high, m.select(outside, zero, m.c(1.0) - frac), m.select(outside, zero, frac)


def _check_roi(mode: str, coordinate_transformation_mode: str) -> bool:
    if mode not in ("avg", "max"):
        raise ValueError(f"roi_align: mode must be 'avg' or 'max', got {mode!r}")
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise ValueError(f"roi_align: coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel', "
                         f"got {coordinate_transformation_mode!r}")
    return coordinate_transformation_mode == "half_pixel"


def roi_align_numpy(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, mode: str = "avg",
                    output_height: int = 1, output_width: int = 1, sampling_ratio: int = 0,
                    spatial_scale: float = 1.0, coordinate_transformation_mode: str = "half_pixel") -> np.ndarray:
    """numpy reference of `roi_align`: ``x`` (N, C, H, W), ``rois`` (R, 4) as (x1, y1, x2, y2),
    ``batch_indices`` (R,) → (R, C, output_height, output_width).

    Example: see the module docstring.
    """
    x, rois = np.asarray(x), np.asarray(rois).astype(x.dtype)
    batch_indices = np.asarray(batch_indices).astype(np.int64)
    half = _check_roi(mode, coordinate_transformation_mode)
    _, c, h, wd = x.shape
    m = _NumpyMath(x.dtype)
    geo = _RoiMath(m, spatial_scale, half)
    out = np.zeros((rois.shape[0], c, output_height, output_width), x.dtype)
    for r in range(rois.shape[0]):
        y0, bh, gh = geo.axis(rois[r, 1], rois[r, 3], output_height, sampling_ratio, roi_grid_bound(h, output_height))
        x0, bw, gw = geo.axis(rois[r, 0], rois[r, 2], output_width, sampling_ratio, roi_grid_bound(wd, output_width))
        gh, gw = int(gh), int(gw)
        img = x[batch_indices[r]]
        for ph in range(output_height):
            for pw in range(output_width):
                values = []
                for iy in range(gh):
                    yl, yh, wyl, wyh = geo.taps(y0 + m.c(ph) * bh + m.c(iy + 0.5) * bh / m.c(gh), h)
                    for ix in range(gw):
                        xl, xh, wxl, wxh = geo.taps(x0 + m.c(pw) * bw + m.c(ix + 0.5) * bw / m.c(gw), wd)
                        taps = [wyl * wxl * img[:, yl, xl], wyl * wxh * img[:, yl, xh],
                                wyh * wxl * img[:, yh, xl], wyh * wxh * img[:, yh, xh]]
                        values.append(sum(taps) if mode == "avg" else np.max(taps, axis=0))
                if not values:
                    continue
                stacked = np.stack(values)
                out[r, :, ph, pw] = stacked.sum(0) / geo.count(m.c(gh), m.c(gw)) if mode == "avg" else stacked.max(0)
    return out


def roi_align(x: Any, rois: Any, batch_indices: Any, mode: str = "avg", output_height: int = 1,
              output_width: int = 1, sampling_ratio: int = 0, spatial_scale: float = 1.0,
              coordinate_transformation_mode: str = "half_pixel") -> Any:
    """TE of `roi_align_numpy`.

    Example:
        >>> y = roi_align(te.placeholder((1, 3, 10, 10), name="x"), te.placeholder((4, 4), name="r"),
        ...               te.placeholder((4,), "int64", name="b"), output_height=2, output_width=3)
        >>> [int(v) for v in y.shape]
        [4, 3, 2, 3]
    """
    half = _check_roi(mode, coordinate_transformation_mode)
    c, h, wd = int(x.shape[1]), int(x.shape[2]), int(x.shape[3])
    dtype = str(x.dtype)
    m = _TirMath(dtype)
    geo = _RoiMath(m, spatial_scale, half)
    bound_h = sampling_ratio if sampling_ratio > 0 else roi_grid_bound(h, output_height)
    bound_w = sampling_ratio if sampling_ratio > 0 else roi_grid_bound(wd, output_width)

    def coord(r: Any, k: int) -> Any:
        v = rois[r, k]
        return v if str(v.dtype) == dtype else v.astype(dtype)

    # Stage 1: per ROI (start, bin size, grid) of y then x, computed once for all channels and bins.
    def geometry(idx: tuple) -> Any:
        r, k = idx
        ys = geo.axis(coord(r, 1), coord(r, 3), output_height, sampling_ratio, bound_h)
        xs = geo.axis(coord(r, 0), coord(r, 2), output_width, sampling_ratio, bound_w)
        value = xs[2]
        for i, v in reversed(list(enumerate((*ys, *xs[:2])))):
            value = tir.select(k == i, v, value)
        return value

    params = compute([rois.shape[0], 6], geometry, "T_roi_geometry", tag="injective", attrs={KEEP_STAGE_KEY: 1})
    iy = te.reduce_axis((0, bound_h), name="iy")
    ix = te.reduce_axis((0, bound_w), name="ix")

    def body(idx: tuple) -> Any:
        r, ch, ph, pw = idx
        y0, bh, gh, x0, bw, gw = (params[r, k] for k in range(6))
        yl, yh, wyl, wyh = geo.taps(y0 + m.to_float(ph) * bh + (m.to_float(iy) + m.c(0.5)) * bh / gh, h)
        xl, xh, wxl, wxh = geo.taps(x0 + m.to_float(pw) * bw + (m.to_float(ix) + m.c(0.5)) * bw / gw, wd)
        b = batch_indices[r]
        taps = [wyl * wxl * x[b, ch, yl, xl], wyl * wxh * x[b, ch, yl, xh],
                wyh * wxl * x[b, ch, yh, xl], wyh * wxh * x[b, ch, yh, xh]]
        inside = None if sampling_ratio > 0 else (m.to_float(iy) < gh) & (m.to_float(ix) < gw)
        if mode == "avg":
            value = taps[0] + taps[1] + taps[2] + taps[3]
            return te.sum(value if inside is None else tir.select(inside, value, m.c(0.0)), axis=[iy, ix])
        value = tir.max(tir.max(taps[0], taps[1]), tir.max(taps[2], taps[3]))
        return te.max(value if inside is None else tir.select(inside, value, tir.min_value(dtype)), axis=[iy, ix])

    shape = [rois.shape[0], c, output_height, output_width]
    pooled = compute(shape, body, "T_roi_align_pool", tag="roi_align")
    if mode == "max" and sampling_ratio > 0:
        return pooled

    def finish(idx: tuple) -> Any:
        grid_h, grid_w = params[idx[0], 2], params[idx[0], 5]
        if mode == "avg":   # ONNX sums a bin's samples, then divides by their count once
            return pooled[idx] / geo.count(grid_h, grid_w)
        return tir.select(grid_h * grid_w < m.c(1.0), m.c(0.0), pooled[idx])   # no samples: 0

    return compute(shape, finish, "T_roi_align", tag="injective")
