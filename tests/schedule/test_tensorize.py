"""tensorize with the registered 16-lane AVX-512 FMA intrinsic: IR, refusals, round trip, numbers, assembly."""
from __future__ import annotations

import numpy as np
import pytest

from ingot.tir.schedule import Schedule, ScheduleError
from ingot.tir.schedule.tensor_intrin import TensorIntrin, fma_intrin

from ._hard_util import assert_same_numbers, roundtrip
from ._workloads import matmul


def _tiled(n=8, m=64, k=32, lanes=16):
    before = matmul(n, m, k)
    sch = Schedule(before)
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, lanes])
    sch.reorder(i, j0, kk, j1)
    sch.decompose_reduction(c, i)
    return before, sch, c, j1


def test_tensorize_fma16_builds_and_matches_numpy():
    import ingot

    before, sch, c, j1 = _tiled()
    sch.tensorize(j1, "avx512_fma_f32x16")
    outer = sch.get(sch.get_block("C_o"))
    assert len(outer.match_buffers) == 3
    assert [str(r) for r in (m.source for m in outer.match_buffers)] == [
        "A[v_i_o, v_k_o]", "B[v_k_o, v_j_o * 16:v_j_o * 16 + 16]", "C[v_i_o, v_j_o * 16:v_j_o * 16 + 16]"]
    assert 'sch.tensorize(block_or_loop=l5, tensor_intrin="avx512_fma_f32x16", preserve_unit_iters=True)' \
        in str(sch.trace)
    roundtrip(sch, before)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 32)).astype("float32")
    b = rng.standard_normal((32, 64)).astype("float32")
    out = np.zeros((8, 64), "float32")
    lib = ingot.build(sch.mod["main"], target="llvm")
    lib["main"](a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    # The lowered body is one 16-lane vector statement per (i, j0, k).
    lowered = str(ingot.lower(sch.mod)["main"])
    assert "T.Ramp(" in lowered and "T.Broadcast(" in lowered


def test_tensorize_emits_zmm_fma():
    # compiled for an AVX-512 CPU whatever the host (the assembly is checked, not run)
    import ingot
    from ingot.codegen.build import module_assembly

    _, sch, _, j1 = _tiled()
    sch.tensorize(j1, "avx512_fma_f32x16")
    asm = module_assembly(ingot.lower(sch.mod), "llvm -mcpu=skylake-avx512")
    assert "%zmm" in asm and "vfmadd" in asm


def test_tensorize_a_blockized_block_and_avx2_variant():
    before, sch, c, j1 = _tiled(lanes=8)
    outer = sch.blockize(j1)
    sch.tensorize(outer, "avx2_fma_f32x8")
    roundtrip(sch, before)
    assert_same_numbers(before, sch.mod, rtol=1e-4, atol=1e-4)


def test_tensorize_refusals():
    # Wrong tile width.
    _, sch, c, j1 = _tiled(lanes=8)
    with pytest.raises(ScheduleError, match="does not match intrinsic.*extent 8"):
        sch.tensorize(j1, "avx512_fma_f32x16")
    # Init still in the block.
    before = matmul(8, 64, 32)
    sch = Schedule(before)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i, j0, k, j1)
    with pytest.raises(ScheduleError, match="decompose_reduction first"):
        sch.tensorize(j1, "avx512_fma_f32x16")
    # The reduce loop inside the tile: the intrinsic has no reduce variable.
    sch = Schedule(matmul(8, 16, 16))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.decompose_reduction(c, i)
    with pytest.raises(ScheduleError, match="does not match"):
        sch.tensorize(j, "avx512_fma_f32x16")
    with pytest.raises(KeyError, match="no tensor intrinsic 'nope'"):
        sch.tensorize(k, "nope")


def test_registry():
    assert {"avx512_fma_f32x16", "avx2_fma_f32x8"} <= set(TensorIntrin.names())
    desc, impl = fma_intrin(4)
    TensorIntrin.register("test_fma4", desc, impl, override=True)
    with pytest.raises(ValueError, match="already registered"):
        TensorIntrin.register("test_fma4", desc, impl)
    with pytest.raises(ValueError, match="same buffers"):
        TensorIntrin.register("bad", desc, fma_intrin(8)[0].replace(params=fma_intrin(8)[0].params[:2]))
