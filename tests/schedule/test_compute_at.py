"""compute_at / reverse_compute_at: before/after IR, refusals, trace round trips, numbers."""
from __future__ import annotations

import pytest

from ingot.ir import assert_structural_equal, decl_buffer
from ingot.tir import BufferStore
from ingot.tir.schedule import Schedule, ScheduleError

from ._hard_util import assert_same_numbers, block, func, loops, roundtrip
from ._workloads import elementwise, matmul, softmax

from ingot import te


def _expected_at_i(producer_first=True):
    """B computed per row i of C (compute_at) or C per row of B (reverse_compute_at)."""
    A, C = decl_buffer((16, 12), "float32", "A"), decl_buffer((16, 12), "float32", "C")
    B = decl_buffer((16, 12), "float32", "B")

    def body(i):
        def b_block(j):
            return block("B", [("v_i", 16, i), ("v_j", 12, j)], lambda vi, vj: BufferStore(B, A[vi, vj] * 2.0, [vi, vj]))

        def c_block(j):
            return block("C", [("v_i", 16, i), ("v_j", 12, j)], lambda vi, vj: BufferStore(C, B[vi, vj] + 1.0, [vi, vj]))

        if producer_first:
            return [loops([("ax0", 12)], b_block), loops([("j", 12)], c_block)]
        return [loops([("j", 12)], b_block), loops([("ax0", 12)], c_block)]

    from ingot.tir import SeqStmt

    return func([A, C], loops([("i", 16)], lambda i: SeqStmt(body(i))), alloc=(B,))


def test_compute_at_matches_expected_ir():
    before = elementwise()
    sch = Schedule(before)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    assert_structural_equal(sch.mod["main"], _expected_at_i(True))
    assert "sch.compute_at(block=b3, loop=l1, preserve_unit_loops=False)" in str(sch.trace)
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_reverse_compute_at_matches_expected_ir():
    before = elementwise()
    sch = Schedule(before)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    assert_structural_equal(sch.mod["main"], _expected_at_i(False))
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_compute_at_non_divisible_split_adds_guard():
    before = elementwise(10, 12)
    sch = Schedule(before)
    i, _ = sch.get_loops(sch.get_block("C"))
    i0, _ = sch.split(i, [None, 4])
    sch.compute_at(sch.get_block("B"), i0)
    realize = sch.get(sch.get_block("B"))
    text = str(sch.mod["main"])
    assert "< 10" in text and realize is not None
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_compute_at_reduction_producer_into_consumer_tile():
    # C = A @ B computed per 4-row tile of D = relu(C).
    A = te.placeholder((16, 8), name="A")
    B = te.placeholder((8, 12), name="B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((16, 12), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((16, 12), lambda i, j: C[i, j] * 2.0, name="D")
    before = te.create_prim_func([A, B, D])
    sch = Schedule(before)
    i, j = sch.get_loops(sch.get_block("D"))
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 6])
    sch.reorder(i0, j0, i1, j1)
    sch.compute_at(sch.get_block("C"), j0)
    extents = [sch.get(x).extent.value for x in sch.get_loops(sch.get_block("C"))]
    assert extents == [4, 2, 4, 6, 8]
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_reverse_compute_at_register_tile_of_matmul():
    before = matmul(16, 32, 8)
    sch = Schedule(before)
    c = sch.get_block("C")
    cw = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i, j0, k, j1)
    sch.reverse_compute_at(cw, j0)
    assert [sch.get(x).extent.value for x in sch.get_loops(cw)] == [16, 2, 16]
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_compute_at_refusals():
    sch = Schedule(elementwise())
    b, c = sch.get_block("B"), sch.get_block("C")
    bi, _ = sch.get_loops(b)
    with pytest.raises(ScheduleError, match="already encloses"):
        sch.compute_at(b, bi)
    with pytest.raises(ScheduleError, match="has no consumer"):
        sch.compute_at(c, bi)
    # softmax: T_exp has two consumers in different nests.
    sch = Schedule(softmax())
    i, _ = sch.get_loops(sch.get_block("T_sum"))
    with pytest.raises(ScheduleError, match="not under loop"):
        sch.compute_at(sch.get_block("T_exp"), i)
    # A decomposed update is neither complete nor a reduction.
    sch = Schedule(matmul())
    c = sch.get_block("C")
    ci, _, _ = sch.get_loops(c)
    sch.decompose_reduction(c, ci)
    with pytest.raises(ScheduleError, match="not a complete block"):
        sch.reverse_compute_at(c, ci)


def test_reverse_compute_at_refusals():
    sch = Schedule(softmax())
    i, _ = sch.get_loops(sch.get_block("T_max"))
    # T_softmax's producers T_exp and T_sum are not under T_max's loop.
    with pytest.raises(ScheduleError, match="not under loop"):
        sch.reverse_compute_at(sch.get_block("T_softmax"), i)
    with pytest.raises(ScheduleError, match="not a complete block"):
        sch.reverse_compute_at(sch.get_block("T_sum"), i)


def test_softmax_chain_of_compute_at():
    before = softmax(4, 8)
    sch = Schedule(before)
    i, _ = sch.get_loops(sch.get_block("T_softmax"))
    sch.compute_at(sch.get_block("T_sum"), i)
    sch.compute_at(sch.get_block("T_exp"), i)
    sch.compute_at(sch.get_block("T_max"), i)
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)
