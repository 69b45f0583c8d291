"""The BLIS-ordered blocked GEMM rule (ingot/ops/schedule/blocked.py): the loop structure it
builds (k slices outermost, B packed per slice under the slice loop, parallel column panels,
A read in place), numbers vs numpy for one and several k slices, plain / pre-packed / batched
operands, epilogues (per tile with one slice, one inlined pass with several), and the fallback
to `gemm_rule` on sizes that do not fit the tiles."""
from __future__ import annotations

import numpy as np
import pytest

from ingot import ops, te
from ingot.ops import packed
from ingot.ops.schedule import schedule_blocks
from ingot.ops.schedule.analysis import analyze_block
from ingot.ops.schedule.blocked import KC_CHOICES, blocked_gemm_rule, choose_kc, default_gemm_tile
from ingot.target import Target
from ingot.tir.schedule import Schedule
from ingot.tir.schedule.error import ScheduleError
from ingot.tir.stmt import ForKind

from .schedule_testutil import (AVX512_CPU, AVX512_TARGET, CPU, CPU_TARGETS, TARGET, kernel_loop as _kernel_loop,
                                run as _run, runs_here, schedule as _schedule)

pytestmark = pytest.mark.compiler

RNG = np.random.default_rng(7)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _kinds(sch, block):
    """(loop variable name, kind) from the root to ``block``."""
    return [(sch.get(lp).loop_var.name, sch.get(lp).kind) for lp in sch.get_loops(sch.get_block(block))]


def test_nc_blocks_keep_a_threads_share_of_the_slice_in_l2():
    from ingot.ops.schedule.blocked import _choose_nc

    spr = AVX512_CPU  # 2 MiB L2: half of it per thread's share of a packed slice
    assert _choose_nc(1024, 512, 32, spr.with_cores(2)) == 1024  # 1 MiB per thread: one block
    assert _choose_nc(2048, 512, 32, spr.with_cores(2)) == 1024
    assert _choose_nc(2048, 512, 32, spr.with_cores(1)) == 512
    assert _choose_nc(3072, 512, 32, spr.with_cores(2)) * 512 * 4 / 2 <= spr.l2_bytes // 2
    assert _choose_nc(2048, 512, 16, Target("llvm -mcpu=znver3").cpu.with_cores(2)) == 256  # 512 KiB L2


def test_choose_kc():
    assert KC_CHOICES[0] == 512
    assert [choose_kc(k) for k in (512, 1024, 768, 3072, 256, 264, 640)] == [512, 512, 384, 512, 256, None, None]


def _plain_rule(m, n, k, cpu=AVX512_CPU, **kw):
    """The blocked rule on an m x n x k matmul for ``cpu`` (default AVX-512: the loop nests the
    structure tests spell out; its 16-lane code also runs, split in halves, on an AVX2 host)."""
    A, B = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    C = ops.matmul(A, B)
    sch = Schedule(te.create_prim_func([A, B, C]))
    blocked_gemm_rule(sch, C.op.name, analyze_block(sch, sch.get_block(C.op.name)), cpu, **kw)
    return sch, C.op.name


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_default_micro_kernel_fits_the_register_file_of_every_cpu(target):
    # the default tile derives from the target's registers: full-width vector FMAs, no spills,
    # on AVX2 (16 ymm) and AVX-512 (32 zmm); the numbers where the host runs the code
    m, n, k = 256, 128, 512
    sch, name = _plain_rule(m, n, k, cpu=Target(target).cpu)
    loop = _kernel_loop(sch, target)
    mr, nvec = default_gemm_tile(m, Target(target).cpu)
    assert loop["vector"] == loop["fma"] >= mr * nvec and loop["stack"] == 0, (target, loop)
    if runs_here(target):
        a, b = _rand(m, k), _rand(k, n)
        np.testing.assert_allclose(_run(sch, [a, b], (m, n), target), a @ b, rtol=1e-4, atol=1e-3)


