"""``grid_sample`` (ONNX GridSample, PyTorch ``grid_sample``) and ``affine_grid``: TE computes and
numpy references, 1 to 3 spatial dims.

Note: one formula serves both the TE compute and the numpy reference. The coordinate arithmetic
(denormalize, round for ``nearest``, border/reflection of the coordinate, tap indices and 1-D
weights) is written once against a tiny namespace of math functions (`ingot.ops.interpolate`:
`NumpyMath` / `TirMath`, shared with DeformConv and RoiAlign); only the pixel gather differs. That keeps the compiled kernel and its reference the same
computation, so they agree to the last bit rather than to a tolerance.

Per spatial axis of size ``L`` (grid components are x, y, z: the *last* spatial axis first):

* ``x = (g + 1) / 2 * (L - 1)`` (``align_corners``) or ``((g + 1) * L - 1) / 2``;
* ``nearest`` rounds to even; a coordinate outside ``[lo, hi]`` (``[0, L-1]`` with
  ``align_corners``, else ``[-0.5, L-0.5]``) is clamped (``border``) or reflected (``reflection``);
* taps ``floor(x) + k`` (``k`` in 0..1 for linear, -1..2 for cubic, Keys' a = -0.75); a tap outside
  the image reads 0 (``zeros``), the clamped pixel (``border``) or the reflected one.

Example:
    >>> import numpy as np
    >>> x = np.arange(4, dtype="float32").reshape(1, 1, 2, 2)
    >>> grid = np.zeros((1, 1, 1, 2), "float32")            # the centre
    >>> grid_sample_numpy(x, grid, "linear", "zeros", False).ravel().tolist()
    [1.5]
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from ingot import tir

from ._util import KEEP_STAGE_KEY, compute, const_like
from .interpolate import NumpyMath, TirMath, axis_coord, axis_taps

MODES = ("nearest", "linear", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
def _check(mode: str, padding_mode: str, spatial: int) -> None:
    if mode not in MODES:
        raise ValueError(f"grid_sample: mode must be one of {MODES}, got {mode!r}")
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"grid_sample: padding_mode must be one of {PADDING_MODES}, got {padding_mode!r}")
    if not 1 <= spatial <= 3:
        raise ValueError(f"grid_sample: 1 to 3 spatial axes are supported, got {spatial}")


def grid_sample_numpy(data: np.ndarray, grid: np.ndarray, mode: str = "linear", padding_mode: str = "zeros",
                      align_corners: bool = False) -> np.ndarray:
    """numpy reference of `grid_sample`: ``data`` (N, C, *in) sampled at ``grid`` (N, *out, D).

    Example: see the module docstring.
    """
    data, grid = np.asarray(data), np.asarray(grid)
    spatial = data.ndim - 2
    _check(mode, padding_mode, spatial)
    m = NumpyMath(data.dtype)
    g = grid.astype(data.dtype)
    taps = []
    for a in range(spatial):
        x = axis_coord(m, g[..., spatial - 1 - a], data.shape[2 + a], mode, padding_mode, align_corners)
        taps.append(axis_taps(m, x, data.shape[2 + a], mode, padding_mode, align_corners))
    n_idx = np.arange(data.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))
    out = np.zeros((data.shape[0], *grid.shape[1:-1], data.shape[1]), data.dtype)
    for combo in itertools.product(*taps):
        value = data.transpose(0, *range(2, data.ndim), 1)[(n_idx, *[c[0] for c in combo])]
        weight, ok = None, None
        for _, w, valid in combo:
            weight = w if weight is None else (weight * w if w is not None else weight)
            ok = valid if ok is None else (ok & valid if valid is not None else ok)
        if ok is not None:
            value = np.where(ok[..., None], value, 0)
        out = out + (value * weight[..., None] if weight is not None else value)
    return np.moveaxis(out, -1, 1).astype(data.dtype)


def grid_sample(data: Any, grid: Any, mode: str = "linear", padding_mode: str = "zeros",
                align_corners: bool = False) -> Any:
    """TE: ``data`` (N, C, *in) sampled at the normalized coordinates ``grid`` (N, *out, D), D spatial
    axes (1-3); ``mode`` nearest/linear/cubic, ``padding_mode`` zeros/border/reflection.

    Example:
        >>> from ingot import te
        >>> y = grid_sample(te.placeholder((1, 3, 8, 8), name="x"), te.placeholder((1, 4, 5, 2), name="g"))
        >>> [int(d) for d in y.shape]
        [1, 3, 4, 5]
    """
    spatial = len(data.shape) - 2
    _check(mode, padding_mode, spatial)
    sizes = [int(d) for d in data.shape[2:]]
    m = TirMath(data.dtype)
    out_shape = [data.shape[0], data.shape[1], *grid.shape[1:-1]]

    # Stage 1: the pixel coordinate per output point and axis, computed once (not per channel and
    # tap: inlined, the reflection formulas nest into C expressions that take GCC minutes).
    def coord_body(idx: tuple) -> Any:
        n, out, a = idx[0], tuple(idx[1:-1]), idx[-1]
        value = None
        for axis in reversed(range(spatial)):
            g = grid[(n, *out, spatial - 1 - axis)]
            g = g if str(g.dtype) == str(data.dtype) else g.astype(str(data.dtype))
            x = axis_coord(m, g, sizes[axis], mode, padding_mode, align_corners)
            value = x if value is None else tir.select(a == axis, x, value)
        return value

    coords = compute([grid.shape[0], *grid.shape[1:-1], spatial], coord_body, "T_grid_sample_coord",
                     tag="injective", attrs={KEEP_STAGE_KEY: 1})

    def body(idx: tuple) -> Any:
        n, c, out = idx[0], idx[1], tuple(idx[2:])
        taps = [axis_taps(m, coords[(n, *out, a)], sizes[a], mode, padding_mode, align_corners)
                for a in range(spatial)]
        total = None
        for combo in itertools.product(*taps):
            value = data[(n, c, *[t[0] for t in combo])]
            for _, w, _ in combo:
                if w is not None:
                    value = value * w
            oks = [t[2] for t in combo if t[2] is not None]
            if oks:
                ok = oks[0]
                for extra in oks[1:]:
                    ok = ok & extra
                value = tir.select(ok, value, m.c(0.0))
            total = value if total is None else total + value
        return total

    return compute(out_shape, body, "T_grid_sample", tag="injective")


def affine_grid_numpy(theta: np.ndarray, size: Sequence[int], align_corners: bool = False) -> np.ndarray:
    """ONNX AffineGrid: the sampling grid (N, *spatial, D) of the affine maps ``theta`` (N, D, D+1)
    for an output of ``size`` (N, C, *spatial).

    Example:
        >>> theta = np.array([[[1, 0, 0], [0, 1, 0]]], "float32")
        >>> affine_grid_numpy(theta, (1, 1, 2, 2), True)[0, :, :, 0].tolist()
        [[-1.0, 1.0], [-1.0, 1.0]]
    """
    theta = np.asarray(theta)
    spatial = list(size[2:])

    def axis(length: int) -> np.ndarray:
        if length <= 1:
            return np.zeros(max(length, 0), theta.dtype)
        step = np.arange(length, dtype=theta.dtype)
        if align_corners:
            return (step * 2 / (length - 1) - 1).astype(theta.dtype)
        return ((step * 2 + 1) / length - 1).astype(theta.dtype)

    # base grid components ordered x (last axis), y, z, then 1 for the translation
    mesh = np.meshgrid(*[axis(n) for n in spatial], indexing="ij")
    base = np.stack([*mesh[::-1], np.ones(spatial, theta.dtype)], axis=-1)   # (*spatial, D+1)
    return np.einsum("...k,njk->n...j", base, theta).astype(theta.dtype)


def affine_grid(theta: Any, size: Sequence[int], align_corners: bool = False) -> Any:
    """TE of `affine_grid_numpy`: ``theta`` (N, D, D+1) → grid (N, *size[2:], D).

    Example:
        >>> from ingot import te
        >>> g = affine_grid(te.placeholder((2, 2, 3), name="theta"), (2, 3, 4, 5))
        >>> [int(d) for d in g.shape]
        [2, 4, 5, 2]
    """
    spatial = [int(d) for d in size[2:]]
    dims = len(spatial)
    dtype = str(theta.dtype)

    def coord(i: Any, length: int) -> Any:
        if length <= 1:
            return const_like(0.0, dtype)
        f = i.astype(dtype)
        if align_corners:
            return f * const_like(2.0 / (length - 1), dtype) - const_like(1.0, dtype)
        return (f * const_like(2.0, dtype) + const_like(1.0, dtype)) / const_like(float(length), dtype) \
            - const_like(1.0, dtype)

    def body(idx: tuple) -> Any:
        n, j = idx[0], idx[-1]
        total = theta[n, j, dims]
        for k in range(dims):   # component k is axis dims-1-k (x is the last spatial axis)
            a = dims - 1 - k
            total = total + coord(idx[1 + a], spatial[a]) * theta[n, j, k]
        return total

    return compute([theta.shape[0], *spatial, dims], body, "T_affine_grid", tag="injective")
