"""cache_read/cache_write/set_scope/storage_align, traces (print, JSON, replay, decisions), sampling,
seeds, and random valid schedules checked against numpy."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ingot.ir import assert_structural_equal, structural_equal
from ingot.tir.schedule import Schedule, ScheduleError, Trace
from ingot.tir.schedule.primitives.sampling import perfect_tilings

from ._interp import run
from ._workloads import elementwise, matmul, softmax
from .test_primitives import _check_elementwise_numbers, _check_matmul_numbers, _roundtrip, _schedule


# -- caches and scopes ----------------------------------------------------------------------------
def test_cache_read_inserts_copy_and_redirects():
    sch = _schedule(matmul())
    c = sch.get_block("C")
    a_shared = sch.cache_read(c, 0, "shared")
    copy = sch.get(a_shared)
    assert copy.name_hint == "A_shared"
    assert copy.writes[0].buffer.scope == "shared"
    assert sch.get(c).reads[0].buffer is copy.writes[0].buffer
    root = sch.mod["main"].body.block
    assert [b.name for b in root.alloc_buffers] == ["A_shared"]
    assert [sch.get(x).name_hint for x in sch.get_producers(c)] == ["A_shared"]
    _check_matmul_numbers(sch)
    _roundtrip(sch)


def test_cache_write_returns_write_back_block():
    sch = _schedule(matmul())
    c = sch.get_block("C")
    c_local = sch.cache_write(c, 0, "local")
    wb = sch.get(c_local)
    assert wb.name_hint == "C_local" and wb.reads[0].buffer.scope == "local"
    assert sch.get(c).writes[0].buffer is wb.reads[0].buffer
    assert sch.get(c).init.buffer is wb.reads[0].buffer
    _check_matmul_numbers(sch)
    _roundtrip(sch)


def test_cache_refusals():
    sch = _schedule(matmul())
    c = sch.get_block("C")
    with pytest.raises(ScheduleError, match="out of range"):
        sch.cache_read(c, 5, "shared")
    with pytest.raises(ValueError, match="unknown storage scope"):
        sch.cache_write(c, 0, "texture")


def test_set_scope_and_storage_align():
    sch = _schedule(elementwise())
    b = sch.get_block("B")
    sch.set_scope(b, 0, "local")
    assert sch.mod["main"].body.block.alloc_buffers[0].scope == "local"
    assert sch.get(sch.get_block("C")).reads[0].buffer.scope == "local"
    sch.storage_align(b, 0, axis=0, factor=8, offset=1)
    assert sch.get(b).annotations["buffer_dim_align"] == ((0, 0, 8, 1),)
    _check_elementwise_numbers(sch)
    _roundtrip(sch)
    with pytest.raises(ScheduleError, match="parameter"):
        sch.set_scope(sch.get_block("C"), 0, "local")
    with pytest.raises(ScheduleError, match="axis 3 is out of range"):
        sch.storage_align(b, 0, axis=3, factor=8, offset=1)


# -- traces -----------------------------------------------------------------------------------------
def _tiled(seed):
    sch = _schedule(matmul(), seed=seed)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=8))
    sch.reorder(i0, j0, k, i1, j1)
    sch.vectorize(j1)
    sch.parallel(i0)
    return sch


def test_trace_prints_replayable_python():
    sch = _tiled(0)
    lines = str(sch.trace).splitlines()
    assert lines[0] == 'b0 = sch.get_block(name="C", func_name="main")'
    assert lines[1] == "l1, l2, l3 = sch.get_loops(block=b0)"
    assert lines[2].startswith("v4, v5 = sch.sample_perfect_tile(loop=l1, n=2, max_innermost_factor=8, decision=[")
    assert lines[3] == "l6, l7 = sch.split(loop=l1, factors=[v4, v5], preserve_unit_iters=True)"
    fresh = Schedule(matmul())
    exec("\n".join(lines), {"sch": fresh})
    assert_structural_equal(fresh.mod, sch.mod)


def test_trace_json_round_trip_and_version():
    sch = _tiled(1)
    data = json.loads(json.dumps(sch.trace.as_json()))
    assert data["version"] == 1
    again = Trace.from_json(data)
    assert str(again) == str(sch.trace)
    with pytest.raises(ValueError, match="version"):
        Trace.from_json({**data, "version": 99})


def test_replay_with_other_decision():
    sch = _tiled(2)
    trace = sch.trace
    inst = next(x for x in trace.insts if x.kind.name == "sample_perfect_tile")
    new = trace.with_decision(inst, [2, 8], remove_postproc=True)
    fresh = Schedule(matmul())
    new.apply_to_schedule(fresh)
    i0 = fresh.get_loops(fresh.get_block("C"))[0]
    assert fresh.get(i0).extent.value == 2
    _check_matmul_numbers(fresh)
    with pytest.raises(ScheduleError, match="not a perfect 2-tiling"):
        trace.with_decision(inst, [3, 5]).apply_to_schedule(Schedule(matmul()))


def test_decision_provider_and_simplified():
    sch = _tiled(3)
    sch.get_block("C")  # an unused lookup: simplified() drops it
    seen = []

    def provider(inst, inputs, attrs, decision):
        seen.append(inst.kind.name)
        return decision

    fresh = Schedule(matmul())
    sch.trace.apply_to_schedule(fresh, decision_provider=provider)
    assert seen == ["sample_perfect_tile", "sample_perfect_tile"]
    simple = sch.trace.simplified(remove_postproc=True)
    assert len(simple.insts) == len(sch.trace.insts) - 1


def test_seed_reproducibility_and_copy():
    assert str(_tiled(7).trace) == str(_tiled(7).trace)
    decisions = {tuple(d) for s in range(12) for d in _tiled(s).trace.decisions.values()}
    assert len(decisions) > 1
    sch = _tiled(4)
    twin = sch.copy()
    c = twin.get_block("C")
    loops = twin.get_loops(c)
    twin.unroll(loops[2])
    assert not structural_equal(twin.mod, sch.mod)
    assert sch.get(sch.get_loops(sch.get_block("C"))[2]).kind == "serial"
    assert sch.fork_seed() != sch.fork_seed()


def test_enter_postproc_is_dropped_on_request():
    sch = _tiled(5)
    before = len(sch.trace.insts)
    sch.enter_postproc()
    sch.unroll(sch.get_loops(sch.get_block("C"))[2])
    assert len(sch.trace.simplified(remove_postproc=True).insts) <= before
    fresh = Schedule(matmul())
    sch.trace.apply_to_schedule(fresh, remove_postproc=True)
    assert fresh.get(fresh.get_loops(fresh.get_block("C"))[2]).kind == "serial"


# -- sampling ---------------------------------------------------------------------------------------
def test_perfect_tilings_enumeration():
    assert perfect_tilings(8, 2, 4) == ((8, 1), (4, 2), (2, 4))
    tilings = perfect_tilings(64, 3, 16)
    assert all(a * b * c == 64 and c <= 16 for a, b, c in tilings)
    assert len(set(tilings)) == len(tilings)


def test_sample_categorical_and_compute_location():
    sch = _schedule(elementwise(), seed=0)
    v = sch.sample_categorical([1, 2, 4], [0.0, 1.0, 0.0])
    assert sch.get(v) == 2
    b = sch.get_block("B")
    # decisions: -1 root, -2 inline, k: the k-th candidate loop (consumer C's loops i, j)
    assert sch.get(sch.sample_compute_location(b, decision=0)).loop_var.name == "i"
    assert sch.get(sch.sample_compute_location(b, decision=1)).loop_var.name == "j"
    assert sch.get(sch.sample_compute_location(b, decision=-2)) == "inline"
    assert sch.get(sch.sample_compute_location(b, decision=-1)) == "root"
    with pytest.raises(ScheduleError, match="not available"):
        sch.sample_compute_location(b, decision=5)
    fresh = _roundtrip(sch)
    assert list(fresh.trace.decisions.values()) == [1, 0, 1, -2, -1]


# -- random valid schedules keep the numbers (hypothesis) -------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402


def _random_schedule(sch, block_names, ops):
    """Apply primitives chosen by ``ops`` (ints) when they are valid; refusals must be ScheduleErrors."""
    for op in ops:
        name = block_names[op % len(block_names)]
        b = sch.get_block(name)
        loops = sch.get_loops(b)
        loop = loops[(op // 7) % len(loops)]
        kind = op % 6
        try:
            if kind == 0:
                sch.split(loop, sch.sample_perfect_tile(loop, n=2, max_innermost_factor=4))
            elif kind == 1 and len(loops) >= 2:
                sch.reorder(loops[-1], loops[0])
            elif kind == 2:
                sch.parallel(loop)
            elif kind == 3:
                sch.vectorize(loops[-1])
            elif kind == 4:
                sch.unroll(loop)
            elif kind == 5 and len(loops) >= 2:
                sch.fuse(loops[0], loops[1])
        except ScheduleError:
            pass


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=1, max_size=5), st.integers(0, 2**31))
def test_random_schedules_keep_numbers(ops, seed):
    cases = [
        (matmul(8, 8, 8), ["C"], lambda f: _mm_check(f)),
        (elementwise(6, 4), ["B", "C"], lambda f: _ew_check(f)),
        (softmax(3, 4), ["T_max", "T_exp", "T_sum", "T_softmax"], lambda f: _sm_check(f)),
    ]
    for func, names, check in cases:
        sch = Schedule(func, seed=seed)
        _random_schedule(sch, names, ops)
        check(sch.mod["main"])
        fresh = Schedule(func)
        Trace.from_json(json.dumps(sch.trace.as_json())).apply_to_schedule(fresh)
        assert_structural_equal(fresh.mod, sch.mod)


def _mm_check(f):
    rng = np.random.default_rng(0)
    a, b = rng.random((8, 8), dtype="float32"), rng.random((8, 8), dtype="float32")
    c = np.zeros((8, 8), "float32")
    run(f, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def _ew_check(f):
    a = np.random.default_rng(0).random((6, 4), dtype="float32")
    c = np.zeros((6, 4), "float32")
    run(f, a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def _sm_check(f):
    a = np.random.default_rng(0).random((3, 4), dtype="float32")
    o = np.zeros((3, 4), "float32")
    run(f, a, o)
    ref = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(o, ref / ref.sum(1, keepdims=True), rtol=1e-5)
