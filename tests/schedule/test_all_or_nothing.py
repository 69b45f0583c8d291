"""Every schedule primitive is all-or-nothing: driven into a refusal, it leaves the IR, the
handles, the random state and the trace exactly as they were, and the schedule goes on working
(another primitive succeeds; the result builds and matches numpy). `Schedule.attempt()` gives
the same guarantee to a sequence of primitives."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ingot.tir.schedule import Schedule, ScheduleError
from ingot.tir.schedule.instruction import ExprRV

from ._workloads import te


def _workload(n=8):
    """B = 2A (elementwise producer), C = B @ W (reduction), D = C + 1 (elementwise epilogue)."""
    A = te.placeholder((n, n), name="A")
    W = te.placeholder((n, n), name="W")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(B[i, k] * W[k, j], axis=k), name="C")
    D = te.compute((n, n), lambda i, j: C[i, j] + 1.0, name="D")
    return te.create_prim_func([A, W, D])


class _H:
    """The handles of a partly scheduled workload (a non-trivial trace to protect)."""

    def __init__(self, sch: Schedule):
        self.b, self.c, self.d = sch.get_block("B"), sch.get_block("C"), sch.get_block("D")
        self.i, j, self.k = sch.get_loops(self.c)
        self.j0, self.j1 = sch.split(j, [None, 4])
        self.stale = j  # removed by the split
        self.di, self.dj = sch.get_loops(self.d)
        self.bi, self.bj = sch.get_loops(self.b)
        self.tile = sch.sample_perfect_tile(self.di, n=2, max_innermost_factor=4)
        self.foreign_block = Schedule(_workload()).get_block("C")

    def live(self):
        return [self.b, self.c, self.d, self.i, self.k, self.j0, self.j1, self.di, self.dj,
                self.bi, self.bj, *self.tile]


def _blockize_crosswise(sch, h):
    # A binding that mixes inner and outer loops: fuse then split crosswise (blockize refuses).
    f = sch.fuse(h.bi, h.bj)
    _, f1 = sch.split(f, [None, 3])
    return lambda: sch.blockize(f1)


# (primitive, prepare(sch, handles) -> the refused call, exception, message)
CASES = [
    ("get_block", lambda s, h: lambda: s.get_block("nope"), ScheduleError, "nope"),
    ("get_loops", lambda s, h: lambda: s.get_loops(h.i), TypeError, "BlockRV"),
    ("get_child_blocks", lambda s, h: lambda: s.get_child_blocks(h.foreign_block), ScheduleError,
     "does not belong"),
    ("get_producers", lambda s, h: lambda: s.get_producers(h.foreign_block), ScheduleError, "does not belong"),
    ("get_consumers", lambda s, h: lambda: s.get_consumers(h.k), TypeError, "BlockRV"),
    ("split", lambda s, h: lambda: s.split(h.i, [3, 2]), ScheduleError, None),
    ("fuse", lambda s, h: lambda: s.fuse(h.i, h.di), ScheduleError, None),
    ("reorder", lambda s, h: lambda: s.reorder(h.di, h.i), ScheduleError, None),
    ("parallel", lambda s, h: lambda: s.parallel(h.k), ScheduleError, None),
    ("vectorize", lambda s, h: lambda: s.vectorize(h.k), ScheduleError, None),
    ("unroll", lambda s, h: lambda: s.unroll(h.stale), ScheduleError, "no longer exists"),
    ("bind", lambda s, h: lambda: s.bind(h.k, "threadIdx.x"), ScheduleError, None),
    ("annotate", lambda s, h: lambda: s.annotate(h.c, "key", object()), TypeError, None),
    ("unannotate", lambda s, h: lambda: s.unannotate(h.c, "missing"), ScheduleError, "no annotation"),
    ("cache_read", lambda s, h: lambda: s.cache_read(h.c, 5, "global"), ScheduleError, "out of range"),
    ("cache_write", lambda s, h: lambda: s.cache_write(h.c, 5, "local"), ScheduleError, "out of range"),
    ("set_scope", lambda s, h: lambda: s.set_scope(h.d, 0, "shared"), ScheduleError, "parameter"),
    ("storage_align", lambda s, h: lambda: s.storage_align(h.b, 0, axis=3, factor=8, offset=0), ScheduleError,
     "out of range"),
    ("add_unit_loop", lambda s, h: lambda: s.add_unit_loop(h.stale), ScheduleError, "no longer exists"),
    ("sample_perfect_tile", lambda s, h: lambda: s.sample_perfect_tile(h.i, n=2, decision=[3, 3]), ScheduleError,
     None),
    ("sample_categorical", lambda s, h: lambda: s.sample_categorical([1, 2], [0.5, 0.5], decision=7), ValueError,
     "decision 7"),
    ("sample_compute_location", lambda s, h: lambda: s.sample_compute_location(h.b, decision=99), ScheduleError,
     None),
    ("compute_at", lambda s, h: lambda: s.compute_at(h.b, h.di), ScheduleError, "not under loop"),
    ("reverse_compute_at", lambda s, h: lambda: s.reverse_compute_at(h.b, h.i), ScheduleError, None),
    ("compute_inline", lambda s, h: lambda: s.compute_inline(h.d), ScheduleError, None),
    ("reverse_compute_inline", lambda s, h: lambda: s.reverse_compute_inline(h.b), ScheduleError, None),
    ("decompose_reduction", lambda s, h: lambda: s.decompose_reduction(h.c, h.di), ScheduleError, None),
    ("rfactor", lambda s, h: lambda: s.rfactor(h.i, 0), ScheduleError, None),
    ("transform_layout", lambda s, h: lambda: s.transform_layout(h.b, ("write", 0), lambda i, j: (i // 2, j)),
     ScheduleError, "not bijective"),
    ("blockize", _blockize_crosswise, ScheduleError, "blockize: "),
    # tensorize blockizes the loop first, then refuses (the block still has its init): the
    # rollback must undo a change the primitive had already made.
    ("tensorize", lambda s, h: lambda: s.tensorize(h.j1, "avx512_fma_f32x16"), ScheduleError,
     "decompose_reduction first"),
    ("pad_einsum", lambda s, h: lambda: s.pad_einsum(h.c, [0, 0, 0]), ScheduleError, None),
]


def _snapshot(sch, handles):
    """Everything a refusal must leave unchanged, in comparable form."""
    handles = [rv for rv in handles if isinstance(rv, ExprRV) or sch.get_sref(rv).stmt is not None]
    return {
        "mod": sch.mod,
        "script": sch.mod.script(),
        "trace": str(sch.trace),
        "trace_json": json.dumps(sch.trace.as_json()),
        "n_handles": len(sch._symbols),
        "handles": [sch.get(rv) for rv in handles],
        "srefs": [(sch.get_sref(rv), sch.get_sref(rv).stmt) for rv in handles if not isinstance(sch.get(rv), int)],
        "rng": json.dumps(sch.rng.bit_generator.state, default=str),
    }


def _assert_unchanged(before, sch, handles):
    after = _snapshot(sch, handles)
    assert after["script"] == before["script"]
    assert after["trace"] == before["trace"] and after["trace_json"] == before["trace_json"]
    assert after["mod"] is before["mod"]
    assert after["n_handles"] == before["n_handles"]
    assert all(x is y for x, y in zip(after["handles"], before["handles"]))
    assert all(a[0] is b[0] and a[1] is b[1] for a, b in zip(after["srefs"], before["srefs"]))
    assert after["rng"] == before["rng"]


def _finish_and_check(sch, h):
    """The schedule still works: more primitives succeed, and the program gives numpy's numbers."""
    import ingot

    sch.parallel(h.i)
    d_out, _ = sch.split(h.di, h.tile)
    sch.parallel(d_out)
    sch.vectorize(h.dj)
    rng = np.random.default_rng(0)
    a, w = rng.standard_normal((8, 8), dtype="float32"), rng.standard_normal((8, 8), dtype="float32")
    out = np.zeros((8, 8), "float32")
    ingot.build(sch.mod["main"], target="llvm -num-cores=2")["main"](a, w, out)
    np.testing.assert_allclose(out, (2 * a) @ w + 1, rtol=1e-5, atol=1e-5)


