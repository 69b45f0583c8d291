import numpy as np
import pytest

from ingot import runtime as rt
from ingot.runtime import ndarray as nd


def test_array_copies_aligned_contiguous():
    src = np.arange(12, dtype="float32").reshape(3, 4)[:, ::2]  # non-contiguous view
    a = nd.array(src)
    assert a.shape == (3, 2) and a.dtype == "float32" and a.device == rt.cpu(0)
    assert a.numpy().flags.c_contiguous
    assert a.numpy().ctypes.data % 64 == 0
    np.testing.assert_array_equal(a.numpy(), src)
    src[0, 0] = 99
    assert a.numpy()[0, 0] == 0  # a copy


def test_array_from_list_and_dtype():
    a = nd.array([[1, 2], [3, 4]], dtype="int8")
    assert a.dtype == "int8" and a.numpy().dtype == np.int8
    b = nd.array([1.5, 2.5])
    assert b.dtype == "float64"
    c = nd.array(np.zeros(3, "float16"))
    assert c.dtype == "float16"
    assert nd.array(True).dtype == "bool" and nd.array(True).shape == ()


def test_empty_and_zero_size():
    e = nd.empty((2, 0, 3), "uint16")
    assert e.shape == (2, 0, 3) and e.dtype == "uint16" and e.size == 0
    assert nd.empty(5).shape == (5,)
    with pytest.raises(rt.ArgumentError, match="negative"):
        nd.empty((-1, 2))


def test_numpy_is_zero_copy_view():
    a = nd.empty((4,), "float32")
    v = a.numpy()
    v[:] = 7
    assert a.numpy() is v
    np.testing.assert_array_equal(np.asarray(a), np.full(4, 7, "float32"))


def test_copyfrom_copyto():
    a = nd.empty((2, 2), "float32")
    a.copyfrom(np.array([[1, 2], [3, 4]], dtype="float64"))  # converted to float32
    np.testing.assert_array_equal(a.numpy(), [[1, 2], [3, 4]])
    b = nd.empty((2, 2), "float32")
    a.copyto(b)
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    c = a.copyto(rt.cpu(0))
    assert c.numpy() is not a.numpy()
    with pytest.raises(rt.ArgumentError, match=r"shape mismatch.*\(2, 2\).*\(3,\)"):
        a.copyfrom(np.zeros(3))


def test_non_cpu_device_rejected():
    with pytest.raises(rt.IngotRuntimeError, match="cuda"):
        nd.empty((2,), "float32", device=rt.cuda(0))


def test_dlpack_round_trip_numpy():
    a = nd.array(np.arange(6, dtype="int32").reshape(2, 3))
    back = np.from_dlpack(a)
    assert back.ctypes.data == a.numpy().ctypes.data  # zero-copy
    assert a.__dlpack_device__() == (1, 0)
    src = np.arange(5, dtype="float64")
    w = nd.from_dlpack(src)
    w.numpy()[0] = 42
    assert src[0] == 42


def test_dlpack_torch():
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    a = nd.from_dlpack(t)
    assert a.shape == (2, 3) and a.dtype == "float32"
    a.numpy()[0, 0] = -1
    assert t[0, 0].item() == -1  # shares memory
    back = torch.from_dlpack(a)
    assert back.data_ptr() == t.data_ptr()
    bf = torch.ones(3, dtype=torch.bfloat16)
    pytest.importorskip("ml_dtypes")
    b = nd.from_dlpack(bf)
    assert b.dtype == "bfloat16" and b.numpy().astype("float32").tolist() == [1.0, 1.0, 1.0]


def test_bfloat16_array():
    pytest.importorskip("ml_dtypes")
    a = nd.array(np.array([1.0, 2.0]), dtype="bfloat16")
    assert a.dtype == "bfloat16"
    assert a.numpy().astype("float32").tolist() == [1.0, 2.0]


def test_wrapping_requires_numpy():
    with pytest.raises(rt.ArgumentError, match="numpy"):
        nd.NDArray([1, 2, 3])
    with pytest.raises(rt.ArgumentError, match="__dlpack__"):
        nd.from_dlpack(object())
