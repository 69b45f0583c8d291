"""Before/after IR and refusals for the loop primitives of `ingot.tir.Schedule`."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ingot.ir import IterVar, Range, Var, assert_structural_equal, decl_buffer, structural_equal
from ingot.tir import Block, BlockRealize, BufferStore, For, ForKind, PrimFunc
from ingot.tir.schedule import Schedule, ScheduleError, Trace

from ._interp import run
from ._workloads import elementwise, matmul, softmax


# -- hand-built IR (expected results) ----------------------------------------------------------
def _scale_1d(n, loops_fn):
    """B[vi] = A[vi] * 2 under loops built by ``loops_fn(make_realize) -> stmt``."""
    A = decl_buffer((n,), "float32", "A")
    B = decl_buffer((n,), "float32", "B")
    vi = Var("vi")
    block = Block([IterVar(Range.from_min_extent(0, n), vi, "S")], [A[vi:vi + 1]], [B[vi:vi + 1]], "B",
                  BufferStore(B, A[vi] * 2.0, [vi]))

    def realize(value, predicate=True):
        return BlockRealize([value], predicate, block)

    body = loops_fn(realize)
    root = BlockRealize([], True, Block([], [], [], "root", body))
    return PrimFunc([A, B], root, {"global_symbol": "main"})


def _serial(var, extent, body, kind=ForKind.SERIAL, **kw):
    return For(var, 0, extent, kind, body, **kw)


def _roundtrip(sch):
    """Replay ``sch``'s trace (through JSON) on a fresh schedule of the original module; compare."""
    text = json.dumps(sch.trace.as_json())
    fresh = Schedule(_ORIGINAL[id(sch)])
    Trace.from_json(text).apply_to_schedule(fresh)
    assert_structural_equal(fresh.mod, sch.mod)
    return fresh


_ORIGINAL: dict = {}


def _schedule(func, **kw):
    sch = Schedule(func, **kw)
    _ORIGINAL[id(sch)] = func
    return sch


# -- lookups --------------------------------------------------------------------------------------
def test_get_block_get_loops_and_get():
    sch = _schedule(matmul())
    b = sch.get_block("C")
    i, j, k = sch.get_loops(b)
    assert sch.get(b).name_hint == "C"
    assert [sch.get(x).extent.value for x in (i, j, k)] == [16, 16, 16]
    assert str(sch.trace).splitlines() == [
        'b0 = sch.get_block(name="C", func_name="main")',
        "l1, l2, l3 = sch.get_loops(block=b0)",
    ]
    with pytest.raises(ScheduleError, match="no block named 'D'"):
        sch.get_block("D")


def test_producers_consumers_child_blocks():
    sch = _schedule(elementwise())
    b, c = sch.get_block("B"), sch.get_block("C")
    assert [sch.get(x).name_hint for x in sch.get_consumers(b)] == ["C"]
    assert [sch.get(x).name_hint for x in sch.get_producers(c)] == ["B"]
    assert sch.get_producers(b) == [] and sch.get_consumers(c) == []
    (i, _) = sch.get_loops(c)
    assert [sch.get(x).name_hint for x in sch.get_child_blocks(i)] == ["C"]
    _roundtrip(sch)


# -- split ----------------------------------------------------------------------------------------
def test_split_exact_matches_expected_ir():
    before = _scale_1d(16, lambda r: (lambda i: _serial(i, 16, r(i)))(Var("i")))
    sch = _schedule(before)
    (i,) = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, factors=[None, 4])
    a, b = Var("i_0"), Var("i_1")
    expected = _scale_1d(16, lambda r: _serial(a, 4, _serial(b, 4, r(a * 4 + b))))
    assert_structural_equal(sch.mod["main"], expected)
    assert [sch.get(x).extent.value for x in (i0, i1)] == [4, 4]
    assert "l2, l3 = sch.split(loop=l1, factors=[None, 4], preserve_unit_iters=True)" in str(sch.trace)
    _roundtrip(sch)


