"""``col2im`` (ONNX Col2Im: sliding blocks summed back into an image, N spatial axes) and ``det``
(determinant of small square matrices): TE computes and numpy references.

Note: ``col2im`` is a gather-sum: each output pixel adds the column entries of the blocks that cover
it, found by dividing its padded position minus the kernel offset by the stride (exact division
and the range are the validity test), so the kernel needs no atomic scatter. ``det`` expands over
permutations (n! products; n <= 4, the sizes of geometric transforms), which gives a branch-free
kernel; the numpy reference is ``np.linalg.det`` (LU), so the two are computed differently and the
test compares them to a tolerance.

Example:
    >>> import numpy as np
    >>> cols = np.ones((1, 4, 4), "float32")         # 2x2 blocks of a 3x3 image, stride 1
    >>> col2im_numpy(cols, (3, 3), (2, 2))[0, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from ingot import te, tir

from ._util import compute, const_like


def _blocks_per_axis(image: Sequence[int], block: Sequence[int], dilations: Sequence[int], pads: Sequence[int],
                     strides: Sequence[int]) -> list:
    d = len(image)
    return [(image[i] + pads[i] + pads[i + d] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
            for i in range(d)]


def _defaults(image: Sequence[int], dilations: Any, pads: Any, strides: Any) -> tuple:
    d = len(image)
    return (list(dilations or [1] * d), list(pads or [0] * (2 * d)), list(strides or [1] * d))


def col2im_numpy(cols: np.ndarray, image_shape: Sequence[int], block_shape: Sequence[int],
                 dilations: Any = None, pads: Any = None, strides: Any = None) -> np.ndarray:
    """numpy reference of `col2im`: ``cols`` (N, C * prod(block), L) → (N, C, *image_shape).

    Example: see the module docstring.
    """
    cols = np.asarray(cols)
    dilations, pads, strides = _defaults(image_shape, dilations, pads, strides)
    d = len(image_shape)
    counts = _blocks_per_axis(image_shape, block_shape, dilations, pads, strides)
    n, ck, _ = cols.shape
    k = int(np.prod(block_shape))
    c = ck // k
    padded = np.zeros((n, c, *[image_shape[i] + pads[i] + pads[i + d] for i in range(d)]), cols.dtype)
    blocks = cols.reshape(n, c, *block_shape, *counts)
    for offset in itertools.product(*[range(b) for b in block_shape]):
        where = tuple(slice(offset[i] * dilations[i], offset[i] * dilations[i] + (counts[i] - 1) * strides[i] + 1,
                            strides[i]) for i in range(d))
        padded[(slice(None), slice(None), *where)] += blocks[(slice(None), slice(None), *offset)]
    crop = tuple(slice(pads[i], pads[i] + image_shape[i]) for i in range(d))
    return padded[(slice(None), slice(None), *crop)]


def col2im(cols: Any, image_shape: Sequence[int], block_shape: Sequence[int], dilations: Any = None,
           pads: Any = None, strides: Any = None) -> Any:
    """TE of `col2im_numpy`.

    Example:
        >>> y = col2im(te.placeholder((1, 8, 9), name="c"), (4, 4), (2, 2))
        >>> [int(v) for v in y.shape]
        [1, 2, 4, 4]
    """
    dilations, pads, strides = _defaults(image_shape, dilations, pads, strides)
    d = len(image_shape)
    counts = _blocks_per_axis(image_shape, block_shape, dilations, pads, strides)
    k = int(np.prod(block_shape))
    c = int(cols.shape[1]) // k
    axes = [te.reduce_axis((0, b), name=f"k{i}") for i, b in enumerate(block_shape)]
    dtype = str(cols.dtype)

    def body(idx: tuple) -> Any:
        n, ch, pix = idx[0], idx[1], idx[2:]
        ok, block_index, kernel_index = None, None, None
        for i in range(d):
            pos = pix[i] + pads[i] - axes[i] * dilations[i]
            q = tir.floordiv(pos, strides[i])
            valid = (pos >= 0) & (tir.floormod(pos, strides[i]) == 0) & (q < counts[i])
            ok = valid if ok is None else ok & valid
            qc = tir.min(tir.max(q, 0), counts[i] - 1)          # loads stay in bounds
            block_index = qc if block_index is None else block_index * counts[i] + qc
            kernel_index = axes[i] if kernel_index is None else kernel_index * block_shape[i] + axes[i]
        value = cols[n, ch * k + kernel_index, block_index]
        return te.sum(tir.select(ok, value, const_like(0.0, dtype)), axis=axes)

    return compute([cols.shape[0], c, *image_shape], body, "T_col2im", tag="col2im")


def det(x: Any) -> Any:
    """TE: determinants of the square matrices in the last two axes of ``x`` (n <= 4).

    Example:
        >>> y = det(te.placeholder((5, 3, 3), name="m"))
        >>> [int(v) for v in y.shape]
        [5]
    """
    size = int(x.shape[-1])
    if size > 4 or int(x.shape[-2]) != size:
        raise ValueError(f"det: square matrices of size at most 4 are supported, got {tuple(x.shape[-2:])}")

    def body(idx: tuple) -> Any:
        total = None
        for perm in itertools.permutations(range(size)):
            term = None
            for row, col in enumerate(perm):
                v = x[(*idx, row, col)]
                term = v if term is None else term * v
            inversions = sum(1 for i in range(size) for j in range(i + 1, size) if perm[i] > perm[j])
            if total is None:
                total = term if inversions % 2 == 0 else -term
            else:
                total = total + term if inversions % 2 == 0 else total - term
        return total

    return compute(list(x.shape[:-2]), body, "T_det", tag="injective")


def det_numpy(x: np.ndarray) -> np.ndarray:
    """numpy reference of `det` (LU in float64 for float32 input, rounded once).

    Example:
        >>> det_numpy(np.array([[1, 2], [3, 4]], "float32")).tolist()
        -2.0
    """
    x = np.asarray(x)
    wide = x.astype(np.float64) if x.dtype in (np.float16, np.float32) else x
    return np.asarray(np.linalg.det(wide)).astype(x.dtype)
