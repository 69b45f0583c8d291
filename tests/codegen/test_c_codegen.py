"""C backend on hand-built lowered IR: compiled results against numpy."""
import ctypes
import re

import numpy as np
import pytest

from ingot.codegen.build import build_module, generate_source, module_assembly
from ingot.codegen.c import CodegenError
from ingot.ir import IRModule, Var, decl_buffer
from ingot.ir.expr import Broadcast, Cast, FloorDiv, FloorMod, IntImm, Ramp, Select
from ingot.runtime.errors import ArgumentError
from ingot import tir
from ingot.tir import Allocate, BufferStore, For, ForKind, IfThenElse, PrimFunc, SeqStmt

pytestmark = pytest.mark.compiler

NOALIAS = {"tir.noalias": True}


def loop(var, extent, body, kind=ForKind.SERIAL, start=0):
    return For(var, start, extent, kind, body)


def elementwise(dtype, fn, n=16, out_dtype=None, name="f"):
    """B[i] = fn(A[i]) over a 1-D buffer of static length n."""
    A = decl_buffer((n,), dtype, "A")
    B = decl_buffer((n,), out_dtype or dtype, "B")
    i = Var("i")
    return PrimFunc([A, B], loop(i, n, BufferStore(B, fn(A[i]), [i])), NOALIAS)


# ------------------------------------------------------------------------------------------ basics