def test_split_non_divisible_adds_predicate():
    before = _scale_1d(10, lambda r: (lambda i: _serial(i, 10, r(i)))(Var("i")))
    sch = _schedule(before)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, factors=[None, 4])
    a, b = Var("i_0"), Var("i_1")
    expected = _scale_1d(10, lambda r: _serial(a, 3, _serial(b, 4, r(a * 4 + b, a * 4 + b < 10))))
    assert_structural_equal(sch.mod["main"], expected)
    x = np.arange(10, dtype="float32")
    y = np.zeros(10, "float32")
    run(sch.mod["main"], x, y)
    np.testing.assert_allclose(y, x * 2)
    _roundtrip(sch)


def test_split_refusals():
    sch = _schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="2 factors are None"):
        sch.split(i, [None, None])
    with pytest.raises(ScheduleError, match="multiply to 8 < extent 16"):
        sch.split(i, [2, 4])
    with pytest.raises(ScheduleError, match="factor 1 .* is 0"):
        sch.split(i, [None, 0])
    sch.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match="bound to blockIdx.x"):
        sch.split(i, [None, 4])


def test_split_three_ways_with_sampled_factors_numbers():
    sch = _schedule(matmul(), seed=3)
    i, j, k = sch.get_loops(sch.get_block("C"))
    factors = sch.sample_perfect_tile(j, n=3, max_innermost_factor=4)
    j0, j1, j2 = sch.split(j, factors)
    assert [sch.get(x).extent.value for x in (j0, j1, j2)] == [sch.get(f) for f in factors]
    _check_matmul_numbers(sch)
    _roundtrip(sch)


# -- fuse -----------------------------------------------------------------------------------------
def test_fuse_matches_expected_ir_and_numbers():
    sch = _schedule(elementwise(8, 4))
    i, j = sch.get_loops(sch.get_block("B"))
    f = sch.fuse(i, j)
    node = sch.get(f)
    assert node.extent.value == 32 and node.loop_var.name == "i_j_fused"
    realize = node.body
    assert structural_equal(realize.iter_values[0], node.loop_var // 4)
    assert structural_equal(realize.iter_values[1], node.loop_var % 4)
    _check_elementwise_numbers(sch, (8, 4))
    _roundtrip(sch)


def test_fuse_refuses_non_nested_loops():
    sch = _schedule(elementwise())
    (ib, _), (ic, jc) = sch.get_loops(sch.get_block("B")), sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="not the only child"):
        sch.fuse(ib, jc)
    with pytest.raises(ScheduleError, match="not the only child"):
        sch.fuse(jc, ic)


# -- reorder --------------------------------------------------------------------------------------
def test_reorder_matmul():
    sch = _schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i, j0, k, j1)
    names = [sch.get(x).loop_var.name for x in sch.get_loops(sch.get_block("C"))]
    assert names == ["i", "j_0", "k", "j_1"]
    _check_matmul_numbers(sch)
    _roundtrip(sch)


def test_reorder_refusals():
    sch = _schedule(elementwise())
    (ib, _), (_, jc) = sch.get_loops(sch.get_block("B")), sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="one path"):
        sch.reorder(ib, jc)
    with pytest.raises(ScheduleError, match="given twice"):
        sch.reorder(ib, ib)


# -- loop kinds -------------------------------------------------------------------------------------
def test_parallel_vectorize_unroll_bind():
    sch = _schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    sch.vectorize(j)
    sch.unroll(k)
    kinds = [sch.get(x).kind for x in (i, j, k)]
    assert kinds == [ForKind.PARALLEL, ForKind.VECTORIZED, ForKind.UNROLLED]
    _check_matmul_numbers(sch)
    _roundtrip(sch)
    sch2 = _schedule(matmul())
    i, j, k = sch2.get_loops(sch2.get_block("C"))
    sch2.bind(i, "blockIdx.x")
    sch2.bind(j, "threadIdx.x")
    assert sch2.get(i).thread_binding == "blockIdx.x" and sch2.get(i).kind == ForKind.THREAD_BINDING
    _roundtrip(sch2)
    with pytest.raises(ValueError, match="unknown thread axis"):
        sch2.bind(k, "threadIdx.w")


