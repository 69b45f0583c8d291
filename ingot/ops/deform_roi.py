"""``deform_conv2d`` (ONNX DeformConv, torchvision ``deform_conv2d``) and ``roi_align`` (ONNX RoiAlign):
TE computes and numpy references.

Note: both sample an image bilinearly at data-dependent points. ``deform_conv2d`` samples at pixel
coordinates (``align_corners`` grid sampling with zero padding), so it reuses GridSample's tap
formula (`ingot.ops.interpolate.axis_taps`) in both the kernel and the reference; it runs as two
stages: the sampled columns ``(N, C, KH, KW, OH, OW)`` (mask applied), kept as their own loop nest
because every output channel reads each of them, then a grouped reduction with the weights (the
bias added in the same reduction's epilogue stage). ``roi_align`` follows ONNX's rules exactly: a
sample farther than one pixel outside the image counts as 0, one inside is clamped to the last
pixel; ``avg`` averages the bilinear values of the bin's samples, ``max`` takes
the largest *weighted tap* (ONNX's definition, not the max of interpolated values). Its kernel is written
as loops (see `roi_align`): an adaptive grid (``sampling_ratio=0``: ``ceil(roi_size / output_size)``
samples per bin) is known only at run time and has no bound (detection boxes may be far larger than the
image), so each bin loops over exactly its ROI's grid.

Example:
    >>> import numpy as np
    >>> x = np.arange(16, dtype="float32").reshape(1, 1, 4, 4)
    >>> rois = np.array([[0, 0, 3, 3]], "float32")
    >>> roi_align_numpy(x, rois, np.zeros(1, "int64"), output_height=1, output_width=1,
    ...                 sampling_ratio=1, coordinate_transformation_mode="output_half_pixel").ravel().tolist()
    [7.5]
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ingot import te, tir
from ingot.ir import Var, as_const_int, decl_buffer
from ingot.ir.expr import cast
from ingot.tir import AssertStmt, BufferStore, For, ForKind, PrimFunc, SeqStmt

from ._util import KEEP_STAGE_KEY, compute, const_like, nest_lets
from .interpolate import NumpyMath, TirMath, axis_taps


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
    return axis_taps(m, m.to_float(base) + delta, length, "linear", "zeros", True)


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
    m = NumpyMath(x.dtype)
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
    m = TirMath(dtype)
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


#: The most samples an adaptive grid (``sampling_ratio=0``) may take on one axis of a bin. float32 (the
#: geometry's type) counts exactly up to 2**24, and a bin of more samples would not finish anyway: a
#: ROI that needs more, or has a non-finite coordinate, makes the kernel fail with an error.
MAX_GRID = 1 << 24


class _RoiMath:
    """Per-ROI geometry written once for numpy and TIR (``m`` is `NumpyMath` or `TirMath`)."""

    def __init__(self, m: Any, spatial_scale: float, half_pixel: bool):
        self.m, self.scale, self.half_pixel = m, spatial_scale, half_pixel

    def axis(self, lo: Any, hi: Any, pooled: int, sampling_ratio: int) -> tuple:
        """``(start, bin_size, grid)`` of one axis from the ROI's ends ``lo``, ``hi``; ``grid`` (a float) is
        ``ceil(roi_size / pooled)`` for an adaptive grid, negative for an inverted ROI under half_pixel
        (no samples), not finite for a non-finite coordinate."""
        m = self.m
        shift = m.c(0.5 if self.half_pixel else 0.0)
        start = lo * m.c(self.scale) - shift
        length = hi * m.c(self.scale) - shift - start
        if not self.half_pixel:               # ONNX: malformed ROIs become 1x1
            length = m.select(length < m.c(1.0), m.c(1.0), length)
        bin_size = length / m.c(pooled)
        grid = m.c(sampling_ratio) if sampling_ratio > 0 else -m.floor(-(length / m.c(pooled)))
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

    def position(self, start: Any, bin_size: Any, grid: Any, pooled_index: Any, sample: Any) -> Any:
        """The coordinate of sample ``sample`` of bin ``pooled_index`` (ONNX's expression, in its order)."""
        m = self.m
        return start + pooled_index * bin_size + (sample + m.c(0.5)) * bin_size / grid


def _check_roi(mode: str, coordinate_transformation_mode: str) -> bool:
    if mode not in ("avg", "max"):
        raise ValueError(f"roi_align: mode must be 'avg' or 'max', got {mode!r}")
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise ValueError(f"roi_align: coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel', "
                         f"got {coordinate_transformation_mode!r}")
    return coordinate_transformation_mode == "half_pixel"


_ROI_FAILURE = ("roi_align: {roi} has a non-finite coordinate or needs more than 2**24 samples per bin side "
                "(sampling_ratio=0 samples ceil(roi_size / output_size)); give finite ROIs or set sampling_ratio")


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
    m = NumpyMath(x.dtype)
    geo = _RoiMath(m, spatial_scale, half)
    out = np.zeros((rois.shape[0], c, output_height, output_width), x.dtype)
    for r in range(rois.shape[0]):
        y0, bh, gh = geo.axis(rois[r, 1], rois[r, 3], output_height, sampling_ratio)
        x0, bw, gw = geo.axis(rois[r, 0], rois[r, 2], output_width, sampling_ratio)
        if not (np.all(np.isfinite(rois[r])) and gh <= MAX_GRID and gw <= MAX_GRID):
            raise ValueError(_ROI_FAILURE.format(roi=f"ROI {r}"))
        if not 0 <= batch_indices[r] < x.shape[0]:
            raise ValueError(f"roi_align: batch_indices[{r}] = {batch_indices[r]} is outside [0, {x.shape[0]}), "
                             f"the images of x")
        gh, gw = max(int(gh), 0), max(int(gw), 0)
        img = x[batch_indices[r]]
        for ph in range(output_height):
            for pw in range(output_width):
                values = []
                for iy in range(gh):
                    yl, yh, wyl, wyh = geo.taps(geo.position(y0, bh, m.c(gh), m.c(ph), m.c(iy)), h)
                    for ix in range(gw):
                        xl, xh, wxl, wxh = geo.taps(geo.position(x0, bw, m.c(gw), m.c(pw), m.c(ix)), wd)
                        taps = [wyl * wxl * img[:, yl, xl], wyl * wxh * img[:, yl, xh],
                                wyh * wxl * img[:, yh, xl], wyh * wxh * img[:, yh, xh]]
                        values.append(sum(taps) if mode == "avg" else np.max(taps, axis=0))
                if not values:
                    continue
                stacked = np.stack(values)
                out[r, :, ph, pw] = stacked.sum(0) / geo.count(m.c(gh), m.c(gw)) if mode == "avg" else stacked.max(0)
    return out


def _size(dim: Any, name: str) -> Any:
    """A static size as an int; a symbolic one as a fresh Var (the caller binds it from the argument's shape)."""
    value = as_const_int(dim)
    return value if value is not None else Var(name, "int64")


def roi_align(x: Any, rois: Any, batch_indices: Any, mode: str = "avg", output_height: int = 1,
              output_width: int = 1, sampling_ratio: int = 0, spatial_scale: float = 1.0,
              coordinate_transformation_mode: str = "half_pixel") -> PrimFunc:
    """The kernel of `roi_align_numpy` as TensorIR with parameters ``(x, rois, batch_indices, y)``; the batch
    and the ROI count may be symbolic.

    Note: the sample loops of a bin run exactly the ROI's own grid, computed in the kernel (an adaptive grid
    is known only at run time, and a detection box larger than the image is normal), so the kernel is
    written as loops rather than as a TE reduction over a static extent. It runs one ROI and row of bins
    per parallel iteration; each sample's taps are computed once and used by every channel (ONNX's
    pre-calculation), each channel's bin accumulating in its output element in the sample order. A ROI with a non-finite coordinate or a
    grid beyond `MAX_GRID`, or a batch index outside ``x``, makes the call fail with an error.

    Example:
        >>> f = roi_align(te.placeholder((1, 3, 10, 10), name="x"), te.placeholder((4, 4), name="r"),
        ...               te.placeholder((4,), "int64", name="b"), output_height=2, output_width=3)
        >>> [[str(d) for d in p.shape] for p in f.params]
        [['1', '3', '10', '10'], ['4', '4'], ['4'], ['4', '3', '2', '3']]
    """
    half = _check_roi(mode, coordinate_transformation_mode)
    c, h, wd = int(x.shape[1]), int(x.shape[2]), int(x.shape[3])
    n, num = _size(x.shape[0], "N"), _size(rois.shape[0], "R")
    dtype = str(x.dtype)
    xb = decl_buffer((n, c, h, wd), dtype, "x")
    rb = decl_buffer((num, 4), str(rois.dtype), "rois")
    ib = decl_buffer((num,), str(batch_indices.dtype), "batch_indices")
    yb = decl_buffer((num, c, output_height, output_width), dtype, "y")
    m = TirMath(dtype)
    geo = _RoiMath(m, spatial_scale, half)
    i64 = "int64"
    q, ph, pw, iy, ix = (Var(name, i64) for name in ("q", "ph", "pw", "iy", "ix"))
    r, b, gh, gw = (Var(name, i64) for name in ("r", "b", "gh", "gw"))
    y0, bh, ghf, x0, bw, gwf = (Var(name, dtype) for name in ("y0", "bin_h", "grid_h", "x0", "bin_w", "grid_w"))
    ylo, yhi, xlo, xhi = (Var(name, i64) for name in ("y_lo", "y_hi", "x_lo", "x_hi"))
    wyl, wyh, wxl, wxh = (Var(name, dtype) for name in ("wy_lo", "wy_hi", "wx_lo", "wx_hi"))

    def coord(k: int) -> Any:
        v = rb[r, k]
        return v if str(v.dtype) == dtype else v.astype(dtype)

    def out(k: Any) -> Any:
        return yb[r, k, ph, pw]

    def taps(k: Any) -> list:
        return [wyl * wxl * xb[b, k, ylo, xlo], wyl * wxh * xb[b, k, ylo, xhi],
                wyh * wxl * xb[b, k, yhi, xlo], wyh * wxh * xb[b, k, yhi, xhi]]

    if mode == "avg":
        def update(k: Any) -> Any:
            t = taps(k)
            return out(k) + (t[0] + t[1] + t[2] + t[3])

        count = geo.count(m.to_float(gh), m.to_float(gw))
        init, finish = (lambda k: m.c(0.0)), (lambda k: out(k) / count)
    else:   # ONNX: the largest weighted tap; a bin without samples is 0
        def update(k: Any) -> Any:
            t = taps(k)
            return tir.max(out(k), tir.max(tir.max(t[0], t[1]), tir.max(t[2], t[3])))

        first = tir.select(gh * gw > 0, tir.min_value(dtype), m.c(0.0))
        init, finish = (lambda k: first), None
    x_taps = geo.taps(geo.position(x0, bw, gwf, m.to_float(pw), m.to_float(ix)), wd)
    y_taps = geo.taps(geo.position(y0, bh, ghf, m.to_float(ph), m.to_float(iy)), h)

    def channels(value: Callable[[Var], Any]) -> For:   # a sample's taps serve every channel
        k = Var("ch", i64)
        return For(k, 0, c, ForKind.SERIAL, BufferStore(yb, value(k), [r, k, ph, pw]))

    sample_x = nest_lets(list(zip((xlo, xhi, wxl, wxh), x_taps)), channels(update))
    samples = For(iy, 0, gh, ForKind.SERIAL,
                  nest_lets(list(zip((ylo, yhi, wyl, wyh), y_taps)), For(ix, 0, gw, ForKind.SERIAL, sample_x)))
    bins = For(pw, 0, output_width, ForKind.SERIAL, SeqStmt.flatten(
        channels(init), samples, [channels(finish)] if finish is not None else []))
    (sy, size_h, grid_h), (sx, size_w, grid_w) = (geo.axis(coord(1), coord(3), output_height, sampling_ratio),
                                                  geo.axis(coord(0), coord(2), output_width, sampling_ratio))
    grids = nest_lets([(gh, tir.max(m.to_int(ghf), tir.const(0, i64))),
                   (gw, tir.max(m.to_int(gwf), tir.const(0, i64)))], bins)
    finite = tir.isfinite(coord(0)) & tir.isfinite(coord(1)) & tir.isfinite(coord(2)) & tir.isfinite(coord(3))
    limit = m.c(float(MAX_GRID))
    body = AssertStmt(finite & (ghf <= limit) & (gwf <= limit), _ROI_FAILURE.format(roi="a ROI"), grids)
    body = nest_lets([(y0, sy), (bh, size_h), (ghf, grid_h), (x0, sx), (bw, size_w), (gwf, grid_w)], body)
    body = AssertStmt((b >= 0) & (b < n), "roi_align: a batch_indices entry is outside [0, N), the images of x; "
                                          "each ROI must name an image of the batch", body)
    body = nest_lets([(r, q // output_height), (ph, q % output_height), (b, cast(ib[r], i64))], body)
    loop = For(q, 0, num * output_height, ForKind.PARALLEL, body)
    return PrimFunc([xb, rb, ib, yb], loop, {"tir.noalias": True, "tir.is_scheduled": True})
