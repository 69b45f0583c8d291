"""Property-based tests: random sequences of the hard primitives (compute_at, inline, rfactor,
decompose_reduction, blockize, pad_einsum, transform_layout, ...) on matmul, softmax, layernorm and
conv2d built with `ingot.te`. Every step either applies or raises ScheduleError; the result always
computes the same numbers as the unscheduled function and its trace replays to the same IR."""
from __future__ import annotations

import pytest

from ingot import te
from ingot.tir.schedule import Schedule, ScheduleError

from ._hard_util import assert_same_numbers, roundtrip
from ._workloads import matmul, softmax

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


def layernorm(n=4, m=8):
    from ingot import tir

    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    s = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="S")
    k2 = te.reduce_axis((0, m), name="k2")
    sq = te.compute((n,), lambda i: te.sum(A[i, k2] * A[i, k2], axis=k2), name="SQ")
    mean = te.compute((n,), lambda i: s[i] / float(m), name="MEAN")
    var = te.compute((n,), lambda i: sq[i] / float(m) - mean[i] * mean[i], name="VAR")
    out = te.compute((n, m), lambda i, j: (A[i, j] - mean[i]) / tir.sqrt(var[i] + 1e-5), name="OUT")
    return te.create_prim_func([A, out])


def conv2d(c=2, h=6, w=6, f=3, r=3):
    A = te.placeholder((1, c, h, w), name="A")
    W = te.placeholder((f, c, r, r), name="W")
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, r), name="ry")
    rx = te.reduce_axis((0, r), name="rx")
    conv = te.compute((1, f, h - r + 1, w - r + 1), lambda n, o, y, x: te.sum(
        A[n, rc, y + ry, x + rx] * W[o, rc, ry, rx], axis=[rc, ry, rx]), name="conv")
    relu = te.compute(conv.shape, lambda n, o, y, x: te.max(conv[n, o, y, x], 0.0), name="relu")
    return te.create_prim_func([A, W, relu])


WORKLOADS = {
    "matmul": lambda: matmul(8, 12, 6),
    "softmax": lambda: softmax(4, 8),
    "layernorm": layernorm,
    "conv2d": conv2d,
}
STEPS = ["split", "compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline",
         "decompose_reduction", "rfactor", "sample_location", "blockize", "pad_einsum", "transform_layout"]


def _blocks(sch):
    return sorted(n for n in sch.state.blocks("main") if n != "root")


def _all_loops(sch):
    out = []
    for name in _blocks(sch):
        out.extend(sch.get_loops(sch.get_block(name)))
    return out


def _step(sch, data, kind):
    blocks = _blocks(sch)
    pick_block = lambda: sch.get_block(data.draw(st.sampled_from(blocks)))  # noqa: E731
    if kind == "split":
        loops = _all_loops(sch)
        loop = data.draw(st.sampled_from(loops))
        sch.split(loop, [None, data.draw(st.sampled_from([2, 3, 4]))])
    elif kind == "compute_at":
        sch.compute_at(pick_block(), data.draw(st.sampled_from(_all_loops(sch))),
                       preserve_unit_loops=data.draw(st.booleans()))
    elif kind == "reverse_compute_at":
        sch.reverse_compute_at(pick_block(), data.draw(st.sampled_from(_all_loops(sch))))
    elif kind == "compute_inline":
        sch.compute_inline(pick_block())
    elif kind == "reverse_compute_inline":
        sch.reverse_compute_inline(pick_block())
    elif kind == "decompose_reduction":
        b = pick_block()
        loops = sch.get_loops(b)
        if loops:
            sch.decompose_reduction(b, data.draw(st.sampled_from(loops)))
    elif kind == "rfactor":
        b = pick_block()
        loops = sch.get_loops(b)
        if loops:
            sch.rfactor(data.draw(st.sampled_from(loops)), 0)
    elif kind == "sample_location":
        b = pick_block()
        loc = sch.sample_compute_location(b)
        target = sch.get(loc)
        if target == "inline":
            sch.compute_inline(b)
        elif target != "root":
            sch.compute_at(b, loc)
    elif kind == "blockize":
        sch.blockize(data.draw(st.sampled_from(_all_loops(sch))))
    elif kind == "pad_einsum":
        b = pick_block()
        n = len(sch.get(b).iter_vars)
        sch.pad_einsum(b, [data.draw(st.sampled_from([1, 2, 4])) for _ in range(n)])
    elif kind == "transform_layout":
        b = pick_block()
        ndim = sch.get(b).writes[0].buffer.ndim
        if ndim >= 2:
            sch.transform_layout(b, 0, lambda *idx: tuple(reversed(idx)), )


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
@hypothesis.settings(max_examples=8, deadline=None, derandomize=True,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(data=st.data())
def test_random_hard_schedules_keep_numbers(workload, data):
    before = WORKLOADS[workload]()
    sch = Schedule(before, seed=0)
    applied = []
    for _ in range(data.draw(st.integers(1, 5))):
        kind = data.draw(st.sampled_from(STEPS))
        try:
            _step(sch, data, kind)
            applied.append(kind)
        except ScheduleError:
            pass  # a refusal must leave the schedule usable; the next step goes on from it
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod, rtol=1e-4, atol=1e-4)
