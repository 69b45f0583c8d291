"""compute_inline / reverse_compute_inline: before/after IR, refusals, trace round trips, numbers."""
from __future__ import annotations

import pytest

from ingot.ir import assert_structural_equal, decl_buffer
from ingot.tir import BufferStore
from ingot.tir.schedule import Schedule, ScheduleError

from ._hard_util import assert_same_numbers, block, func, loops, roundtrip
from ._workloads import elementwise, matmul, softmax

from ingot import te


def _fused(name):
    """C[i, j] = A[i, j] * 2 + 1 in one block called ``name`` (the expected result)."""
    A, C = decl_buffer((16, 12), "float32", "A"), decl_buffer((16, 12), "float32", "C")
    nest = loops([("i", 16), ("j", 12)], lambda i, j: block(
        name, [("v_i", 16, i), ("v_j", 12, j)], lambda vi, vj: BufferStore(C, A[vi, vj] * 2.0 + 1.0, [vi, vj])))
    return func([A, C], nest)


def test_compute_inline_matches_expected_ir_and_numbers():
    before = elementwise()
    sch = Schedule(before)
    sch.compute_inline(sch.get_block("B"))
    assert_structural_equal(sch.mod["main"], _fused("C"))
    assert str(sch.trace).splitlines()[-1] == "sch.compute_inline(block=b0)"
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_reverse_compute_inline_matches_expected_ir_and_numbers():
    before = elementwise()
    sch = Schedule(before)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert_structural_equal(sch.mod["main"], _fused("B"))
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_compute_inline_softmax_exp():
    before = softmax()
    sch = Schedule(before)
    sch.compute_inline(sch.get_block("T_exp"))
    names = sorted(sch.state.blocks("main"))
    assert "T_exp" not in names and len(sch.mod["main"].body.block.alloc_buffers) == 2
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_compute_inline_refusals():
    sch = Schedule(matmul())
    with pytest.raises(ScheduleError, match="not a complete block"):
        sch.compute_inline(sch.get_block("C"))
    sch = Schedule(elementwise())
    with pytest.raises(ScheduleError, match="function output 'C'"):
        sch.compute_inline(sch.get_block("C"))
    # A producer of a reduction's input is fine; the reduction itself is refused by reverse inline.
    sch = Schedule(softmax())
    with pytest.raises(ScheduleError, match="not a complete block"):
        sch.reverse_compute_inline(sch.get_block("T_sum"))


def test_reverse_compute_inline_refusals():
    # The consumer reads the producer twice (T_softmax reads T_exp once but T_sum also reads it).
    sch = Schedule(softmax())
    with pytest.raises(ScheduleError, match="other consumers|exactly one"):
        sch.reverse_compute_inline(sch.get_block("T_softmax"))
    # Broadcast read: C[i, j] = B[i] is not a bijection.
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8, 4), lambda i, j: B[i] * 2.0, name="C")
    sch = Schedule(te.create_prim_func([A, C]))
    with pytest.raises(ScheduleError, match="not a bijection"):
        sch.reverse_compute_inline(sch.get_block("C"))
