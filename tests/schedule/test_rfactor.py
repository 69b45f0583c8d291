"""rfactor: IR shape, combiners (sum/max), refusals, trace round trips, numbers."""
from __future__ import annotations

import pytest

from ingot.tir.schedule import Schedule, ScheduleError

from ._hard_util import assert_same_numbers, roundtrip
from ._workloads import matmul, softmax

from ingot import te


def test_rfactor_matmul_split_reduce_loop():
    before = matmul(16, 16, 16)
    sch = Schedule(before)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, [None, 4])
    rf = sch.rfactor(k1, 0)
    rf_block = sch.get(rf)
    assert rf_block.name_hint == "C_rf"
    assert [iv.kind for iv in rf_block.iter_vars] == ["S", "S", "R", "S"]
    rf_buf = rf_block.writes[0].buffer
    assert [int(d) for d in rf_buf.shape] == [4, 16, 16]
    assert any(b is rf_buf for b in sch.mod["main"].body.block.alloc_buffers)
    # The write-back block keeps the name and reduces over the factored axis.
    wb = sch.get(c)
    assert wb.name_hint == "C" and [iv.kind for iv in wb.iter_vars] == ["S", "S", "R"]
    assert "b6 = sch.rfactor(loop=l5, factor_axis=0)" in str(sch.trace)
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_rfactor_then_vectorize_the_factored_axis():
    A = te.placeholder((8, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    before = te.create_prim_func([A, B])
    sch = Schedule(before)
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    k0, k1 = sch.split(k, [None, 8])
    sch.reorder(i, k0, k1)
    rf = sch.rfactor(k1, 1)
    # In the rf block, k1 feeds a spatial variable only: it can now be parallelized / vectorized.
    rf_loops = sch.get_loops(rf)
    sch.reorder(rf_loops[0], rf_loops[2], rf_loops[1])
    sch.parallel(rf_loops[0])
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod, rtol=1e-4, atol=1e-4)


def test_rfactor_max_combiner():
    before = softmax(4, 16)
    sch = Schedule(before)
    i, k = sch.get_loops(sch.get_block("T_max"))
    k0, k1 = sch.split(k, [4, 4])
    sch.rfactor(k0, 0)
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_rfactor_refusals():
    sch = Schedule(matmul())
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    with pytest.raises(ScheduleError, match="not bound to reduce variables only"):
        sch.rfactor(i, 0)
    with pytest.raises(ValueError, match="factor_axis 5 is out of range"):
        sch.rfactor(k, 5)
    sch.decompose_reduction(c, k)
    with pytest.raises(ScheduleError, match="not a reduction block"):
        sch.rfactor(k, 0)
    # A reduction whose update is not `X = op(X, rhs)`.
    A = te.placeholder((8, 8), name="A")
    r = te.reduce_axis((0, 8), name="r")
    B = te.compute((8,), lambda i: te.sum(A[i, r], axis=r), name="B")
    f = te.create_prim_func([A, B])
    sch = Schedule(f)
    blk = sch.get(sch.get_block("B"))
    from ingot.tir.schedule.primitives.rfactor import detect_combiner

    assert detect_combiner(blk)[0].__name__ == "Add"
    assert detect_combiner(blk.replace(init=None)) is None