def test_cases_cover_every_primitive():
    primitives = {name for name, value in vars(Schedule).items() if getattr(value, "all_or_nothing", False)}
    assert primitives == {c[0] for c in CASES}


@pytest.mark.parametrize("name,prepare,exc,match", CASES, ids=[c[0] for c in CASES])
def test_refusal_changes_nothing(name, prepare, exc, match):
    sch = Schedule(_workload(), seed=3)
    h = _H(sch)
    call = prepare(sch, h)
    before = _snapshot(sch, h.live())
    with pytest.raises(exc, match=match or f"{name}: "):  # by default: the message names the primitive
        call()
    _assert_unchanged(before, sch, h.live())
    # The stale handle stays stale, the foreign one foreign.
    with pytest.raises(ScheduleError, match="no longer exists"):
        sch.get(h.stale)


def test_refused_schedules_still_build():
    # One schedule takes every refusal in turn (each must leave it intact), then is finished.
    sch = Schedule(_workload(), seed=3)
    h = _H(sch)
    script, trace = sch.mod.script(), str(sch.trace)
    for name, prepare, exc, match in CASES:
        if name == "blockize":  # its preparation schedules loops (fine, but not a refusal)
            continue
        with pytest.raises(exc, match=match or f"{name}: "):
            prepare(sch, h)()
    assert sch.mod.script() == script and str(sch.trace) == trace
    _finish_and_check(sch, h)


