"""Calling the hand-written C module: numerics, argument errors (never a crash), timing."""

import ctypes
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from ingot import runtime as rt
from ingot.runtime import ArgumentError, KernelError, Module, abi, load_module
from ingot.runtime._ffi import DLTensor

pytestmark = pytest.mark.compiler


def rand(*shape, dtype="float32"):
    return np.random.default_rng(0).standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------ numerics
def test_add_static_shape(mod):
    a, b = rand(4, 8), rand(4, 8) + 1
    c = np.zeros((4, 8), "float32")
    mod["add"](a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    # NDArray arguments, output written in place
    na, nb, nc = rt.array(a), rt.array(b), rt.empty((4, 8), "float32")
    assert mod["add"](na, nb, nc) is None
    np.testing.assert_allclose(nc.numpy(), a + b, rtol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_axpy_symbolic_shape(mod, n):
    x, y = rand(n), rand(n)
    out = rt.empty((n,), "float32")
    mod["axpy"](x, y, 2.5, out)
    np.testing.assert_allclose(out.numpy(), 2.5 * x + y, rtol=1e-5, atol=1e-6)


def test_scalars_accept_python_and_numpy_numbers(mod):
    x, y, out = rand(5), rand(5), np.empty(5, "float32")
    for alpha in (2, 2.0, np.float32(2), np.int64(2), np.array(2.0)):
        out[:] = 0
        mod["axpy"](x, y, alpha, out)
        np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    f = np.empty(3, "int32")
    for v in (7, np.int32(7), np.uint8(7)):
        mod["fill"](f, v)
        assert f.tolist() == [7, 7, 7]


def test_openmp_kernel_and_threads(mod):
    a, s = rand(257, 16, dtype="float64"), rand(257, dtype="float64")
    out = np.zeros((257, 16))
    assert mod.set_num_threads(2) >= 1
    mod["scale_rows"](a, s, out)
    np.testing.assert_allclose(out, a * s[:, None])
    assert mod.set_num_threads(1) == 1 and mod.get_num_threads() == 1
    mod.set_num_threads(0)  # back to all cores


def test_torch_tensors_are_accepted_without_copy(mod):
    torch = pytest.importorskip("torch")
    x, y = torch.arange(6, dtype=torch.float32), torch.ones(6)
    out = torch.zeros(6)
    mod["axpy"](x, y, 3.0, out)
    assert out.tolist() == [1.0, 4.0, 7.0, 10.0, 13.0, 16.0]
    with pytest.raises(ArgumentError, match="contiguous"):
        mod["axpy"](x[::2], y[:3], 1.0, out[:3])


def test_concurrent_calls_from_threads(mod):
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            n = 100 + seed
            for _ in range(200):
                x = rng.standard_normal(n).astype("float32")
                out = np.empty(n, "float32")
                mod["axpy"](x, x, 1.0, out)
                np.testing.assert_allclose(out, 2 * x, rtol=1e-6)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ------------------------------------------------------------------ argument errors
def test_wrong_argument_count(mod):
    a = rand(4, 8)
    with pytest.raises(ArgumentError, match=r"^add: expects 3 arguments, got 2"):
        mod["add"](a, a)
    with pytest.raises(TypeError):  # ArgumentError is a TypeError too
        mod["add"](a, a, a, a)


def test_wrong_dtype(mod):
    a = rand(4, 8)
    with pytest.raises(ArgumentError, match="add: argument 'B' expects dtype float32, got float64"):
        mod["add"](a, a.astype("float64"), a)
    with pytest.raises(ValueError, match="argument 'A' expects dtype float32, got int32"):
        mod["add"](rt.array(a, dtype="int32"), a, a)


def test_wrong_shape(mod):
    a = rand(4, 8)
    with pytest.raises(ArgumentError, match=r"add: argument 'C' dimension 1 expects 8, got 4"):
        mod["add"](a, a, rand(4, 4))
    with pytest.raises(ArgumentError, match=r"add: argument 'A' expects ndim 2, got 1"):
        mod["add"](rand(32), a, a)


def test_symbolic_mismatch_is_caught_in_c(mod):
    x = rand(10)
    with pytest.raises(ArgumentError,
                       match=r"axpy: argument 'Out' dimension 0 expects n = 10 .* got 9"):
        mod["axpy"](x, x, 1.0, rt.empty((9,), "float32"))


def test_non_contiguous_and_misaligned(mod):
    a = rand(4, 16)
    with pytest.raises(ArgumentError, match=r"add: argument 'A' must be a contiguous \(row-major\) tensor"):
        mod["add"](a[:, ::2], rand(4, 8), rand(4, 8))
    with pytest.raises(ArgumentError, match="contiguous"):
        mod["add"](np.asfortranarray(rand(4, 8)), rand(4, 8), rand(4, 8))
    raw = np.zeros(4 * 8 * 4 + 16, np.uint8)
    base = (-raw.ctypes.data) % 16  # 16-aligned start, then one byte off
    misaligned = raw[base + 1:base + 1 + 128].view(np.float32).reshape(4, 8)
    with pytest.raises(ArgumentError, match="argument 'A' data pointer 0x[0-9a-f]+ is not aligned to 4 bytes"):
        mod["add"](misaligned, rand(4, 8), rand(4, 8))


def test_wrong_kinds(mod):
    x = rand(3)
    with pytest.raises(ArgumentError, match=r"axpy: argument 'alpha' expects a float scalar \(float32\), got str"):
        mod["axpy"](x, x, "2", x)
    with pytest.raises(ArgumentError, match=r"argument 'alpha' expects a float scalar.*got numpy.ndarray"):
        mod["axpy"](x, x, x, x)
    with pytest.raises(ArgumentError, match=r"argument 'X' expects a tensor .* got list"):
        mod["axpy"]([1.0, 2.0], x, 1.0, x)
    with pytest.raises(ArgumentError, match="argument 'X' expects a tensor"):
        mod["axpy"](None, x, 1.0, x)
    with pytest.raises(ArgumentError, match=r"fill: argument 'value' value 4294967296 does not fit in int32"):
        mod["fill"](np.zeros(3, "int32"), 2**32)
    with pytest.raises(ArgumentError, match=r"argument 'value' expects an int scalar"):
        mod["fill"](np.zeros(3, "int32"), 1.5)


def test_read_only_output_rejected(mod):
    a = rand(4, 8)
    ro = np.zeros((4, 8), "float32")
    ro.flags.writeable = False
    with pytest.raises(ArgumentError, match="argument 'C' is an output but the array is read-only"):
        mod["add"](a, a, ro)
    mod["add"](ro, ro, a)  # read-only inputs are fine


def test_kernel_error(mod):
    with pytest.raises(KernelError, match="fail_at_runtime: could not allocate 1048576 bytes"):
        mod["fail_at_runtime"](np.zeros(2, "float32"))


# ------------------------------------------------------------------ the C checks on their own
def _raw_call(mod, symbol, values, codes):
    fn = getattr(mod._lib, symbol)
    fn.restype = ctypes.c_int32
    n = len(values)
    vals = (ctypes.c_int64 * max(n, 1))(*values)
    cds = (ctypes.c_int32 * max(n, 1))(*codes)
    err = ctypes.create_string_buffer(256)
    rc = fn(vals, cds, n, err, 256)
    return rc, err.value.decode()


def _dltensor(arr, dtype=(2, 32, 1), strides=None, keep=None):
    t = DLTensor()
    shape = (ctypes.c_int64 * arr.ndim)(*arr.shape)
    t.data = arr.ctypes.data
    t.device.device_type, t.device.device_id = 1, 0
    t.ndim = arr.ndim
    t.dtype.code, t.dtype.bits, t.dtype.lanes = dtype
    t.shape = ctypes.addressof(shape)
    st = None
    if strides is not None:
        st = (ctypes.c_int64 * arr.ndim)(*strides)
        t.strides = ctypes.addressof(st)
    keep.extend([t, shape, st, arr])
    return ctypes.addressof(t)


def test_c_checks_without_python(mod):
    keep = []
    a = rand(4, 8)
    T = abi.ARG_TENSOR
    ok = [_dltensor(a, keep=keep) for _ in range(3)]
    assert _raw_call(mod, "ingot_add", ok, [T] * 3) == (0, "")
    rc, msg = _raw_call(mod, "ingot_add", ok[:2], [T] * 2)
    assert rc == abi.ERR_ARGUMENT and msg == "add: expects 3 arguments, got 2"
    rc, msg = _raw_call(mod, "ingot_add", ok, [T, abi.ARG_INT, T])
    assert msg == "add: argument 'B' expects a tensor, got int"
    rc, msg = _raw_call(mod, "ingot_add", [ok[0], 0, ok[2]], [T, T, T])
    assert "argument 'B' expects a tensor, got a NULL DLTensor pointer" in msg
    f64 = _dltensor(a, dtype=(2, 64, 1), keep=keep)
    rc, msg = _raw_call(mod, "ingot_add", [ok[0], f64, ok[2]], [T] * 3)
    assert msg == "add: argument 'B' expects dtype float32, got float64"
    small = _dltensor(rand(4, 4), keep=keep)
    rc, msg = _raw_call(mod, "ingot_add", [ok[0], ok[1], small], [T] * 3)
    assert msg == "add: argument 'C' dimension 1 expects 8, got 4"
    strided = _dltensor(a, strides=(1, 4), keep=keep)
    rc, msg = _raw_call(mod, "ingot_add", [strided, ok[1], ok[2]], [T] * 3)
    assert msg == "add: argument 'A' must be a contiguous (row-major) tensor"
    compact = _dltensor(a, strides=(8, 1), keep=keep)
    assert _raw_call(mod, "ingot_add", [compact, ok[1], ok[2]], [T] * 3)[0] == 0
    x = rand(6)
    rc, msg = _raw_call(mod, "ingot_axpy", [_dltensor(x, keep=keep), _dltensor(x, keep=keep), 1,
                                            _dltensor(x, keep=keep)], [T, T, abi.ARG_TENSOR, T])
    assert msg == "axpy: argument 'alpha' expects a float scalar, got tensor"


# ------------------------------------------------------------------ module API
def test_module_introspection(mod):
    assert mod.function_names == ["add", "axpy", "scale_rows", "fill", "fail_at_runtime"]
    assert "add" in mod and "nope" not in mod
    assert mod["add"] is mod.get_function("add")
    assert mod["axpy"].param_names == ["X", "Y", "alpha", "Out"]
    assert "axpy(X: float32['n']" in repr(mod["axpy"])
    with pytest.raises(KeyError, match="has no function 'ad'.*did you mean 'add'"):
        mod["ad"]


def test_get_source_embedded_and_attached(lib_path, lib_path_no_source):
    assert "ingot_axpy" in Module(lib_path).get_source()
    m = Module(lib_path_no_source)
    with pytest.raises(rt.IngotRuntimeError, match="has no source"):
        m.get_source()
    m2 = Module(lib_path_no_source, source="/* attached */")
    assert m2.get_source() == "/* attached */"


def test_load_errors(tmp_path):
    with pytest.raises(rt.ModuleLoadError, match="no such file"):
        load_module(tmp_path / "missing.so")
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"not an elf")
    with pytest.raises(rt.ModuleLoadError, match="cannot load module"):
        load_module(junk)


def test_export_and_load_in_fresh_process(mod, tmp_path):
    path = mod.export_library(tmp_path / "sub" / "kernels.so")
    assert os.path.isfile(path)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {root!r})
        import numpy as np
        from ingot.runtime import load_module, array, empty
        m = load_module({path!r})
        x = array(np.arange(5, dtype="float32"))
        out = empty((5,), "float32")
        m["axpy"](x, x, 2.0, out)
        assert out.numpy().tolist() == [0.0, 3.0, 6.0, 9.0, 12.0], out
        assert "ingot_axpy" in m.get_source()
        try:
            m["axpy"](x, x, 2.0)
        except TypeError as e:
            print("ERR", e)
        print("OK", m.function_names)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ERR axpy: expects 4 arguments, got 3" in proc.stdout
    assert "OK ['add', 'axpy'" in proc.stdout


