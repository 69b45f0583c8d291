"""ingot.runtime.memory: huge-page-backed host buffers for weights and workspaces."""

import mmap

import numpy as np
import pytest

from ingot.runtime import memory
from ingot.runtime.memory import HUGE_PAGE, huge_empty, is_huge_backed


def test_big_buffer_is_2mib_aligned_and_usable():
    a = huge_empty((3 * HUGE_PAGE // 4 + 5,), "float32")  # not a whole number of huge pages
    assert a.shape == (3 * HUGE_PAGE // 4 + 5,) and a.dtype == np.float32 and a.flags.c_contiguous
    assert a.ctypes.data % HUGE_PAGE == 0 and is_huge_backed(a)
    a[:] = np.arange(a.size, dtype=np.float32)
    np.testing.assert_array_equal(a[-3:], np.arange(a.size - 3, a.size, dtype=np.float32))


def test_small_buffer_stays_ordinary_aligned_memory():
    a = huge_empty((10, 3), "float64")
    assert a.shape == (10, 3) and a.ctypes.data % 64 == 0 and not is_huge_backed(a)
    b = huge_empty((1 << 16,), "uint8", min_bytes=1)  # min_bytes lowers the threshold
    assert is_huge_backed(b)


def test_views_keep_the_mapping_alive():
    view = huge_empty((1 << 20,), "uint8")[1000:2000]
    import gc

    gc.collect()
    view[:] = 7  # would fault if the mapping had been unmapped
    assert int(view.sum()) == 7000


def test_falls_back_silently_without_madvise(monkeypatch):
    monkeypatch.delattr(mmap, "MADV_HUGEPAGE", raising=False)
    a = huge_empty((1 << 20,), "float32")
    assert a.ctypes.data % 64 == 0 and not is_huge_backed(a)


def test_falls_back_when_mmap_fails(monkeypatch):
    def fail(*args, **kwargs):
        raise OSError("no memory")

    monkeypatch.setattr(memory.mmap, "mmap", fail)
    a = huge_empty((1 << 20,), "float32")
    a[:] = 1.0
    assert a.ctypes.data % 64 == 0 and float(a.sum()) == float(1 << 20)


def test_bad_shape_names_the_argument():
    with pytest.raises(Exception, match="shape"):
        huge_empty((-1, 4), "float32")


def test_executor_weights_are_huge_backed_and_correct():
    """A compiled graph keeps its weights blob in huge-page memory and still computes numpy's result."""
    from ingot import graph as G

    n = 1 << 19  # 2 MiB of float32 weights
    x = G.Var("x", G.TensorStructInfo((n,), "float32"))
    c_val = np.random.default_rng(0).standard_normal(n).astype("float32")
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            e = bb.emit(G.op.exp(x))
            gv = bb.emit_output(G.op.add(e, G.const(c_val)))
        bb.emit_func_output(gv)
    ex = G.build(bb.get(), "llvm")
    assert is_huge_backed(ex.weights)
    data = np.random.default_rng(1).standard_normal(n).astype("float32")
    for use_aot in (True, False):
        out = G.Executor(ex, use_aot=use_aot)["main"](data)
        np.testing.assert_allclose(out.numpy(), np.exp(data) + c_val, rtol=1e-5, atol=1e-6)
