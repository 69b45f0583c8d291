"""CUDA source generation and nvcc compilation (no GPU needed; nvcc tests skip without it)."""
from __future__ import annotations

import shutil

import pytest

import ingot
from ingot.codegen.cuda.codegen import generate_cuda
from ingot.codegen.cuda.compile import compile_cuda, normalize_arch
from ingot.codegen.toolchain import CompileError
from ingot.ir import Call, Var, decl_buffer
from ingot.tir import BufferStore, PrimFunc

import programs
from programs import thread_loop

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) not installed")
ARCHS = ["sm_80", "sm_90"]


def _src(mod, target="cuda", **kw):
    lowered = mod if isinstance(mod, PrimFunc) else ingot.lower(mod)
    return generate_cuda(lowered, target, **kw)


def test_elementwise_source_and_metadata():
    src = _src(programs.elementwise())
    assert 'extern "C" __global__ void __launch_bounds__(128) ingot_main_kernel0(' in src.code
    assert "float* __restrict__ A" in src.code and "= (int32_t)blockIdx.x;" in src.code
    assert "expf(" in src.code and "__expf" not in src.code
    md = src.metadata["functions"]["main"]
    assert md["kernels"][0]["grid"] == [8, 1, 1] and md["kernels"][0]["block"] == [128, 1, 1]
    assert md["params"][0] == {"name": "A", "kind": "tensor", "dtype": "float32", "shape": [1000]}


def test_fast_math_uses_hardware_intrinsics():
    src = _src(programs.elementwise(), fast_math=True)
    assert "__expf(" in src.code


def test_matmul_source_has_shared_tiles_and_barriers():
    src = _src(programs.tiled_matmul())
    assert src.code.count("__shared__") == 2 and src.code.count("__syncthreads();") == 2
    assert "float acc[1];" in src.code
    assert src.metadata["functions"]["main"]["kernels"][0]["block"] == [16, 16, 1]


def test_cpu_and_cuda_printers_do_not_share_dispatch():
    # The C printer runs first in this process; the CUDA overrides must still apply.
    from ingot.codegen.c import generate_c
    from ingot.ir import decl_buffer as db
    from ingot.tir import Allocate, For, ForKind

    A, S = db((4,), "float32", "A"), db((4,), "float32", "S")
    i = Var("i")
    generate_c(PrimFunc([A], Allocate(S, For(i, 0, 4, ForKind.PARALLEL, BufferStore(A, 1.0, [i])))))
    code = _src(programs.tiled_matmul()).code
    assert "__shared__" in code and "#pragma omp" not in code and "aligned(64)" not in code
    assert "#pragma omp" in generate_c(PrimFunc([A], For(i, 0, 4, ForKind.PARALLEL, BufferStore(A, 1.0, [i])))).code


def test_shared_memory_limit_is_checked():
    from ingot.codegen.c.printer import CodegenError

    with pytest.raises(CodegenError, match="shared memory"):
        _src(programs.tiled_matmul(), "cuda -max_shared_memory_per_block=1024")


def test_cuda_names_are_reserved():
    A = decl_buffer((4,), "float32", "threadIdx")
    t = Var("min")
    f = PrimFunc([A], thread_loop(t, 4, "threadIdx.x", BufferStore(A, 1.0, [t])))
    code = _src(f).code
    assert "float* threadIdx_1" in code or "float* threadIdx_" in code


def test_unsupported_constructs_raise():
    A = decl_buffer((4,), "float32", "A")
    t = Var("t")
    f = PrimFunc([A], thread_loop(t, 4, "threadIdx.x", BufferStore(A, Call("float32", "no_such_op", [1.0]), [t])))
    with pytest.raises(NotImplementedError, match="no rule for intrinsic 'no_such_op'"):
        _src(f)


def test_normalize_arch():
    assert normalize_arch("90") == "sm_90" and normalize_arch("compute_80") == "sm_80"
    with pytest.raises(ValueError, match="not like 'sm_90'"):
        normalize_arch("volta")


# ----------------------------------------------------------------------------------------- nvcc


