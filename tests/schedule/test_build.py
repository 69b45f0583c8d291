"""Scheduled programs compiled with `ingot.build` give numpy's numbers; a vectorized inner loop
becomes SIMD instructions in the assembly."""
from __future__ import annotations

import numpy as np
import pytest

from ingot.driver.build import build, lower
from ingot.tir.schedule import Schedule

from ._workloads import elementwise, matmul, softmax

pytestmark = pytest.mark.compiler


def _build(sch):
    return build(sch.mod, "llvm -num-cores=2")


def test_tiled_matmul_builds_and_matches_numpy():
    sch = Schedule(matmul(32, 32, 32), seed=0)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    sch.cache_read(c, 0, "global")
    lib = _build(sch)
    rng = np.random.default_rng(0)
    a, b = rng.random((32, 32), dtype="float32"), rng.random((32, 32), dtype="float32")
    out = np.zeros((32, 32), "float32")
    lib["main"](a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4)


def test_softmax_and_elementwise_build():
    sch = Schedule(softmax(4, 16))
    for name in ("T_exp", "T_softmax"):
        i, j = sch.get_loops(sch.get_block(name))
        _, j1 = sch.split(j, [None, 8])
        sch.vectorize(j1)
    lib = _build(sch)
    a = np.random.default_rng(1).random((4, 16), dtype="float32")
    out = np.zeros((4, 16), "float32")
    lib["main"](a, out)
    ref = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(out, ref / ref.sum(1, keepdims=True), rtol=1e-5)
    sch = Schedule(elementwise(16, 16))
    b = sch.get_block("B")
    sch.set_scope(b, 0, "local")
    sch.parallel(sch.fuse(*sch.get_loops(sch.get_block("C"))))
    lib = _build(sch)
    a = np.random.default_rng(2).random((16, 16), dtype="float32")
    out = np.zeros((16, 16), "float32")
    lib["main"](a, out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)


def test_vectorized_loop_emits_simd_instructions():
    from ingot.codegen import c as c_backend
    from ingot.codegen import toolchain
    sch = Schedule(elementwise(64, 64))
    for name in ("B", "C"):
        _, j = sch.get_loops(sch.get_block(name))
        _, j1 = sch.split(j, [None, 8])
        sch.vectorize(j1)
    lowered = lower(sch.mod)
    asm = toolchain.compile_to_assembly(c_backend.generate_c(lowered, "llvm").code)
    assert any(reg in asm for reg in ("%ymm", "%zmm")), "expected AVX2/AVX-512 vector registers in the assembly"
