"""The CUDA runtime: host logic against a fake driver (always), numerics on a GPU (when present)."""
from __future__ import annotations

import ctypes
import shutil

import numpy as np
import pytest

import ingot
from ingot.codegen.cuda.codegen import generate_cuda
from ingot.runtime import ArgumentError, KernelError
import importlib

import programs

rc = importlib.import_module("ingot.runtime.cuda")


class FakeDriver:
    """Device memory in host bytearrays; launches are recorded, not run."""

    def __init__(self, fail_sync=False):
        self.memory: dict[int, bytearray] = {}
        self.next = 0x1000
        self.launches = []
        self.freed = []
        self.fail_sync = fail_sync

    def device_count(self):
        return 1

    def compute_capability(self, device_id):
        return (9, 0)

    def activate(self, device_id):
        if device_id != 0:
            raise rc.CUDAError(f"cuda({device_id}) does not exist")

    def mem_alloc(self, nbytes):
        ptr, self.next = self.next, self.next + nbytes + 256
        self.memory[ptr] = bytearray(nbytes)
        return ptr

    def mem_free(self, ptr):
        self.freed.append(ptr)
        self.memory.pop(ptr)

    def memcpy_htod(self, dst, src, nbytes):
        self.memory[dst][:] = ctypes.string_at(src, nbytes)

    def memcpy_dtoh(self, dst, src, nbytes):
        ctypes.memmove(dst, bytes(self.memory[src]), nbytes)

    def memcpy_dtod(self, dst, src, nbytes):
        self.memory[dst][:] = self.memory[src]

    def module_load(self, image):
        return 7

    def module_get_function(self, module, name):
        return hash(name) & 0xFFFF

    def launch(self, function, grid, block, shared, args):
        self.launches.append((tuple(grid), tuple(block), [a.value for a in args]))

    def synchronize(self):
        if self.fail_sync:
            raise rc.CUDAError("cuCtxSynchronize failed with CUDA error 700 (CUDA_ERROR_ILLEGAL_ADDRESS: ...)")


@pytest.fixture
def fake():
    driver = FakeDriver()
    old = rc.set_driver(driver)
    yield driver
    rc.set_driver(old)


def _module(mod):
    src = generate_cuda(ingot.lower(mod), "cuda")
    return rc.CUDAModule(b"fake-image", src.metadata, src.code)


def test_eval_launch_expr():
    assert rc.eval_launch_expr(["min", ["mul", {"var": "n"}, 2], 7], {"n": 3}) == 6
    assert rc.eval_launch_expr(["div", -7, 2], {}) == -3 and rc.eval_launch_expr(["floordiv", -7, 2], {}) == -4
    assert rc.eval_launch_expr(["mod", -7, 2], {}) == -1 and rc.eval_launch_expr(["floormod", -7, 2], {}) == 1
    with pytest.raises(KeyError, match="'m'"):
        rc.eval_launch_expr({"var": "m"}, {"n": 1})


def test_arrays_round_trip_through_fake_memory(fake):
    a = rc.array(np.arange(6, dtype="float32").reshape(2, 3))
    assert (a.shape, a.dtype, a.device, a.nbytes) == ((2, 3), "float32", ingot.cuda(0), 24)
    np.testing.assert_array_equal(a.numpy(), np.arange(6, dtype="float32").reshape(2, 3))
    b = rc.empty((2, 3), "float32").copyfrom(a)
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    assert a.__cuda_array_interface__["data"] == (a.data_ptr, False)
    with pytest.raises(ArgumentError, match="shape mismatch"):
        b.copyfrom(np.zeros((3, 2), "float32"))
    ptr = a.data_ptr
    del a
    assert ptr in fake.freed


def test_symbolic_launch_binds_n_from_the_shape(fake):
    lib = _module(programs.symbolic_add())
    a, b, c = (rc.array(np.ones(1000, "float32")) for _ in range(3))
    lib["main"](a, b, c)
    ((grid, block, values),) = fake.launches
    assert grid == (16, 1, 1) and block == (64, 1, 1)
    assert values == [a.data_ptr, b.data_ptr, c.data_ptr, 1000]


