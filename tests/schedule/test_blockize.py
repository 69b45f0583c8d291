"""blockize: outer block structure, init handling, refusals, trace round trips, numbers."""
from __future__ import annotations

import pytest

from ingot.tir.schedule import Schedule, ScheduleError

from ._hard_util import assert_same_numbers, roundtrip
from ._workloads import elementwise, matmul


def _tiled_matmul():
    before = matmul(16, 32, 16)
    sch = Schedule(before)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    return before, sch, c, (i0, j0, k, i1, j1)


def test_blockize_elementwise_tile():
    before = elementwise(16, 12)
    sch = Schedule(before)
    b = sch.get_block("B")
    i, j = sch.get_loops(b)
    i0, i1 = sch.split(i, [None, 4])
    outer = sch.blockize(i1)
    ob = sch.get(outer)
    assert ob.name_hint == "B_o" and [(iv.kind, int(iv.dom.extent)) for iv in ob.iter_vars] == [("S", 4)]
    inner_realize = ob.body.body.body  # for i1: for j: realize
    assert [str(v) for v in inner_realize.iter_values] == ["v_i_o * 4 + i_1", "j"]
    assert [str(r) for r in ob.writes] == ["B[v_i_o * 4:v_i_o * 4 + 4, 0:12]"]
    assert "b5 = sch.blockize(target=l4, preserve_unit_iters=True)" in str(sch.trace)
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_blockize_reduction_moves_init():
    before, sch, c, (i0, j0, k, i1, j1) = _tiled_matmul()
    outer = sch.blockize(i1)
    ob = sch.get(outer)
    assert [iv.kind for iv in ob.iter_vars] == ["S", "S", "R"]
    assert ob.init is not None and sch.get(c).init is None
    assert "C_init" in sch.state.blocks("main")
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_blockize_refusals():
    before, sch, c, (i0, j0, k, i1, j1) = _tiled_matmul()
    sch2 = Schedule(elementwise())
    b = sch2.get_block("B")
    i, j = sch2.get_loops(b)
    sch2.compute_at(b, sch2.get_loops(sch2.get_block("C"))[0])
    with pytest.raises(ScheduleError, match="holds 2 blocks"):
        sch2.blockize(sch2.get_loops(sch2.get_block("C"))[0])
    # A binding that mixes inner and outer loops: fuse then split crosswise.
    sch3 = Schedule(elementwise(16, 12))
    i, j = sch3.get_loops(sch3.get_block("B"))
    f = sch3.fuse(i, j)
    f0, f1 = sch3.split(f, [None, 8])
    with pytest.raises(ScheduleError, match="cannot be divided"):
        sch3.blockize(f1)