@pytest.mark.parametrize("primitive", ["parallel", "vectorize"])
def test_reduction_loop_cannot_be_parallel(primitive):
    sch = _schedule(matmul())
    _, _, k = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="reduce variable"):
        getattr(sch, primitive)(k)
    with pytest.raises(ScheduleError, match="reduce variable"):
        sch.bind(k, "threadIdx.x")


def test_error_marks_the_offending_loop():
    sch = _schedule(matmul())
    _, _, k = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError) as info:
        sch.parallel(k)
    text = str(info.value)
    lines = text.splitlines()
    at = next(n for n, line in enumerate(lines) if line.strip().startswith("for k in"))
    assert set(lines[at + 1].strip()) == {"^"}
    quiet = Schedule(matmul(), error_render_level="none")
    with pytest.raises(ScheduleError) as info:
        quiet.parallel(quiet.get_loops(quiet.get_block("C"))[2])
    assert "\n" not in str(info.value)


def test_handles_to_removed_loops_raise():
    sch = _schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, [None, 4])
    with pytest.raises(ScheduleError, match="no longer exists"):
        sch.parallel(j)
    assert sch.get(i).loop_var.name == "i"  # untouched loops keep their handles


# -- annotations, add_unit_loop ---------------------------------------------------------------------
def test_annotate_unannotate():
    sch = _schedule(matmul())
    b = sch.get_block("C")
    i, _, _ = sch.get_loops(b)
    v = sch.sample_categorical([0, 16, 64], [0.0, 0.0, 1.0])
    sch.annotate(i, "pragma_auto_unroll_max_step", v)
    sch.annotate(b, "meta_schedule.tiling_structure", "SSRSRS")
    assert sch.get(i).annotations["pragma_auto_unroll_max_step"] == 64
    assert sch.get(b).annotations["meta_schedule.tiling_structure"] == "SSRSRS"
    _roundtrip(sch)
    sch.unannotate(i, "pragma_auto_unroll_max_step")
    assert "pragma_auto_unroll_max_step" not in sch.get(i).annotations
    with pytest.raises(ScheduleError, match="no annotation"):
        sch.unannotate(i, "pragma_auto_unroll_max_step")
    _roundtrip(sch)


def test_add_unit_loop():
    sch = _schedule(matmul())
    b = sch.get_block("C")
    u = sch.add_unit_loop(b)
    assert sch.get(u).extent.value == 1
    assert len(sch.get_loops(b)) == 4
    _check_matmul_numbers(sch)
    _roundtrip(sch)


# -- helpers for numbers ---------------------------------------------------------------------------
def _check_matmul_numbers(sch, n=16):
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype="float32")
    b = rng.random((n, n), dtype="float32")
    c = np.zeros((n, n), "float32")
    run(sch.mod["main"], a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def _check_elementwise_numbers(sch, shape=(16, 12)):
    a = np.random.default_rng(0).random(shape, dtype="float32")
    c = np.zeros(shape, "float32")
    run(sch.mod["main"], a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_softmax_schedule_numbers():
    sch = _schedule(softmax())
    for name in ("T_exp", "T_softmax"):
        i, j = sch.get_loops(sch.get_block(name))
        j0, j1 = sch.split(j, [None, 4])
        sch.vectorize(j1)
        sch.parallel(i)
    a = np.random.default_rng(1).random((4, 8), dtype="float32")
    out = np.zeros((4, 8), "float32")
    run(sch.mod["main"], a, out)
    ref = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(out, ref / ref.sum(1, keepdims=True), rtol=1e-5)
    _roundtrip(sch)
