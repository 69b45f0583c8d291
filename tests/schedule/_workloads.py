"""Workloads for schedule tests, built with `ingot.te` (TVM's MLC-course examples)."""
from __future__ import annotations

from ingot import te


def matmul(n=16, m=16, k=16):
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def elementwise(n=16, m=12):
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] + 1.0, name="C")
    return te.create_prim_func([A, C])


def softmax(n=4, m=8):
    from ingot import tir

    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    mx = te.compute((n,), lambda i: te.max(A[i, k], axis=k), name="T_max")
    E = te.compute((n, m), lambda i, j: tir.exp(A[i, j] - mx[i]), name="T_exp")
    k2 = te.reduce_axis((0, m), name="k2")
    s = te.compute((n,), lambda i: te.sum(E[i, k2], axis=k2), name="T_sum")
    out = te.compute((n, m), lambda i, j: E[i, j] / s[i], name="T_softmax")
    return te.create_prim_func([A, out])
