"""ONNX Resize in numpy, for the executor builtin ``resize`` (scales, sizes or roi known only at run time,
or a mode the ``resize2d`` kernel does not cover: cubic, antialias, ``tf_crop_and_resize``, N-D).

Note: every ONNX interpolation (nearest, linear, cubic, their antialiased forms, ``exclude_outside``)
is separable: output position ``x`` on an axis reads a few input positions with coefficients that
sum to 1. So each resized axis becomes one dense ``(out, in)`` weight matrix, built with ONNX's own
per-position rules (the coordinate transform, ``ratio = x_ori - floor(x_ori)`` with 0 read as 1, the
``n`` nearest indices of the edge-padded axis, ties to the lower index), and applied with one
``tensordot``; an output position ``tf_crop_and_resize`` maps outside the input gets
``extrapolation_value`` (later axes' weights sum to 1, so it survives them unchanged).

Example:
    >>> x = np.arange(4, dtype="float32").reshape(1, 1, 2, 2)
    >>> resize_numpy(x, scales=[1, 1, 2, 2], mode="nearest")[0, 0].tolist()
    [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0], [2.0, 2.0, 3.0, 3.0]]
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ingot.ir.error import IRError

__all__ = ["resize_numpy", "resize_output_shape"]


def resize_output_shape(in_shape: Sequence[int], scales: Any = None, sizes: Any = None, axes: Any = None,
                        policy: str = "stretch") -> "tuple[list, list]":
    """ONNX Resize's output shape and the per-axis scales it interpolates with (``sizes`` wins over
    ``scales``; ``keep_aspect_ratio_policy`` ``not_larger`` / ``not_smaller`` scales every listed axis alike).

    Example:
        >>> resize_output_shape([1, 1, 4, 6], sizes=[2, 2], axes=[2, 3], policy="not_larger")
        ([1, 1, 1, 2], [1.0, 1.0, 0.3333333333333333, 0.3333333333333333])
    """
    ndim = len(in_shape)
    axes = [int(a) + ndim if int(a) < 0 else int(a) for a in axes] if axes is not None and len(axes) else list(
        range(ndim))
    out, factors = [int(d) for d in in_shape], [1.0] * ndim
    if sizes is not None and len(sizes):
        if len(sizes) != len(axes):
            raise IRError(f"Resize: {len(sizes)} sizes for {len(axes)} axes {axes}")
        if policy == "stretch":
            for a, s in zip(axes, sizes):
                out[a], factors[a] = int(s), int(s) / in_shape[a]
            return out, factors
        if policy not in ("not_larger", "not_smaller"):
            raise IRError(f"Resize: keep_aspect_ratio_policy {policy!r}; it is stretch, not_larger or not_smaller")
        ratios = [int(s) / in_shape[a] for a, s in zip(axes, sizes)]
        r = min(ratios) if policy == "not_larger" else max(ratios)
        for a in axes:
            out[a], factors[a] = int(np.floor(r * in_shape[a] + 0.5)), r
        return out, factors
    if scales is None or len(scales) != len(axes):
        raise IRError(f"Resize: needs one scale per axis {axes} (or sizes), got scales {scales}")
    for a, s in zip(axes, scales):
        if float(s) <= 0:
            raise IRError(f"Resize: scale {float(s)} on axis {a} must be positive")
        out[a], factors[a] = int(np.floor(in_shape[a] * float(s))), float(s)
    return out, factors


def _nearest_coeffs(rounding: str) -> Any:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": False,
              "ceil": True}.get(rounding)
        if up is None:
            raise IRError(f"Resize: nearest_mode {rounding!r}; it is round_prefer_floor, round_prefer_ceil, "
                          f"floor or ceil")
        return np.array([0.0, 1.0] if up else [1.0, 0.0])

    return coeffs


def _cubic_kernel(x: np.ndarray, a: float) -> np.ndarray:
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _interp_coeffs(mode: str, antialias: bool, a: float) -> Any:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        # Antialiasing stretches the kernel by 1/scale when downsampling (scale < 1).
        s = min(scale, 1.0) if antialias else 1.0
        radius = 1 if mode == "linear" else 2
        start = int(np.floor(-radius / s) + 1)
        taps = (np.arange(start, 2 - start) - ratio) * s
        w = np.clip(1 - np.abs(taps), 0, 1) if mode == "linear" else _cubic_kernel(taps, a)
        return w / w.sum()

    return coeffs


def _source(x: int, mode: str, scale: float, l_in: int, l_out: int, roi: "tuple[float, float]") -> float:
    """The input coordinate output position ``x`` reads (ONNX's coordinate_transformation_mode)."""
    width = scale * l_in  # ONNX uses the un-floored output length here
    if mode == "align_corners":
        return 0.0 if width == 1 else x * (l_in - 1) / (width - 1)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_crop_and_resize":
        lo, hi = roi
        span = (hi - lo) * (l_in - 1)
        return lo * (l_in - 1) + (span / 2 if width == 1 else x * span / (width - 1))
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if width != 1 else -0.5
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = l_in / 2 * (1 - l_out / width)
        return offset + (x + 0.5) / scale - 0.5
    raise IRError(f"Resize: coordinate_transformation_mode {mode!r} is not an ONNX mode")


def _axis_weights(l_in: int, l_out: int, scale: float, coeffs: Any, p: dict, roi: "tuple[float, float]") -> tuple:
    """``(W, outside)``: the (l_out, l_in) matrix of one axis and the positions left to extrapolation."""
    weights, outside = np.zeros((l_out, l_in)), np.zeros(l_out, bool)
    coord = p.get("coordinate_transformation_mode", "half_pixel")
    for x in range(l_out):
        x_ori = _source(x, coord, scale, l_in, l_out, roi)
        if coord == "tf_crop_and_resize" and not 0 <= x_ori <= l_in - 1:
            outside[x] = True
            continue
        ratio = x_ori - np.floor(x_ori)
        c = coeffs(1.0 if ratio == 0 else ratio, scale)
        n = len(c)
        pad = -(-n // 2)
        # The n nearest positions of the edge-padded axis (ties: the lower index), in ascending order.
        dist = np.abs(x_ori + pad - np.arange(l_in + 2 * pad))
        idx = np.sort(np.argsort(dist, kind="stable")[:n]) - pad
        if p.get("exclude_outside", 0):
            c = np.where((idx < 0) | (idx >= l_in), 0.0, c)
            c = c / c.sum()
        np.add.at(weights[x], np.clip(idx, 0, l_in - 1), c)
    return weights, outside


def resize_numpy(x: np.ndarray, roi: Any = None, scales: Any = None, sizes: Any = None, *, mode: str = "nearest",
                 **attrs: Any) -> np.ndarray:
    """ONNX Resize (opsets 10-19) of ``x``; ``attrs`` are the node's other attributes (``axes``,
    ``coordinate_transformation_mode``, ``nearest_mode``, ``cubic_coeff_a``, ``exclude_outside``,
    ``extrapolation_value``, ``antialias``, ``keep_aspect_ratio_policy``).

    Example:
        >>> resize_numpy(np.array([[0.0, 4.0]]), scales=[1, 2], mode="linear").tolist()
        [[0.0, 1.0, 3.0, 4.0]]
    """
    x = np.asarray(x)
    out_shape, factors = resize_output_shape(x.shape, scales, sizes, attrs.get("axes"),
                                             attrs.get("keep_aspect_ratio_policy", "stretch"))
    if mode == "nearest":
        coeffs = _nearest_coeffs(attrs.get("nearest_mode", "round_prefer_floor"))
    elif mode in ("linear", "cubic"):
        coeffs = _interp_coeffs(mode, bool(attrs.get("antialias", 0)), float(attrs.get("cubic_coeff_a", -0.75)))
    else:
        raise IRError(f"Resize: mode {mode!r}; it is nearest, linear or cubic")
    roi = np.asarray(roi if roi is not None else [], "float64").reshape(-1)
    axes = attrs.get("axes")
    axes = list(range(x.ndim)) if axes is None or not len(axes) else [int(a) % x.ndim for a in axes]
    roi_of = {a: (roi[k], roi[k + len(axes)]) for k, a in enumerate(axes)} if roi.size == 2 * len(axes) else {}
    out = x.astype("float64")
    for a in range(x.ndim):
        w, outside = _axis_weights(x.shape[a], out_shape[a], factors[a], coeffs, attrs, roi_of.get(a, (0.0, 1.0)))
        if not outside.any() and w.shape[0] == w.shape[1] and np.array_equal(w, np.eye(w.shape[0])):
            continue  # an axis left as it is
        out = np.moveaxis(np.tensordot(w, out, axes=([1], [a])), 0, a)
        if outside.any():
            index = [slice(None)] * x.ndim
            index[a] = outside
            out[tuple(index)] = float(attrs.get("extrapolation_value", 0.0))
    if x.dtype.kind in "iu":  # ONNX rounds integer results
        out = np.clip(np.rint(out), np.iinfo(x.dtype).min, np.iinfo(x.dtype).max)
    return out.astype(x.dtype)