def test_argument_errors(fake):
    lib = _module(programs.symbolic_add())
    a = rc.array(np.ones(10, "float32"))
    with pytest.raises(ArgumentError, match="expects 3 arguments, got 2"):
        lib["main"](a, a)
    with pytest.raises(ArgumentError, match="'B' is in host memory .* ingot.runtime.cuda.array"):
        lib["main"](a, np.ones(10, "float32"), a)
    with pytest.raises(ArgumentError, match="'B' expects dtype float32, got float64"):
        lib["main"](a, rc.array(np.ones(10)), a)
    with pytest.raises(ArgumentError, match=r"'C' dimension 0 expects n = 10 \(bound by an earlier argument\), got 11"):
        lib["main"](a, a, rc.array(np.ones(11, "float32")))
    with pytest.raises(ArgumentError, match="'A' expects ndim 1, got 2"):
        lib["main"](rc.array(np.ones((2, 5), "float32")), a, a)
    static = _module(programs.elementwise())
    with pytest.raises(ArgumentError, match="'A' dimension 0 expects 1000, got 10"):
        static["main"](a, a)
    with pytest.raises(Exception, match="no function 'nope'"):
        static["nope"]
    assert fake.launches == []


def test_empty_launch_is_skipped(fake):
    lib = _module(programs.symbolic_add())
    z = rc.empty((0,), "float32")
    lib["main"](z, z, z)
    assert fake.launches == []


def test_kernel_failure_is_a_kernel_error():
    old = rc.set_driver(FakeDriver(fail_sync=True))
    try:
        lib = _module(programs.elementwise())
        a = rc.array(np.ones(1000, "float32"))
        with pytest.raises(KernelError, match="ILLEGAL_ADDRESS"):
            lib["main"](a, a)
    finally:
        rc.set_driver(old)


def test_workspaces_are_allocated_and_freed(fake):
    from ingot.ir import Var, decl_buffer
    from ingot.tir import Allocate, BufferStore, PrimFunc, SeqStmt

    n = Var("n")
    A = decl_buffer((n,), "float32", "A")
    T = decl_buffer((n,), "float32", "T")
    a, b = Var("a"), Var("b")
    body = Allocate(T, SeqStmt([
        programs.thread_loop(a, n, "threadIdx.x", BufferStore(T, A[a] * 2.0, [a])),
        programs.thread_loop(b, n, "threadIdx.x", BufferStore(A, T[b], [b])),
    ]))
    src = generate_cuda(PrimFunc([A], body), "cuda")
    lib = rc.CUDAModule(b"x", src.metadata, src.code)
    x = rc.array(np.ones(100, "float32"))
    before = set(fake.memory)
    lib["main"](x)
    assert [g for g, _, _ in fake.launches] == [(1, 1, 1), (1, 1, 1)]
    assert [blk for _, blk, _ in fake.launches] == [(100, 1, 1), (100, 1, 1)]
    ws = fake.launches[0][2][1]
    assert fake.launches[1][2][1] == ws and ws in fake.freed and set(fake.memory) == before


def test_module_stays_callable_as_the_device_function():
    import ingot.runtime as rt

    assert rt.cuda(1) == rt.Device(2, 1) and rt.cuda is rc


def test_metadata_format_is_checked():
    with pytest.raises(ingot.runtime.ModuleLoadError, match="format"):
        rc.CUDAModule(b"", {"functions": {}})


def test_no_driver_means_not_available():
    if shutil.which("nvidia-smi") is None:
        assert rc.is_available() in (False, True)  # never raises


# -------------------------------------------------------------------------------- on a real GPU

needs_gpu = pytest.mark.skipif(not (rc.is_available() and shutil.which("nvcc")),
                               reason="needs an NVIDIA GPU with a driver, and nvcc")


@needs_gpu
def test_gpu_elementwise(tmp_path):
    lib = ingot.build(programs.elementwise(), "cuda", cache_dir=tmp_path)
    x = np.random.default_rng(0).standard_normal(1000).astype("float32")
    a, b = rc.array(x), rc.empty((1000,), "float32")
    lib["main"](a, b)
    np.testing.assert_allclose(b.numpy(), np.exp(x) * 2, rtol=1e-5)