def test_time_evaluator(mod):
    x = rand(1000)
    out = np.empty(1000, "float32")
    ev = mod.time_evaluator("axpy", rt.cpu(0), number=20, repeat=3)
    res = ev(x, x, 1.0, out)
    assert isinstance(res, rt.ProfileResult)
    assert len(res.results) == 3
    assert all(r > 0 for r in res.results)
    assert res.min <= res.median <= res.max and res.min <= res.mean <= res.max
    assert res.std >= 0
    assert "mean (ms)" in str(res)
    np.testing.assert_allclose(out, 2 * x, rtol=1e-6)  # it really ran


def test_time_evaluator_min_repeat_ms_and_errors(mod):
    x = rand(10)
    res = mod.time_evaluator("axpy", rt.cpu(0), number=1, repeat=2, min_repeat_ms=5)(x, x, 1.0, x.copy())
    assert len(res.results) == 2 and res.mean > 0
    with pytest.raises(ArgumentError, match="axpy: expects 4 arguments"):
        mod.time_evaluator("axpy", rt.cpu(0))(x, x)
    with pytest.raises(KernelError, match="fail_at_runtime"):
        mod.time_evaluator("fail_at_runtime", rt.cpu(0))(np.zeros(2, "float32"))
    with pytest.raises(rt.IngotRuntimeError, match="number and repeat"):
        mod.time_evaluator("axpy", rt.cpu(0), number=0)


