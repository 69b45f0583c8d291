"""Matrix products: ``matmul`` with numpy semantics (batch broadcasting, 1-D operands) and
``batch_matmul``.

Example:
    >>> from ingot import te
    >>> a = te.placeholder((2, 4, 8), name="a")
    >>> b = te.placeholder((8, 16), name="b")
    >>> c = matmul(a, b)
    >>> len(c.shape)
    3
"""
from __future__ import annotations

from typing import Any

from ._util import broadcast_index, broadcast_shape, compute


def matmul(a: Any, b: Any, out_dtype: "str | None" = None, transpose_b: bool = False) -> Any:
    """``numpy.matmul(a, b)`` (``b`` transposed in its last two axes when ``transpose_b``).

    A 1-D ``a`` is a row vector and a 1-D ``b`` a column vector (their axis is dropped from the
    result); leading batch axes broadcast as in numpy.

    Example:
        >>> from ingot import te
        >>> c = matmul(te.placeholder((4, 8), name="a"), te.placeholder((16, 8), name="b"), transpose_b=True)
    """
    from ingot import te

    out_dtype = out_dtype or str(a.dtype)
    a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
    a_shape = list(a.shape) if not a_vec else [1, a.shape[0]]
    if b_vec:
        b_shape = [b.shape[0], 1]
    else:
        b_shape = list(b.shape)
        if transpose_b:
            b_shape[-2], b_shape[-1] = b_shape[-1], b_shape[-2]
    batch = broadcast_shape(a_shape[:-2], b_shape[:-2]) if (len(a_shape) > 2 or len(b_shape) > 2) else ()
    M, K, N = a_shape[-2], a_shape[-1], b_shape[-1]
    k = te.reduce_axis((0, K), name="k")
    out_shape = list(batch) + ([] if a_vec else [M]) + ([] if b_vec else [N])
    nb = len(batch)

    def body(idx: tuple) -> Any:
        bidx = idx[:nb]
        rest = list(idx[nb:])
        i = None if a_vec else rest.pop(0)
        j = None if b_vec else rest.pop(0)
        if a_vec:
            ai = (k,)
        else:
            ai = broadcast_index(_Shape(a.shape[:-2]), batch, bidx) + (i, k)
        if b_vec:
            bi = (k,)
        elif transpose_b:
            bi = broadcast_index(_Shape(b.shape[:-2]), batch, bidx) + (j, k)
        else:
            bi = broadcast_index(_Shape(b.shape[:-2]), batch, bidx) + (k, j)
        lhs, rhs = a[ai], b[bi]
        if str(lhs.dtype) != out_dtype:
            lhs, rhs = lhs.astype(out_dtype), rhs.astype(out_dtype)
        return te.sum(lhs * rhs, axis=k)

    return compute(out_shape, body, "T_matmul", tag="matmul")


class _Shape:
    """A shape-only stand-in so `broadcast_index` can index batch axes."""

    def __init__(self, shape: Any):
        self.shape = tuple(shape)


def batch_matmul(a: Any, b: Any, transpose_b: bool = False, out_dtype: "str | None" = None) -> Any:
    """``a[b] @ b[b]`` over a leading batch axis (TVM's ``batch_matmul``; batch of 1 broadcasts).

    Example:
        >>> from ingot import te
        >>> c = batch_matmul(te.placeholder((2, 4, 8), name="a"), te.placeholder((2, 8, 16), name="b"))
    """
    if len(a.shape) != 3 or len(b.shape) != 3:
        raise ValueError(f"batch_matmul needs 3-D operands, got ranks {len(a.shape)} and {len(b.shape)}")
    return matmul(a, b, out_dtype=out_dtype, transpose_b=transpose_b)