@needs_nvcc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("program", ["elementwise", "symbolic_add", "row_sum", "tiled_matmul"])
def test_programs_compile_to_cubin(program, arch, tmp_path):
    mod = getattr(programs, program)()
    path = compile_cuda(_src(mod, f"cuda -arch={arch}").code, arch, "cubin", cache=tmp_path)
    with open(path, "rb") as f:
        assert f.read(4) == b"\x7fELF"


@needs_nvcc
@pytest.mark.parametrize("output", ["ptx", "obj", "fatbin"])
def test_output_kinds(output, tmp_path):
    path = compile_cuda(_src(programs.tiled_matmul()).code, "sm_80", output, cache=tmp_path)
    data = open(path, "rb").read()
    if output == "ptx":
        assert b".entry ingot_main_kernel0" in data and b"bar.sync" in data


@needs_nvcc
def test_float16_and_intrinsics_compile(tmp_path):
    from ingot import te, tir

    ops = [te.exp, te.log, te.sqrt, te.tanh, te.sigmoid, te.erf, te.floor, te.round, te.rsqrt, te.exp10]
    for dtype in ("float16", "float32", "float64"):
        A = te.placeholder((256,), dtype, name="A")
        def body(i, A=A):
            x = A[i]
            total = x
            for op in ops:
                total = total + op(x)
            return te.max(total, x)
        B = te.compute((256,), body, name="B")
        sch = tir.Schedule(te.create_prim_func([A, B]))
        (i,) = sch.get_loops(sch.get_block("B"))
        bx, tx = sch.split(i, [None, 64])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        code = _src(sch.mod).code
        if dtype == "float16":
            assert "__half" in code and "_Float16" not in code
        compile_cuda(code, "sm_80", "cubin", cache=tmp_path)


@needs_nvcc
def test_integer_intrinsics_compile(tmp_path):
    A = decl_buffer((64,), "int32", "A")
    B = decl_buffer((64,), "int64", "B")
    t = Var("t")
    value = Call("int32", "popcount", [A[t]]) + Call("int32", "clz", [A[t]]) + A[t] // 3 + A[t] % 5
    f = PrimFunc([A, B], thread_loop(t, 64, "threadIdx.x", SeqStmt_([
        BufferStore(A, value, [t]),
        BufferStore(B, Call("int64", "popcount", [B[t]]) + B[t] // 7, [t]),
    ])))
    compile_cuda(_src(f).code, "sm_90", "cubin", cache=tmp_path)


def SeqStmt_(items):
    from ingot.tir import SeqStmt

    return SeqStmt(items)


@needs_nvcc
def test_compile_error_carries_nvcc_output(tmp_path):
    with pytest.raises(CompileError, match="CUDA compilation failed") as info:
        compile_cuda('extern "C" __global__ void k() { undefined_thing(); }', "sm_80", "cubin", cache=tmp_path)
    assert "undefined_thing" in info.value.stderr
    head = str(info.value).splitlines()  # the same summary as the C compiler's (one helper)
    assert head[0].endswith(info.value.source_path) and "undefined_thing" in head[1]


@needs_nvcc
def test_compile_is_cached(tmp_path):
    code = _src(programs.elementwise()).code
    p1 = compile_cuda(code, "sm_80", "cubin", cache=tmp_path)
    p2 = compile_cuda(code, "sm_80", "cubin", cache=tmp_path)
    assert p1 == p2


@needs_nvcc
def test_ingot_build_cuda_returns_a_cuda_module(tmp_path):
    from ingot.runtime.cuda import CUDAModule

    lib = ingot.build(programs.symbolic_add(), "cuda -arch=sm_90", cache_dir=tmp_path)
    assert isinstance(lib, CUDAModule)
    assert "__global__" in lib.get_source() and lib.function_names == ["main"]
    assert lib.image[:4] in (b"\x7fELF", b"\x50\xed\x55\xba")  # ELF or fatbin magic
    with pytest.raises(Exception, match="unbound loop"):
        ingot.build(programs.unbound_elementwise(), "cuda -arch=sm_90", cache_dir=tmp_path)