def test_a_failure_after_the_change_is_rolled_back(monkeypatch):
    # A fault after the primitive changed the state and made new handles (here: recording
    # fails) must undo the state, the handles, and revive the loop the split had removed.
    sch = Schedule(_workload(), seed=0)
    h = _H(sch)
    before = _snapshot(sch, h.live())

    def broken_record(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(sch, "_record", broken_record)
    with pytest.raises(RuntimeError, match="injected"):
        sch.split(h.i, [2, 4])
    monkeypatch.undo()
    _assert_unchanged(before, sch, h.live())
    assert sch.get(h.i).loop_var.name == "i"
    _finish_and_check(sch, h)


def test_attempt_rolls_back_a_sequence():
    sch = Schedule(_workload(), seed=0)
    h = _H(sch)
    before = _snapshot(sch, h.live())
    with pytest.raises(ScheduleError):
        with sch.attempt():
            sch.sample_categorical([1, 2, 3], [0.3, 0.3, 0.4])  # draws from the random state
            sch.cache_write(h.c, 0, "local")
            sch.reorder(h.j1, h.i)
            sch.compute_inline(h.d)  # refused: D writes the function's output
    _assert_unchanged(before, sch, h.live())
    # Nested: an inner refusal caught inside the attempt is undone alone; the rest commits.
    with sch.attempt():
        sch.parallel(h.bi)
        try:
            with sch.attempt():
                sch.vectorize(h.bj)
                sch.compute_inline(h.d)
        except ScheduleError:
            pass
    assert sch.get(h.bi).kind == "parallel" and sch.get(h.bj).kind == "serial"
    assert str(sch.trace).count("sch.vectorize") == 0 and str(sch.trace).count("sch.parallel") == 1
    _finish_and_check(sch, h)


def test_copy_inside_an_attempt_is_independent():
    sch = Schedule(_workload(), seed=0)
    h = _H(sch)
    with pytest.raises(ScheduleError):
        with sch.attempt():
            sch.parallel(h.bi)
            other = sch.copy()
            sch.compute_inline(h.d)
    assert sch.get(h.bi).kind == "serial"
    assert other.get(h.bi).kind == "parallel"


LOOKUPS = {"get_block", "get_loops", "get_child_blocks", "get_producers", "get_consumers"}


def test_lookups_take_the_cheap_path_and_nothing_else_does(monkeypatch):
    # Only the lookups are marked; samplers draw from the random state and keep the savepoint.
    marked = {name for name, value in vars(Schedule).items() if getattr(value, "lookup_only", False)}
    assert marked == LOOKUPS
    sch = Schedule(_workload(), seed=0)
    h = _H(sch)

    def no_savepoint():
        raise AssertionError("a lookup opened a savepoint")

    monkeypatch.setattr(sch, "_savepoint", no_savepoint)
    sch.get_block("C"), sch.get_loops(h.c), sch.get_child_blocks(h.i)
    sch.get_producers(h.c), sch.get_consumers(h.c)
    with pytest.raises(AssertionError, match="opened a savepoint"):
        sch.sample_categorical([1, 2], [0.5, 0.5])
    with pytest.raises(AssertionError, match="opened a savepoint"):
        sch.parallel(h.bi)


@pytest.mark.parametrize("in_attempt", [False, True])
def test_a_lookup_failing_after_it_added_handles_drops_them(monkeypatch, in_attempt):
    # The cheap path's undo: a fault after get_loops made its handles and recorded (here: in the
    # debug verification that follows the record) drops the handles and the instruction.
    sch = Schedule(_workload(), seed=0)
    h = _H(sch)
    before = _snapshot(sch, h.live())

    def broken_verify():
        raise RuntimeError("injected")

    monkeypatch.setattr(sch, "_verify", broken_verify)
    sch.debug_mask = "all"
    with pytest.raises(RuntimeError, match="injected"):
        if in_attempt:
            with sch.attempt():
                sch.get_loops(h.c)
        else:
            sch.get_loops(h.c)
    monkeypatch.undo()
    sch.debug_mask = 0
    _assert_unchanged(before, sch, h.live())
    # Inside an attempt that commits, a failed lookup leaves the other steps and the journal intact.
    with sch.attempt():
        sch.parallel(h.bi)
        with pytest.raises(ScheduleError, match="nope"):
            sch.get_block("nope")
        loops = sch.get_loops(h.d)
    assert sch.get(h.bi).kind == "parallel" and len(loops) == 2
    assert str(sch.trace).count("sch.get_block") == str(before["trace"]).count("sch.get_block")
    _finish_and_check(sch, h)
