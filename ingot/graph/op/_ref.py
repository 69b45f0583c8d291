"""numpy reference implementations of the operators numpy lacks (convolution, pooling, norms).

Used by `FoldConstant` and as the expected values in tests.

Example:
    >>> import numpy as np
    >>> float(conv2d_nchw(np.ones((1, 1, 3, 3), "float32"), np.ones((1, 1, 3, 3), "float32"), padding=(1, 1, 1, 1))[0, 0, 1, 1])
    9.0
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def conv2d_nchw(x: np.ndarray, w: np.ndarray, strides: Sequence[int] = (1, 1), padding: Sequence[int] = (0, 0, 0, 0),
                dilation: Sequence[int] = (1, 1), groups: int = 1) -> np.ndarray:
    """Direct convolution; ``padding`` is (top, left, bottom, right)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - ((kh - 1) * dh + 1)) // sh + 1
    ow = (wd + pl + pr - ((kw - 1) * dw + 1)) // sw + 1
    out = np.zeros((n, o, oh, ow), dtype=np.float64)
    opg = o // groups
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg].astype(np.float64)
        wg = w[g * opg:(g + 1) * opg].astype(np.float64)
        for ky in range(kh):
            for kx in range(kw):
                patch = xg[:, :, ky * dh: ky * dh + sh * (oh - 1) + 1: sh, kx * dw: kx * dw + sw * (ow - 1) + 1: sw]
                out[:, g * opg:(g + 1) * opg] += np.einsum("nchw,oc->nohw", patch, wg[:, :, ky, kx])
    return out.astype(x.dtype)


def _ceil_out(size: int, lo: int, hi: int, k: int, s: int, d: int) -> "tuple[int, int]":
    span = (k - 1) * d + 1
    out = -(-(size + lo + hi - span) // s) + 1
    if (out - 1) * s >= size + lo:  # the last window must start inside the input or its start padding
        out -= 1
    return out, max(0, (out - 1) * s + span - (size + lo + hi))


def pool2d_nchw(x: np.ndarray, pool_type: str, pool_size: Sequence[int], strides: Sequence[int],
                padding: Sequence[int], dilation: Sequence[int] = (1, 1), count_include_pad: bool = False,
                ceil_mode: bool = False) -> np.ndarray:
    """Max/avg pooling over H, W; ``padding`` is (top, left, bottom, right); ``ceil_mode`` as PyTorch
    (extra windows past the end; their extra positions are never counted by the average)."""
    n, c, h, w = x.shape
    kh, kw = pool_size
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    eh = ew = 0
    if ceil_mode:
        _, eh = _ceil_out(h, pt, pb, kh, sh, dh)
        _, ew = _ceil_out(w, pl, pr, kw, sw, dw)
    fill = -np.inf if pool_type == "max" else 0.0
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb + eh), (pl, pr + ew)), constant_values=fill)
    if count_include_pad:
        ones = np.pad(np.ones((h + pt + pb, w + pl + pr)), ((0, eh), (0, ew)))
    else:
        ones = np.pad(np.ones((h, w)), ((pt, pb + eh), (pl, pr + ew)))
    oh = (h + pt + pb + eh - ((kh - 1) * dh + 1)) // sh + 1
    ow = (w + pl + pr + ew - ((kw - 1) * dw + 1)) // sw + 1
    out = np.full((n, c, oh, ow), -np.inf if pool_type == "max" else 0.0)
    count = np.zeros((oh, ow))
    for ky in range(kh):
        for kx in range(kw):
            sl = (slice(ky * dh, ky * dh + sh * (oh - 1) + 1, sh), slice(kx * dw, kx * dw + sw * (ow - 1) + 1, sw))
            patch = xp[:, :, sl[0], sl[1]]
            out = np.maximum(out, patch) if pool_type == "max" else out + patch
            count += ones[sl[0], sl[1]]
    if pool_type == "avg":
        out = out / np.maximum(count, 1)
    return out.astype(x.dtype)


def conv2d_transpose_nchw(x: np.ndarray, w: np.ndarray, strides: Sequence[int] = (1, 1),
                          padding: Sequence[int] = (0, 0, 0, 0), output_padding: Sequence[int] = (0, 0),
                          dilation: Sequence[int] = (1, 1), groups: int = 1) -> np.ndarray:
    """Transposed convolution by scattering (PyTorch's ConvTranspose2d): weight ``(C, O/groups, KH, KW)``."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + output_padding[0]
    full_w = (wd - 1) * sw + dw * (kw - 1) + 1 + output_padding[1]
    out = np.zeros((n, og * groups, full_h, full_w), dtype=np.float64)
    cpg = c // groups
    for g in range(groups):
        xg = x[:, g * cpg:(g + 1) * cpg].astype(np.float64)
        wg = w[g * cpg:(g + 1) * cpg].astype(np.float64)
        for ky in range(kh):
            for kx in range(kw):
                contrib = np.einsum("nchw,co->nohw", xg, wg[:, :, ky, kx])
                out[:, g * og:(g + 1) * og, ky * dh: ky * dh + sh * (h - 1) + 1: sh,
                    kx * dw: kx * dw + sw * (wd - 1) + 1: sw] += contrib
    return out[:, :, pt:full_h - pb, pl:full_w - pr].astype(x.dtype)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable log-softmax."""
    m = x.max(axis=axis, keepdims=True)
    return (x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))).astype(x.dtype)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, axes: Sequence[int], eps: float) -> np.ndarray:
    """Layer normalization over ``axes``."""
    axes = tuple(axes)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    shape = [x.shape[a] if a in [ax % x.ndim for ax in axes] else 1 for a in range(x.ndim)]
    return ((x - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)).astype(x.dtype)


def group_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, num_groups: int, eps: float) -> np.ndarray:
    """Group normalization of (N, C, ...)."""
    n, c = x.shape[:2]
    xg = x.reshape(n, num_groups, -1)
    mean = xg.mean(axis=2, keepdims=True)
    var = ((xg - mean) ** 2).mean(axis=2, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = [1, c] + [1] * (x.ndim - 2)
    return (y * gamma.reshape(shape) + beta.reshape(shape)).astype(x.dtype)


def batch_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray, var: np.ndarray, axis: int,
               eps: float) -> np.ndarray:
    """Inference batch normalization along channel ``axis``."""
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    r = lambda v: v.reshape(shape)  # noqa: E731
    return ((x - r(mean)) / np.sqrt(r(var) + eps) * r(gamma) + r(beta)).astype(x.dtype)
