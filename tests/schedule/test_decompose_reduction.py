"""decompose_reduction: before/after IR, refusals, trace round trips, numbers."""
from __future__ import annotations

import pytest

from ingot.ir import assert_structural_equal, decl_buffer
from ingot.tir import BufferStore, SeqStmt
from ingot.tir.schedule import Schedule, ScheduleError

from ._hard_util import assert_same_numbers, block, func, loops, roundtrip
from ._workloads import matmul, softmax


def _expected():
    A, B, C = (decl_buffer((16, 16), "float32", n) for n in "ABC")

    def row(i):
        init = loops([("j_init", 16)], lambda j: block(
            "C_init", [("v_i_init", 16, i), ("v_j_init", 16, j)], lambda vi, vj: BufferStore(C, 0.0, [vi, vj])))
        update = loops([("j", 16), ("k", 16)], lambda j, k: block(
            "C", [("v_i", 16, i), ("v_j", 16, j), ("v_k", 16, k)],
            lambda vi, vj, vk: BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], [vi, vj]), kinds="SSR"))
        return SeqStmt([init, update])

    return func([A, B, C], loops([("i", 16)], row))


def test_decompose_reduction_matches_expected_ir():
    before = matmul()
    sch = Schedule(before)
    c = sch.get_block("C")
    _, j, _ = sch.get_loops(c)
    init = sch.decompose_reduction(c, j)
    assert sch.get(init).name_hint == "C_init"
    assert_structural_equal(sch.mod["main"], _expected())
    assert "b4 = sch.decompose_reduction(block=b0, loop=l2)" in str(sch.trace)
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_decompose_reduction_after_tiling_drops_reduce_loops():
    before = matmul(16, 32, 16)
    sch = Schedule(before)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, 8])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i, j0, k0, k1, j1)
    sch.vectorize(j1)
    init = sch.decompose_reduction(c, k0)
    # The init keeps only the spatial loop j1 under k0 (the reduce loops k0, k1 are dropped).
    assert [sch.get(x).extent.value for x in sch.get_loops(init)] == [16, 4, 8]
    assert sch.get(sch.get_loops(init)[-1]).kind == "vectorized"
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_decompose_reduction_softmax_max():
    before = softmax()
    sch = Schedule(before)
    b = sch.get_block("T_max")
    i, k = sch.get_loops(b)
    sch.decompose_reduction(b, i)
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_decompose_reduction_refusals():
    sch = Schedule(matmul())
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.decompose_reduction(c, k)
    with pytest.raises(ScheduleError, match="has no init"):
        sch.decompose_reduction(c, j)
    sch = Schedule(matmul())
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, [None, 4])
    with pytest.raises(ScheduleError, match="above loop 'k_1' feeds a reduce variable"):
        sch.decompose_reduction(c, k1)
    sch = Schedule(softmax())
    i_exp, _ = sch.get_loops(sch.get_block("T_exp"))
    with pytest.raises(ScheduleError, match="does not enclose"):
        sch.decompose_reduction(sch.get_block("T_max"), i_exp)
