"""Reductions whose reduce extent is 0 at run time give the identity (sum 0, max lowest), also when a
spatial loop sits inside the reduce loop (column reductions, rfactor'd blocks): LowerInitBlock hoists
the init before the outermost reduce loop instead of guarding it with `if k == 0`."""
from __future__ import annotations

import numpy as np
import pytest

import ingot
from ingot import te
from ingot.tir.schedule import Schedule

pytestmark = pytest.mark.compiler


def _column_sum():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), "float32", name="A")
    k = te.reduce_axis((0, n), name="k")
    S = te.compute((m,), lambda j: te.sum(A[k, j], axis=k), name="S")
    k2 = te.reduce_axis((0, n), name="k2")
    M = te.compute((m,), lambda j: te.max(A[k2, j], axis=k2), name="M")
    return te.create_prim_func([A, S, M])


def _run(func, rows, cols=6):
    lib = ingot.build(func, target="llvm")
    a = np.arange(rows * cols, dtype="float32").reshape(rows, cols) - 7
    s, mx = (ingot.nd.array(np.full(cols, np.nan, "float32")) for _ in range(2))
    lib["main"](ingot.nd.array(a), s, mx)
    return a, s.numpy(), mx.numpy()


def _check(func):
    for rows in (0, 1, 5):
        a, s, mx = _run(func, rows)
        np.testing.assert_allclose(s, a.sum(axis=0), rtol=1e-6)
        if rows:
            np.testing.assert_array_equal(mx, a.max(axis=0))
        else:
            assert (mx <= np.finfo("float32").min).all()   # the identity of max, not left-over memory


def _column_sum_k_outer():
    from ingot.script import tir as T

    @T.prim_func
    def main(var_A: T.handle, var_S: T.handle, var_M: T.handle):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        n = T.int32()
        m = T.int32()
        A = T.match_buffer(var_A, (n, m), "float32")
        S = T.match_buffer(var_S, (m,), "float32")
        M = T.match_buffer(var_M, (m,), "float32")
        for k in range(n):
            for j in range(m):
                with T.block("S"):
                    v_j, v_k = T.axis.remap("SR", [j, k])
                    T.reads(A[v_k, v_j])
                    T.writes(S[v_j])
                    with T.init():
                        S[v_j] = 0.0
                    S[v_j] = S[v_j] + A[v_k, v_j]
        for k2 in range(n):
            for j in range(m):
                with T.block("M"):
                    v_j, v_k2 = T.axis.remap("SR", [j, k2])
                    T.reads(A[v_k2, v_j])
                    T.writes(M[v_j])
                    with T.init():
                        M[v_j] = T.float32(-3.4028234663852886e+38)
                    M[v_j] = T.max(M[v_j], A[v_k2, v_j])

    return main


def test_column_sum_reduce_loop_outside_spatial_loop():
    func = _column_sum_k_outer()               # for k: for j: S[j] += A[k, j]
    assert "for j_init in" in ingot.lower(func).script()   # hoisted, no `if k == 0` guard
    _check(func)


def test_rfactor_with_zero_reduce_extent():
    sch = Schedule(_column_sum())
    for name in ("S", "M"):
        j, k = sch.get_loops(sch.get_block(name))
        k0, k1 = sch.split(k, [None, 4])        # predicate k0 * 4 + k1 < n
        sch.rfactor(k1, 0)                       # S_rf[k1, j] reduces over k0; S[j] sums S_rf[:, j]
    _check(sch.mod["main"])
