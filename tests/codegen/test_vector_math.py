"""float32 exp/tanh/sigmoid/erf: the prelude's inline versions against numpy, and their SIMD code.

The C backend emits ``ingot_expf`` & co. (branch-free, inline) instead of libm's scalar ``expf``
so that GCC vectorizes loops calling them; float64 keeps libm.
"""
import math

import numpy as np
import pytest

import ingot
from ingot import te, tir
from ingot.codegen.build import build_module
from ingot.ir import IRModule, Var, decl_buffer
from ingot.tir import BufferStore, For, ForKind, PrimFunc

pytestmark = pytest.mark.compiler


def _unary(fn, n, dtype="float32", kind=ForKind.SERIAL):
    A = decl_buffer((n,), dtype, "A")
    B = decl_buffer((n,), dtype, "B")
    i = Var("i")
    return PrimFunc([A, B], For(i, 0, n, kind, BufferStore(B, fn(A[i]), [i])), {"tir.noalias": True})


def _wide_inputs():
    rng = np.random.default_rng(0)
    special = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30, 1e-45, 88.72283, 88.7229, 89.0,
               -87.33, -103.97, -104.0, -150.0, 1e30, -1e30, 3.4e38, -3.4e38]
    return np.concatenate([
        rng.uniform(-110, 95, 40000),           # whole range incl. overflow / underflow
        np.linspace(-104, -87, 20000),          # denormal results
        rng.uniform(-1, 1, 20000), rng.uniform(-1e-4, 1e-4, 2000),
        rng.uniform(-12, 12, 40000), special,
    ]).astype("float32")


@pytest.fixture(scope="module")
def lib():
    n = _wide_inputs().size
    funcs = {
        "exp": _unary(tir.exp, n), "tanh": _unary(tir.tanh, n), "erf": _unary(tir.erf, n),
        "sigmoid": _unary(tir.sigmoid, n), "exp64": _unary(tir.exp, n, "float64"),
    }
    return build_module(IRModule(funcs), "llvm")


def _run(lib, name, x):
    y = np.empty_like(x)
    lib[name](x, y)
    return y


def test_exp_within_2_ulp_including_specials_and_denormals(lib):
    x = _wide_inputs()
    got = _run(lib, "exp", x)
    with np.errstate(all="ignore"):
        ref = np.exp(x.astype("float64")).astype("float32")  # correctly rounded reference
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(ref))
    fin = np.isfinite(ref)
    assert (got[fin] >= 0).all()
    ulps = np.abs(got[fin].astype("float64") - ref[fin]) / np.spacing(ref[fin])
    assert ulps.max() <= 2.0, (ulps.max(), x[fin][ulps.argmax()])
    # denormal results are produced, not flushed: exp(-100) ~ 3.7e-44
    assert got[x == -103.97][0] > 0 and np.isclose(got[x == -103.97][0], np.exp(np.float64(-103.97)), rtol=0.05)


@pytest.mark.parametrize("name,ref", [
    ("tanh", np.tanh),
    ("sigmoid", lambda v: 1.0 / (1.0 + np.exp(-v))),
    ("erf", np.vectorize(math.erf)),
])
def test_tanh_sigmoid_erf_within_1e6(lib, name, ref):
    x = _wide_inputs()
    got = _run(lib, name, x)
    with np.errstate(all="ignore"):
        want = ref(x.astype("float64"))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    err = np.abs(got[ok] - want[ok])
    assert err.max() <= 1e-6, (name, err.max(), x[ok][err.argmax()])
    # near 0 the relative error stays small too (odd polynomials, not 1 - 2/(e+1))
    tiny = ok & (np.abs(x) < 1e-3) & (np.abs(x) > 1e-37)  # not denormal inputs
    if name != "sigmoid":
        rel = np.abs(got[tiny] - want[tiny]) / np.abs(want[tiny])
        assert rel.max() < 1e-6, (name, rel.max())


def test_float64_keeps_libm(lib):
    x = np.linspace(-700, 700, _wide_inputs().size)
    np.testing.assert_allclose(_run(lib, "exp64", x), np.exp(x), rtol=1e-15)
    src = build_module(_unary(tir.exp, 8, "float64"), "llvm").get_source()
    assert "exp(A[" in src and "ingot_expf(A[" not in src


def test_vectorized_exp_loop_uses_zmm_and_no_libm_call():
    # the assembly for an AVX-512 CPU whatever the host; the numbers from the host's build
    n = 1 << 12
    A = te.placeholder((n,), "float32", name="A")
    C = te.compute((n,), lambda i: te.exp(A[i]), name="C")
    sch = tir.Schedule(te.create_prim_func([A, C]))
    (i,) = sch.get_loops(sch.get_block("C"))
    outer, inner = sch.split(i, factors=[None, 16])
    sch.vectorize(inner)
    sch.parallel(outer)
    lib = ingot.build(sch.mod, target="llvm")
    src = lib.get_source()
    assert "ingot_expf(A[" in src and "simdlen(16)" in src
    from ingot.codegen.build import module_assembly

    asm = module_assembly(ingot.lower(sch.mod), "llvm -mcpu=skylake-avx512")
    assert "%zmm" in asm
    assert "expf@" not in asm and "call\texpf" not in asm
    a = np.random.default_rng(1).uniform(-80, 80, n).astype("float32")
    c = np.empty_like(a)
    lib["main"](a, c)
    np.testing.assert_allclose(c, np.exp(a), rtol=3e-7)
