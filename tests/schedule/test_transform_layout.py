"""transform_layout: packing through cache_read, refusals (parameters, non-bijective), round trips, numbers."""
from __future__ import annotations

import pytest

from ingot.ir import assert_structural_equal
from ingot.tir.schedule import Schedule, ScheduleError

from ._hard_util import assert_same_numbers, roundtrip
from ._workloads import elementwise, matmul


def test_pack_b_via_cache_read():
    before = matmul(16, 64, 32)
    sch = Schedule(before)
    c = sch.get_block("C")
    packed = sch.cache_read(c, 1, "global")
    sch.transform_layout(packed, ("write", 0), lambda k, n: (n // 16, k, n % 16))
    buf = sch.get(packed).writes[0].buffer
    assert [int(d) for d in buf.shape] == [4, 32, 16]
    load = sch.get(c).body.value.b.b  # A[...] * B_global[...]
    assert load.buffer is buf and [str(x) for x in load.indices] == ["v_j // 16", "v_k", "v_j % 16"]
    assert 'index_map=[["k", "n"]' in str(sch.trace)
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)


def test_transform_intermediate_is_reversible():
    before = elementwise(16, 12)
    sch = Schedule(before)
    b = sch.get_block("B")
    sch.transform_layout(b, 0, lambda i, j: (j, i))
    assert [int(d) for d in sch.get(b).writes[0].buffer.shape] == [12, 16]
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod)
    from ingot.arith import IndexMap

    sch2 = Schedule(before)
    sch2.transform_layout(sch2.get_block("B"), "B", IndexMap.from_func(lambda i, j: (j, i)))
    assert_structural_equal(sch2.mod, sch.mod)


def test_transform_param_only_when_allowed():
    before = elementwise(16, 12)
    sch = Schedule(before)
    c = sch.get_block("C")
    with pytest.raises(ScheduleError, match="(?s)parameter.*cache_read"):
        sch.transform_layout(c, ("write", 0), lambda i, j: (j, i))
    sch.transform_layout(c, ("write", 0), lambda i, j: (j, i), allow_param_change=True)
    assert [int(d) for d in sch.mod["main"].params[1].shape] == [12, 16]


def test_transform_layout_refusals():
    sch = Schedule(elementwise(16, 12))
    b = sch.get_block("B")
    with pytest.raises(ScheduleError, match="not bijective"):
        sch.transform_layout(b, 0, lambda i, j: (i // 2, j))
    with pytest.raises(ScheduleError, match="not bijective"):
        sch.transform_layout(b, 0, lambda i, j: (i, j // 5, j % 5))
    with pytest.raises(ScheduleError, match="takes 1 indices"):
        from ingot.arith import IndexMap

        sch.transform_layout(b, 0, IndexMap.from_func(lambda i: (i,)))
    with pytest.raises(NotImplementedError, match="pad_value"):
        sch.transform_layout(b, 0, lambda i, j: (i, j), pad_value=0.0)
    with pytest.raises(ScheduleError, match="does not access a buffer named 'Z'"):
        sch.transform_layout(b, "Z", lambda i, j: (i, j))
