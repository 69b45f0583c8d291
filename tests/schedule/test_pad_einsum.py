"""pad_einsum: padded producers/consumer, refusals, trace round trips, numbers."""
from __future__ import annotations

import pytest

from ingot.tir.schedule import Schedule, ScheduleError

from ._hard_util import assert_same_numbers, roundtrip
from ._workloads import matmul, softmax


def test_pad_einsum_ragged_matmul_then_tile():
    before = matmul(13, 10, 7)
    sch = Schedule(before)
    c = sch.get_block("C")
    sch.pad_einsum(c, [4, 8, 4])
    assert [int(iv.dom.extent) for iv in sch.get(c).iter_vars] == [16, 16, 8]
    assert {"A_pad", "B_pad", "C_unpad"} <= set(sch.state.blocks("main"))
    assert "sch.pad_einsum(block=b0, padding=[4, 8, 4])" in str(sch.trace)
    # The padded extents now split evenly (no predicates).
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, 8])
    assert "T.where" not in str(sch.mod["main"])
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_pad_einsum_spatial_only_and_noop():
    before = matmul(12, 10, 8)
    sch = Schedule(before)
    c = sch.get_block("C")
    sch.pad_einsum(c, [1, 16, 1])
    assert "A_pad" not in sch.state.blocks("main")  # A is indexed by i, k only: unchanged
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_pad_einsum_refusals():
    sch = Schedule(softmax(4, 6))
    with pytest.raises(ScheduleError, match="would change the result"):
        sch.pad_einsum(sch.get_block("T_max"), [1, 4])
    with pytest.raises(ScheduleError, match="must give one positive factor each"):
        sch.pad_einsum(sch.get_block("T_sum"), [4])
    from ingot import te
    A = te.placeholder((9,), name="A")
    B = te.compute((8,), lambda i: A[i + 1] * 2.0, name="B")
    sch2 = Schedule(te.create_prim_func([A, B]))
    with pytest.raises(ScheduleError, match="not plain iteration variables"):
        sch2.pad_einsum(sch2.get_block("B"), [4])
    sch = Schedule(matmul(12, 10, 8))
    c = sch.get_block("C")
    i, _, _ = sch.get_loops(c)
    sch.split(i, [None, 4])
    with pytest.raises(ScheduleError, match="not bound to its own loop"):
        sch.pad_einsum(c, [8, 8, 8])