def test_default_is_panel_order_one_parallel_region():
    m, n, k = 512, 128, 1024  # two k slices of 512
    A, B = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    C = ops.matmul(A, B)
    sch, picked = _schedule([A, B, C])
    assert picked[C.op.name] == "blocked_gemm_rule"
    blocks = sch.state.blocks("main")
    assert "B_global" in blocks and "A_global" not in blocks
    kinds = _kinds(sch, C.op.name)
    # (jr parallel, ic, kc, ir, ko, ki unrolled, ii unrolled, jn unrolled, jl vector)
    assert [kd for _, kd in kinds][:4] == [ForKind.PARALLEL] + [ForKind.SERIAL] * 3
    assert kinds[-1][1] == ForKind.VECTORIZED
    # the panel is packed inside the same parallel loop, and C is zeroed there too: one region
    assert _kinds(sch, "B_global")[0] == kinds[0]
    assert _kinds(sch, C.op.name + "_init")[0] == kinds[0]
    text = sch.mod["main"].script()
    assert text.count("T.parallel") == 1
    a, b = _rand(m, k), _rand(k, n)
    np.testing.assert_allclose(_run(sch, [a, b], (m, n)), a @ b, rtol=1e-4, atol=1e-3)


def test_slice_order_structure_and_numbers():
    m, n, k = 512, 128, 1024
    sch, name = _plain_rule(m, n, k, order="slice")
    kinds = _kinds(sch, name)
    # (kc serial, ic serial, jr parallel, ir, ...): BLIS's order, B slice shared by the threads
    assert [kd for _, kd in kinds][:3] == [ForKind.SERIAL, ForKind.SERIAL, ForKind.PARALLEL]
    # the packing copy sits under the k-slice loop (one KC x N slice per iteration), parallel
    pack = _kinds(sch, "B_global")
    assert pack[0][0] == kinds[0][0] and pack[1][1] == ForKind.PARALLEL
    a, b = _rand(m, k), _rand(k, n)
    np.testing.assert_allclose(_run(sch, [a, b], (m, n)), a @ b, rtol=1e-4, atol=1e-3)


def test_panel_order_fuses_the_epilogue_after_the_slices():
    m, k, n = 128, 1536, 256  # "panel" order (jr parallel, ic, kc, ir), K = 3 slices
    x, w, bias = te.placeholder((m, k), name="x"), te.placeholder((n, k), name="w"), te.placeholder((n,), name="b")
    y = ops.relu(ops.nn.dense(x, w, bias))
    sch, picked = _schedule([x, w, bias, y])
    assert picked["T_dense"] == "blocked_gemm_rule"
    kinds = _kinds(sch, "T_dense")
    assert [kd for _, kd in kinds][:3] == [ForKind.PARALLEL, ForKind.SERIAL, ForKind.SERIAL]
    # the weight panel (K x NR) is packed inside the parallel jr loop by the thread that reads it
    assert _kinds(sch, "w_global")[0] == kinds[0]
    # bias + relu run per (jr, ic) block after its k slices, under the same parallel loop
    assert _kinds(sch, "T_relu")[0] == kinds[0]
    xa, wa, ba = _rand(m, k), _rand(n, k) / 16, _rand(n)
    np.testing.assert_allclose(_run(sch, [xa, wa, ba], (m, n)), np.maximum(xa @ wa.T + ba, 0),
                               rtol=1e-4, atol=1e-3)


def test_block_order_fuses_the_epilogue_per_column_block():
    x, w, bias = te.placeholder((256, 1024), name="x"), te.placeholder((128, 1024), name="w"), \
        te.placeholder((128,), name="b")
    y = ops.relu(ops.nn.dense(x, w, bias))
    sch = Schedule(te.create_prim_func([x, w, bias, y]))
    blocked_gemm_rule(sch, "T_dense", analyze_block(sch, sch.get_block("T_dense")), CPU, order="block")
    kinds = _kinds(sch, "T_dense")
    assert [kd for _, kd in kinds][:2] == [ForKind.SERIAL, ForKind.PARALLEL]  # ic, then parallel jr
    assert _kinds(sch, "T_relu")[:2] == kinds[:2]  # epilogue per (ic, jr) block after its k slices
    xa, wa, ba = _rand(256, 1024), _rand(128, 1024) / 16, _rand(128)
    np.testing.assert_allclose(_run(sch, [xa, wa, ba], (256, 128)), np.maximum(xa @ wa.T + ba, 0),
                               rtol=1e-4, atol=1e-3)