def test_module_without_metadata_calls_unchecked(cache_dir):
    from ingot.codegen.prelude import C_PRELUDE
    from ingot.codegen.toolchain import compile_shared_library

    src = C_PRELUDE + r"""
    INGOT_EXPORT int32_t twice(IngotValue* args, int32_t* codes, int32_t n, char* err, int32_t len) {
      INGOT_CHECK(ingot_check_num_args("twice", n, 2, err, len));
      INGOT_CHECK(ingot_check_tensor("twice", "X", args[0], codes[0], 1, kDLFloat, 64, 1, err, len));
      INGOT_CHECK(ingot_check_scalar("twice", "k", codes[1], INGOT_ARG_INT, err, len));
      DLTensor* t = INGOT_TENSOR(args, 0);
      double* x = (double*)ingot_tensor_data(t);
      for (int64_t i = 0; i < t->shape[0]; ++i) x[i] *= (double)args[1].v_int64;
      return 0;
    }
    """
    m = Module(compile_shared_library(src))
    assert m.metadata is None and "twice" in m
    x = np.ones(3)
    m["twice"](x, 3)
    assert x.tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(ArgumentError, match="twice: argument 'X' expects dtype float64, got float32"):
        m["twice"](np.ones(3, "float32"), 3)
    with pytest.raises(ArgumentError, match="twice: argument 'k' expects an int scalar, got float"):
        m["twice"](x, 3.0)


def test_alternating_shapes_reuse_buffers(mod):
    f = mod["axpy"]
    for n in [3, 5, 3, 0, 8, 5, 1] * 3:
        x = np.arange(n, dtype="float32")
        out = np.full(n, -1, "float32")
        f(x, x, 1.0, out)
        np.testing.assert_array_equal(out, 2 * x)