def test_add_with_symbolic_dim_and_argument_errors():
    n = Var("n")
    A, B, C = (decl_buffer((n,), "float32", x) for x in "ABC")
    i = Var("i")
    f = PrimFunc([A, B, C], loop(i, n, BufferStore(C, A[i] + B[i], [i])), NOALIAS)
    lib = build_module(f, "llvm")
    a, b = np.random.rand(37).astype("float32"), np.random.rand(37).astype("float32")
    c = np.zeros(37, "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a + b)
    with pytest.raises(ArgumentError, match="'B'.*n = 37.*got 36"):
        lib["main"](a, np.zeros(36, "float32"), c)
    with pytest.raises(ArgumentError, match="'A'.*dtype float32.*float64"):
        lib["main"](a.astype("float64"), b, c)
    with pytest.raises(ArgumentError, match="'C'.*ndim 1.*got 2"):
        lib["main"](a, b, c.reshape(1, 37))
    with pytest.raises(ArgumentError, match="expects 3 arguments, got 2"):
        lib["main"](a, b)
    src = lib.get_source()
    assert "int32_t n = (int32_t)" in src and "ingot_check_dim_equal" in src


def _raw_call(lib, name, arrays, type_codes=None):
    """Call the C entry directly (no Python pre-check): returns (rc, message)."""
    from ingot.runtime._ffi import DLTensor, IngotValue
    from ingot.runtime.dtype import dtype_to_dlpack, dtype_str

    fn = getattr(lib._lib, lib.metadata["functions"][name]["symbol"])
    fn.restype = ctypes.c_int32
    keep, values = [], (IngotValue * max(1, len(arrays)))()
    for k, arr in enumerate(arrays):
        t = DLTensor()
        t.data = arr.ctypes.data
        t.device.device_type, t.device.device_id = 1, 0
        t.ndim = arr.ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = dtype_to_dlpack(dtype_str(arr.dtype))
        shape = (ctypes.c_int64 * max(1, arr.ndim))(*arr.shape)
        t.shape = ctypes.addressof(shape)
        keep += [t, shape]
        values[k].v_handle = ctypes.addressof(t)
    codes = (ctypes.c_int32 * max(1, len(arrays)))(*(type_codes or [7] * len(arrays)))
    err = ctypes.create_string_buffer(1024)
    rc = fn(values, codes, ctypes.c_int32(len(arrays)), err, ctypes.c_int32(1024))
    return rc, err.value.decode()


def test_checks_in_c_without_python_precheck():
    A = decl_buffer((4, 8), "float32", "A")
    B = decl_buffer((4, 8), "float32", "B")
    i, j = Var("i"), Var("j")
    f = PrimFunc([A, B], loop(i, 4, loop(j, 8, BufferStore(B, A[i, j], [i, j]))))
    lib = build_module(f, "llvm")
    ok = np.ones((4, 8), "float32")
    assert _raw_call(lib, "main", [ok, np.zeros((4, 8), "float32")]) == (0, "")
    rc, msg = _raw_call(lib, "main", [ok, np.zeros((4, 7), "float32")])
    assert rc != 0 and msg == "main: argument 'B' dimension 1 expects 8, got 7"
    rc, msg = _raw_call(lib, "main", [ok, np.zeros((4, 8), "int32")])
    assert rc != 0 and msg == "main: argument 'B' expects dtype float32, got int32"
    rc, msg = _raw_call(lib, "main", [ok, np.zeros(32, "float32")])
    assert rc != 0 and msg == "main: argument 'B' expects ndim 2, got 1"
    rc, msg = _raw_call(lib, "main", [ok])
    assert rc != 0 and msg == "main: expects 2 arguments, got 1"
    rc, msg = _raw_call(lib, "main", [ok, ok], type_codes=[7, 0])
    assert rc != 0 and "argument 'B' expects a tensor, got int" in msg


def test_scalar_params_and_multi_function_module():
    n = Var("n")
    A = decl_buffer((n,), "float32", "A")
    alpha, k = Var("alpha", "float32"), Var("k", "int32")
    i = Var("i")
    scale = PrimFunc([A, alpha, k], loop(i, n, BufferStore(A, A[i] * alpha + Cast("float32", k), [i])))
    A2 = decl_buffer((8,), "int64", "A")
    fill = PrimFunc([A2], loop(i, 8, BufferStore(A2, Cast("int64", i) * IntImm("int64", 3_000_000_000), [i])))
    lib = build_module(IRModule({"scale": scale, "fill": fill}), "llvm")
    a = np.arange(5, dtype="float32")
    lib["scale"](a, 2.0, 3)
    np.testing.assert_allclose(a, np.arange(5) * 2.0 + 3)
    b = np.zeros(8, "int64")
    lib["fill"](b)
    np.testing.assert_array_equal(b, np.arange(8) * 3_000_000_000)
    with pytest.raises(ArgumentError, match="'k'"):
        lib["scale"](a, 2.0, 2**40)


def test_matmul_with_local_accumulator_and_heap_workspace():
    M, N, K = 8, 12, 16
    A = decl_buffer((M * K,), "float32", "A")
    B = decl_buffer((K * N,), "float32", "B")
    C = decl_buffer((M * N,), "float32", "C")
    acc = decl_buffer((N,), "float32", "acc", scope="local")
    big = decl_buffer((20000,), "float32", "big", scope="global")  # 80 KB: heap
    i, j, k, t = Var("i"), Var("j"), Var("k"), Var("t")
    body = SeqStmt([
        loop(j, N, BufferStore(acc, tir.const(0.0, "float32"), [j])),
        loop(k, K, loop(j, N, BufferStore(acc, acc[j] + A[i * K + k] * B[k * N + j], [j]))),
        loop(t, 20000, BufferStore(big, Cast("float32", t), [t])),
        loop(j, N, BufferStore(C, acc[j] + big[j * 0 + 1] - 1.0, [i * N + j])),
    ])
    f = PrimFunc([A, B, C], loop(i, M, Allocate(acc, Allocate(big, body)), ForKind.PARALLEL), NOALIAS)
    lib = build_module(f, "llvm -num-cores=2")
    a, b = np.random.rand(M, K).astype("float32"), np.random.rand(K, N).astype("float32")
    c = np.zeros(M * N, "float32")
    lib["main"](a.ravel(), b.ravel(), c)
    np.testing.assert_allclose(c.reshape(M, N), a @ b, rtol=1e-5)
    src = lib.get_source()
    assert "__attribute__((aligned(64)))" in src and "ingot_alloc_workspace" in src
    assert "#pragma omp atomic write" in src  # allocation failure inside the parallel loop


def test_parallel_outermost_only_and_unroll_pragmas():
    A = decl_buffer((6, 5), "int32", "A")
    i, j = Var("i"), Var("j")
    inner = loop(j, 5, BufferStore(A, i * 10 + j, [i, j]), ForKind.PARALLEL)
    f = PrimFunc([A], loop(i, 6, inner, ForKind.PARALLEL))
    u = Var("u")
    A2 = decl_buffer((4,), "int32", "A")
    g = PrimFunc([A2], loop(u, 4, BufferStore(A2, u * u, [u]), ForKind.UNROLLED))
    lib = build_module(IRModule({"par": f, "unr": g}), "llvm -num-cores=2")
    a = np.zeros((6, 5), "int32")
    lib["par"](a)
    np.testing.assert_array_equal(a, np.arange(6)[:, None] * 10 + np.arange(5))
    b = np.zeros(4, "int32")
    lib["unr"](b)
    np.testing.assert_array_equal(b, np.arange(4) ** 2)
    src = lib.get_source()
    # One outlined body (the outer loop; the inner parallel loop runs serially inside it), run on the
    # calling thread: 30 stores are far below PARALLEL_MIN_STORES.
    assert src.count("_par0(") == 2 and "_par1" not in src and "#pragma GCC unroll 4" in src


# ------------------------------------------------------------------------------------------ vectors

def test_vector_ramp_broadcast_strided_and_select():
    A = decl_buffer((64,), "float32", "A")
    B = decl_buffer((64,), "float32", "B")
    C = decl_buffer((32,), "float32", "C")
    io = Var("io")
    r = Ramp(io * 16, 1, 16)
    x = A[r]
    body = BufferStore(B, x * Broadcast(tir.const(2.0, "float32"), 16) + tir.max(x, Broadcast(tir.const(0.5, "float32"), 16)), [r])
    # C[i] = A[2i] (strided gather), C written contiguously; Select on a vector condition.
    rs = Ramp(io * 16, 2, 8)
    rc = Ramp(io * 8, 1, 8)
    g = A[rs]
    body2 = BufferStore(C, Select(g > Broadcast(tir.const(0.5, "float32"), 8), g, Broadcast(tir.const(-1.0, "float32"), 8)), [rc])
    f = PrimFunc([A, B, C], SeqStmt([loop(io, 4, body), loop(io, 4, body2)]), NOALIAS)
    lib = build_module(f, "llvm")
    a = np.random.rand(64).astype("float32")
    b, c = np.zeros(64, "float32"), np.zeros(32, "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(b, a * 2 + np.maximum(a, 0.5), rtol=1e-6)
    np.testing.assert_allclose(c, np.where(a[::2] > 0.5, a[::2], -1.0))
    assert "ingot_float32x16_u" in lib.get_source()


def test_vectorized_loop_assembly_uses_wide_registers():
    n = 1024
    A, B = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    io = Var("io")
    r = Ramp(io * 16, 1, 16)
    vec = PrimFunc([A, B], loop(io, n // 16, BufferStore(B, A[r] * A[r] + Broadcast(tir.const(1.0, "float32"), 16), [r])), NOALIAS)
    asm = module_assembly(vec, "llvm")
    assert "zmm" in asm or "ymm" in asm
    i = Var("i")
    simd = PrimFunc([A, B], loop(i, n, BufferStore(B, A[i] * 3.0, [i]), ForKind.VECTORIZED), NOALIAS)
    src = generate_source(simd, "llvm").code
    assert "#pragma omp simd" in src
    asm = module_assembly(simd, "llvm -mcpu=haswell")
    assert "ymm" in asm


def test_unsupported_vector_lanes_raise_with_advice():
    A = decl_buffer((6,), "float32", "A")
    f = PrimFunc([A], BufferStore(A, A[Ramp(0, 1, 3)] + Broadcast(tir.const(1.0, "float32"), 3), [Ramp(0, 1, 3)]))
    with pytest.raises(NotImplementedError, match="power-of-two"):
        generate_source(f)


# ------------------------------------------------------------------------------------------ dtypes

def test_dtypes_float16_bfloat16_int8_bool_float64():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    funcs = {
        "f16": elementwise("float16", lambda x: x * tir.const(3.0, "float16") + tir.const(0.1, "float16")),
        "bf16": elementwise("bfloat16", lambda x: x * tir.const(3.0, "bfloat16") + x),
        "i8": elementwise("int8", lambda x: (x * IntImm("int8", 3)) // IntImm("int8", 2)),
        "b": elementwise("float32", lambda x: x > 0.5, out_dtype="bool"),
        "f64": elementwise("float64", lambda x: tir.exp(x) / 3.0),
    }
    A = decl_buffer((16,), "bfloat16", "A")
    B = decl_buffer((16,), "bfloat16", "B")
    io = Var("io")
    r = Ramp(io * 8, 1, 8)
    funcs["bf16v"] = PrimFunc([A, B], loop(io, 2, BufferStore(B, A[r] + A[r], [r])))
    lib = build_module(IRModule(funcs), "llvm")
    rng = np.random.default_rng(0)

    x16 = rng.random(16).astype("float16")
    y16 = np.zeros(16, "float16")
    lib["f16"](x16, y16)
    np.testing.assert_array_equal(y16, x16 * np.float16(3) + np.float16(0.1))

    bf = ml_dtypes.bfloat16
    xb = rng.random(16).astype(bf)
    yb = np.zeros(16, bf)
    lib["bf16"](xb, yb)
    np.testing.assert_array_equal(yb.astype("float32"), (xb * bf(3) + xb).astype("float32"))
    lib["bf16v"](xb, yb)
    np.testing.assert_array_equal(yb.astype("float32"), (xb + xb).astype("float32"))

    x8 = np.arange(-8, 8, dtype="int8") * 9
    y8 = np.zeros(16, "int8")
    lib["i8"](x8, y8)
    np.testing.assert_array_equal(y8, (x8 * np.int8(3)) // np.int8(2))  # wraps like numpy

    xf = rng.random(16).astype("float32")
    yb8 = np.zeros(16, "bool")
    lib["b"](xf, yb8)
    np.testing.assert_array_equal(yb8, xf > 0.5)

    xd = rng.random(16)
    yd = np.zeros(16)
    lib["f64"](xd, yd)
    np.testing.assert_allclose(yd, np.exp(xd) / 3.0, rtol=1e-15)


# ------------------------------------------------------------------------------------------ intrinsics

def _erf(x):
    import math

    return np.vectorize(math.erf)(x)


INTRINSIC_CASES = {
    "exp": (tir.exp, np.exp), "log": (tir.log, np.log), "sqrt": (tir.sqrt, np.sqrt),
    "tanh": (tir.tanh, np.tanh), "sigmoid": (tir.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "rsqrt": (tir.rsqrt, lambda x: 1 / np.sqrt(x)), "erf": (tir.erf, _erf),
    "round": (tir.round, np.round), "floor": (tir.floor, np.floor), "abs": (tir.abs, np.abs),
    "pow": (lambda x: tir.pow(x, tir.const(1.5, "float32")), lambda x: x ** 1.5),
    "fmod": (lambda x: tir.fmod(x, tir.const(0.3, "float32")), lambda x: np.fmod(x, np.float32(0.3))),
    "exp10": (tir.exp10, lambda x: 10 ** x),
}


def test_math_intrinsics_match_numpy():
    x = (np.linspace(0.05, 2.5, 16) * np.array([1, 1, 1, 1] * 4)).astype("float32")
    funcs = {name: elementwise("float32", fn) for name, (fn, _) in INTRINSIC_CASES.items()}
    funcs["isnan"] = elementwise("float32", lambda v: tir.isnan(v), out_dtype="bool")
    A = decl_buffer((16,), "float32", "A")
    B = decl_buffer((8,), "float32", "B")
    i = Var("i")
    # if_then_else is lazy: A[i + 8] is read only when i < 8 (in bounds).
    funcs["ite"] = PrimFunc([A, B], loop(i, 8, BufferStore(B, tir.if_then_else(i < 8, A[i + 8], A[100000]), [i])))
    funcs["absi"] = elementwise("int32", tir.abs)
    lib = build_module(IRModule(funcs), "llvm")
    for name, (_, ref) in INTRINSIC_CASES.items():
        y = np.zeros_like(x)
        lib[name](x, y)
        np.testing.assert_allclose(y, ref(x.astype("float64")).astype("float32"), rtol=2e-6, atol=1e-7, err_msg=name)
    xn = x.copy()
    xn[3] = np.nan
    yb = np.zeros(16, "bool")
    lib["isnan"](xn, yb)
    np.testing.assert_array_equal(yb, np.isnan(xn))
    y8 = np.zeros(8, "float32")
    lib["ite"](x, y8)
    np.testing.assert_array_equal(y8, x[8:])
    xi = np.arange(-8, 8, dtype="int32")
    yi = np.zeros(16, "int32")
    lib["absi"](xi, yi)
    np.testing.assert_array_equal(yi, np.abs(xi))


def test_floordiv_floormod_negative_operands():
    funcs = {}
    for dtype in ("int32", "int64"):
        A, B = decl_buffer((24,), dtype, "A"), decl_buffer((24,), dtype, "B")
        Q, R = decl_buffer((24,), dtype, "Q"), decl_buffer((24,), dtype, "R")
        T, M = decl_buffer((24,), dtype, "T"), decl_buffer((24,), dtype, "M")
        i = Var("i")
        body = SeqStmt([
            BufferStore(Q, FloorDiv(A[i], B[i]), [i]), BufferStore(R, FloorMod(A[i], B[i]), [i]),
            BufferStore(T, tir.truncdiv(A[i], B[i]), [i]), BufferStore(M, tir.truncmod(A[i], B[i]), [i]),
        ])
        funcs[dtype] = PrimFunc([A, B, Q, R, T, M], loop(i, 24, body))
    Af, Bf = decl_buffer((8,), "float32", "A"), decl_buffer((8,), "float32", "B")
    j = Var("j")
    funcs["float"] = PrimFunc([Af, Bf], loop(j, 8, BufferStore(Bf, FloorMod(Af[j], tir.const(0.75, "float32")), [j])))
    lib = build_module(IRModule(funcs), "llvm")
    a = np.array([-7, -6, -5, -1, 0, 1, 5, 6, 7, -13, 13, -2] * 2)
    b = np.array([3] * 6 + [-3] * 6 + [4] * 6 + [-4] * 6)
    for dtype in ("int32", "int64"):
        outs = [np.zeros(24, dtype) for _ in range(4)]
        lib[dtype](a.astype(dtype), b.astype(dtype), *outs)
        np.testing.assert_array_equal(outs[0], a // b)
        np.testing.assert_array_equal(outs[1], a % b)
        np.testing.assert_array_equal(outs[2], np.trunc(a / b).astype(dtype))
        np.testing.assert_array_equal(outs[3], np.fmod(a, b))
    xf = np.linspace(-2, 2, 8).astype("float32")
    yf = np.zeros(8, "float32")
    lib["float"](xf, yf)
    np.testing.assert_allclose(yf, np.mod(xf, np.float32(0.75)), atol=1e-6)


def test_floordiv_of_nonnegative_loop_index_is_plain_division():
    A = decl_buffer((32,), "int32", "A")
    i = Var("i")
    src = generate_source(PrimFunc([A], loop(i, 32, BufferStore(A, FloorDiv(i, 4) + FloorMod(i, 4), [i])))).code
    assert "(i / 4)" in src and "(i % 4)" in src and "ingot_floordiv" not in src


# ------------------------------------------------------------------------------------------ caching, errors, safety

def test_same_module_compiles_once(tmp_path):
    from ingot.codegen import toolchain

    f = elementwise("float32", lambda x: x + 42.0, name="cache")
    before = toolchain.compile_count()
    lib1 = build_module(f, "llvm", cache_dir=tmp_path)
    lib2 = build_module(f, "llvm", cache_dir=tmp_path)
    assert toolchain.compile_count() - before == 1
    assert lib1.get_source() == lib2.get_source()


def test_unlowered_function_is_rejected():
    A = decl_buffer((4,), "float32", "A")
    blk = tir.Block([], [], [], "root", tir.Evaluate(0))
    f = PrimFunc([A], tir.BlockRealize([], True, blk))
    with pytest.raises(CodegenError, match="lowered functions only"):
        generate_source(f)


def test_undefined_variable_is_named():
    A = decl_buffer((4,), "float32", "A")
    f = PrimFunc([A], BufferStore(A, Cast("float32", Var("ghost")), [0]))
    with pytest.raises(CodegenError, match="'ghost'"):
        generate_source(f)


def test_hostile_names_compile_and_run():
    evil = 'x"; system("rm -rf /'
    A = decl_buffer((4,), "float32", evil)
    B = decl_buffer((4,), "float32", "*/ int y; /*")
    i = Var("for")
    j = Var("i\n#include <stdio.h>")
    f = PrimFunc([A, B], loop(i, 4, IfThenElse(i >= 0, loop(j, 1, BufferStore(B, A[i] * 2.0 + Cast("float32", j), [i])))))
    f = f.with_attr("global_symbol", "main); /*")
    lib = build_module(IRModule({"main); /*": f}), "llvm")
    a = np.arange(4, dtype="float32")
    b = np.zeros(4, "float32")
    lib["main); /*"](a, b)
    np.testing.assert_array_equal(b, a * 2)
    with pytest.raises(ArgumentError) as info:
        lib["main); /*"](a.astype("int32"), b)
    assert evil in str(info.value)
    src = lib.get_source()
    # Outside string literals, no trace of the hostile text reaches the C code.
    body = src.split("===== end of Ingot C prelude ===== */")[1].split("ingot_module_metadata")[0]
    code = re.sub(r'"(\\.|[^"\\])*"', '""', body)
    assert "system(" not in code and "/*" not in code and "#include" not in code and "rm -rf" not in code
    assert 'x\\"; system(\\"rm -rf /' in body  # the name survives only as an escaped literal


def test_vector_lanewise_ops_casts_and_asserts():
    A = decl_buffer((16,), "float32", "A")
    I = decl_buffer((16,), "int32", "I")
    M = decl_buffer((16,), "bool", "M")
    io = Var("io")
    r = Ramp(io * 8, 1, 8)
    x = A[r]
    body = SeqStmt([
        BufferStore(I, Cast("int32x8", x * Broadcast(tir.const(10.0, "float32"), 8)) // Broadcast(IntImm("int32", 3), 8), [r]),
        BufferStore(M, x > Broadcast(tir.const(0.5, "float32"), 8), [r]),
        BufferStore(A, tir.exp(x), [r]),
    ])
    n = Var("n")
    f = PrimFunc([A, I, M, n], tir.AssertStmt(n > 0, "n must be positive", loop(io, 2, body)))
    lib = build_module(f, "llvm")
    a = np.linspace(-1, 1, 16).astype("float32")
    i, m, a0 = np.zeros(16, "int32"), np.zeros(16, "bool"), a.copy()
    lib["main"](a, i, m, 1)
    np.testing.assert_array_equal(i, (a0 * 10).astype("int32") // 3)
    np.testing.assert_array_equal(m, a0 > 0.5)
    np.testing.assert_allclose(a, np.exp(a0), rtol=1e-6)
    from ingot.runtime.errors import KernelError

    with pytest.raises(KernelError, match="main: assertion failed: n must be positive"):
        lib["main"](a, i, m, 0)


def test_two_functions_exporting_one_name_are_refused_by_every_backend():
    """One check (`ingot.codegen.c.exported_functions`) for the C and CUDA module walks and the
    per-kernel assembly: two PrimFuncs exporting the same symbol name the clash."""
    from ingot.codegen.build import assemble_source, emit_kernel_source
    from ingot.codegen.c import CodegenError, generate_c
    from ingot.codegen.cuda.codegen import generate_cuda
    from ingot.codegen.cuda.split import GPULoweringError
    from ingot.ir import IRModule, decl_buffer
    from ingot.tir import Evaluate, PrimFunc

    f = PrimFunc([decl_buffer((2,), "int8", "x")], Evaluate(0)).with_attr("global_symbol", "same")
    mod = IRModule({"a": f, "b": f})
    with pytest.raises(CodegenError, match="two functions export the name 'same'"):
        generate_c(mod)
    with pytest.raises(GPULoweringError, match="two functions export the name 'same'"):
        generate_cuda(mod, "cuda")
    piece = emit_kernel_source(f, "same", "ingot_same", "ingot_kernel_same")
    with pytest.raises(CodegenError, match="two functions export the name 'same'"):
        assemble_source([piece, piece], "llvm")