def test_one_slice_fuses_the_epilogue_per_tile():
    x, w, bias = te.placeholder((256, 512), name="x"), te.placeholder((128, 512), name="w"), \
        te.placeholder((128,), name="b")
    y = ops.relu(ops.nn.dense(x, w, bias))
    sch, picked = _schedule([x, w, bias, y])
    assert picked["T_dense"] == "blocked_gemm_rule"
    relu = _kinds(sch, "T_relu")
    assert any(kd == ForKind.PARALLEL for _, kd in relu) and relu[-1][1] == ForKind.VECTORIZED
    xa, wa, ba = _rand(256, 512), _rand(128, 512), _rand(128)
    np.testing.assert_allclose(_run(sch, [xa, wa, ba], (256, 128)), np.maximum(xa @ wa.T + ba, 0),
                               rtol=1e-4, atol=1e-3)


def test_slice_order_inlines_the_epilogue_chain():
    x, w, bias = te.placeholder((512, 768), name="x"), te.placeholder((256, 768), name="w"), \
        te.placeholder((256,), name="b")
    y = ops.relu(ops.nn.dense(x, w, bias))  # K = 768: two slices of 384
    sch = Schedule(te.create_prim_func([x, w, bias, y]))
    blocked_gemm_rule(sch, "T_dense", analyze_block(sch, sch.get_block("T_dense")), CPU, order="slice")
    assert "T_add_bias" not in sch.state.blocks("main")  # inlined into T_relu: one pass over C
    sch = schedule_blocks(sch, Target(TARGET))  # the driver makes T_relu parallel + vectorized
    xa, wa, ba = _rand(512, 768), _rand(256, 768), _rand(256)
    np.testing.assert_allclose(_run(sch, [xa, wa, ba], (512, 256)), np.maximum(xa @ wa.T + ba, 0),
                               rtol=1e-4, atol=1e-3)


