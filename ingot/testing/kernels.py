"""Small tensor programs (PrimFuncs built with `ingot.te`) shared by the tuning tests and the GEMM and
tuning benchmarks.

Example:
    >>> [p.name for p in matmul_func(64, 32, 16).params]
    ['A', 'B', 'C']
"""
from __future__ import annotations

__all__ = ["matmul_func", "add_func"]


def matmul_func(n: int = 64, m: int = 64, k: int = 64, dtype: str = "float32"):
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` with A ``(n, k)``, B ``(k, m)`` as a PrimFunc.

    Example:
        >>> len(matmul_func().params)
        3
    """
    from ingot import te

    A = te.placeholder((n, k), dtype, name="A")
    B = te.placeholder((k, m), dtype, name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def add_func(n: int = 128):
    """``B[i] = A[i] + 1`` over ``n`` floats as a PrimFunc (the smallest elementwise kernel).

    Example:
        >>> len(add_func().params)
        2
    """
    from ingot import te

    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    return te.create_prim_func([A, B])