@needs_gpu
def test_gpu_symbolic_add(tmp_path):
    lib = ingot.build(programs.symbolic_add(), "cuda", cache_dir=tmp_path)
    for n in (1, 63, 64, 1000):
        x, y = np.arange(n, dtype="float32"), np.ones(n, "float32")
        c = rc.empty((n,), "float32")
        lib["main"](rc.array(x), rc.array(y), c)
        np.testing.assert_array_equal(c.numpy(), x + y)


@needs_gpu
def test_gpu_row_sum(tmp_path):
    lib = ingot.build(programs.row_sum(), "cuda", cache_dir=tmp_path)
    x = np.random.default_rng(1).standard_normal((64, 100)).astype("float32")
    b = rc.empty((64,), "float32")
    lib["main"](rc.array(x), b)
    np.testing.assert_allclose(b.numpy(), x.sum(axis=1), rtol=1e-4, atol=1e-4)


@needs_gpu
def test_gpu_tiled_matmul(tmp_path):
    lib = ingot.build(programs.tiled_matmul(), "cuda", cache_dir=tmp_path)
    rng = np.random.default_rng(2)
    x, y = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))
    c = rc.empty((64, 64), "float32")
    lib["main"](rc.array(x), rc.array(y), c)
    np.testing.assert_allclose(c.numpy(), x @ y, rtol=1e-4, atol=1e-4)


@needs_gpu
def test_gpu_bound_matmul_ragged(tmp_path):
    lib = ingot.build(programs.bound_matmul(n=200), "cuda", cache_dir=tmp_path)
    rng = np.random.default_rng(3)
    x, y = (rng.standard_normal((200, 200)).astype("float32") for _ in range(2))
    c = rc.array(np.full((200, 200), np.nan, "float32"))
    lib["main"](rc.array(x), rc.array(y), c)
    np.testing.assert_allclose(c.numpy(), x @ y, rtol=1e-4, atol=1e-3)


@needs_gpu
def test_gpu_float16_elementwise(tmp_path):
    A = ingot.te.placeholder((777,), "float16", name="A")
    B = ingot.te.compute((777,), lambda i: A[i] * A[i] + ingot.tir.const(1.5, "float16"), name="B")
    sch = ingot.tir.Schedule(ingot.te.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, [None, 128])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    lib = ingot.build(sch.mod, "cuda", cache_dir=tmp_path)
    x = np.random.default_rng(4).uniform(-2, 2, 777).astype("float16")
    b = rc.empty((777,), "float16")
    lib["main"](rc.array(x), b)
    np.testing.assert_allclose(b.numpy().astype("float32"), (x * x + np.float16(1.5)).astype("float32"), rtol=2e-3)


@needs_gpu
def test_gpu_workspace_between_kernels(tmp_path):
    lib = ingot.build(programs.two_stage_workspace(), "cuda", cache_dir=tmp_path)
    x = np.random.default_rng(5).standard_normal(4096).astype("float32")
    b = rc.empty((4096,), "float32")
    for _ in range(3):  # the workspace is allocated and freed per call
        lib["main"](rc.array(x), b)
    np.testing.assert_allclose(b.numpy(), np.exp(x) + 1, rtol=1e-5)


@needs_gpu
def test_gpu_out_of_bounds_kernel_is_a_kernel_error(tmp_path):
    # A kernel that writes far past its buffer: the launcher must report it as a KernelError
    # (CUDA_ERROR_ILLEGAL_ADDRESS), not crash the process. Run last: the context is poisoned after.
    from ingot.ir import Var, decl_buffer
    from ingot.tir import BufferStore, PrimFunc

    A = decl_buffer((16,), "float32", "A")
    t = Var("t")
    body = programs.thread_loop(t, 32, "threadIdx.x", BufferStore(A, 1.0, [t * (1 << 26)]))
    lib = ingot.build(PrimFunc([A], body).with_attr("global_symbol", "main"), "cuda", cache_dir=tmp_path)
    with pytest.raises(KernelError):
        lib["main"](rc.array(np.zeros(16, "float32")))