def test_prepacked_weight_several_slices():
    m, k, n = 128, 1536, 256
    x, w = _rand(1, m, k), _rand(n, k) / 16
    wp = packed.pack_dense_weight(w, 32)
    X, W = te.placeholder(x.shape, name="x"), te.placeholder(wp.shape, name="w")
    sch, picked = _schedule([X, W, packed.dense_packed_weight(X, W)])
    assert picked["T_dense"] == "blocked_gemm_rule"
    assert not [b for b in sch.state.blocks("main") if b.endswith("_global")]
    np.testing.assert_allclose(_run(sch, [x, wp], (1, m, n)), x @ w.T, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("order", ["slice", "panel", "block"])
def test_batch_matmul_all_orders(order):
    a_, b_ = te.placeholder((3, 128, 1024), name="a"), te.placeholder((3, 1024, 128), name="b")
    c_ = ops.matmul(a_, b_)
    sch = Schedule(te.create_prim_func([a_, b_, c_]))
    info = analyze_block(sch, sch.get_block(c_.op.name))
    blocked_gemm_rule(sch, c_.op.name, info, CPU, order=order, nc=32 if order == "slice" else None)
    a, b = _rand(3, 128, 1024), _rand(3, 1024, 128)
    np.testing.assert_allclose(_run(sch, [a, b], (3, 128, 128)), a @ b, rtol=1e-4, atol=1e-3)


def test_batch_matmul_several_slices():
    a_, b_ = te.placeholder((2, 128, 768), name="a"), te.placeholder((2, 768, 256), name="b")
    c_ = ops.matmul(a_, b_)
    sch, picked = _schedule([a_, b_, c_])
    assert picked[c_.op.name] == "blocked_gemm_rule"
    a, b = _rand(2, 128, 768), _rand(2, 768, 256)
    np.testing.assert_allclose(_run(sch, [a, b], (2, 128, 256)), a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("m,n,k", [(260, 256, 512), (256, 272, 512), (256, 256, 640), (256, 256, 264)])
def test_odd_sizes_fall_back(m, n, k):
    A, B = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    C = ops.matmul(A, B)
    sch = Schedule(te.create_prim_func([A, B, C]))
    info = analyze_block(sch, sch.get_block(C.op.name))
    # odd for AVX-512's 8 x 2-vector tile (NR = 32) and its k slices: refused, another rule takes it
    with pytest.raises(ScheduleError, match="multiples of the tiles"):
        blocked_gemm_rule(sch.copy(), C.op.name, info, AVX512_CPU)
    _, picked = _schedule([A, B, C], AVX512_TARGET)
    assert picked[C.op.name] != "blocked_gemm_rule"
    sch2, _ = _schedule([A, B, C])  # the host's rule, whichever it is: the same numbers
    a, b = _rand(m, k), _rand(k, n)
    np.testing.assert_allclose(_run(sch2, [a, b], (m, n)), a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mc,kc,order,nc", [(64, 256, "slice", None), (256, 512, "panel", None),
                                            (128, 384, "panel", None), (128, 512, "slice", 32),
                                            (128, 512, "block", None)])
def test_explicit_tiles(mc, kc, order, nc):
    m, n, k = 256, 64, 1536
    A, B = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    C = ops.matmul(A, B)
    sch = Schedule(te.create_prim_func([A, B, C]))
    info = analyze_block(sch, sch.get_block(C.op.name))
    blocked_gemm_rule(sch, C.op.name, info, CPU, mc=mc, kc=kc, order=order, nc=nc)
    a, b = _rand(m, k), _rand(k, n)
    np.testing.assert_allclose(_run(sch, [a, b], (m, n)), a @ b, rtol=1e-4, atol=1e-3)


def test_rows_not_a_multiple_of_mc_still_blocked():
    m, n, k = 264, 128, 512  # 264 = 3 x 88: MC shrinks to a divisor that is a multiple of MR
    A, B = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    C = ops.matmul(A, B)
    sch, picked = _schedule([A, B, C])
    assert picked[C.op.name] == "blocked_gemm_rule"
    a, b = _rand(m, k), _rand(k, n)
    np.testing.assert_allclose(_run(sch, [a, b], (m, n)), a @ b, rtol=1e-4, atol=1e-3)


def _nest(sch, block):
    return [(int(sch.get(lp).extent), sch.get(lp).kind) for lp in sch.get_loops(sch.get_block(block))]


def test_tile_factors_give_the_sized_schedule():
    # (ic, ir) / (kc, ko, ki) factors as the tuner passes them give the nest of mc / kc / ku
    m, n, k = 256, 64, 1024
    sized, name = _plain_rule(m, n, k, mc=64, kc=512, ku=8)
    factored, _ = _plain_rule(m, n, k, mc_split=[4, 8], k_split=lambda lp: [2, 64, 8])
    assert _nest(factored, name) == _nest(sized, name)
    assert sorted(factored.state.blocks("main")) == sorted(sized.state.blocks("main"))
    mixed, _ = _plain_rule(m, n, k, mc_split=[4, 8], kc=512, ku=8)   # one given as factors, one as a size
    assert _nest(mixed, name) == _nest(sized, name)
    a, b = _rand(m, k), _rand(k, n)
    np.testing.assert_allclose(_run(factored, [a, b], (m, n)), a @ b, rtol=1e-4, atol=1e-3)


def test_tile_factors_one_slice_keeps_a_unit_kc_loop():
    # with factors the kc loop exists even for one slice (a trace must replay under any decision)
    m, n, k = 256, 128, 512
    sch, name = _plain_rule(m, n, k, mr=4, nvec=4, mc_split=[2, 32], k_split=[1, 128, 4])
    extents = [e for e, _ in _nest(sch, name)]
    assert extents == [2, 2, 1, 32, 128, 4, 4, 4, 16]   # jr ic kc ir ko ki ii jn jl
    a, b = _rand(m, k), _rand(k, n)
    np.testing.assert_allclose(_run(sch, [a, b], (m, n)), a @ b, rtol=1e-4, atol=1e-3)
    with pytest.raises(ScheduleError, match="expected 3 tile factors"):
        _plain_rule(m, n, k, k_split=[128, 4])
