import numpy as np
import pytest

from ingot import runtime as rt
from ingot.runtime.dtype import (
    SUPPORTED_DTYPES,
    DTypeError,
    dlpack_to_dtype,
    dtype_str,
    dtype_to_dlpack,
    itemsize,
    numpy_dtype,
)


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_dtype_round_trip(dtype):
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    code, bits, lanes = dtype_to_dlpack(dtype)
    assert dlpack_to_dtype(code, bits, lanes) == dtype
    npd = numpy_dtype(dtype)
    assert dtype_str(npd) == dtype
    assert npd.itemsize * 8 == max(bits, 8)   # float4_e2m1fn: one element per byte (unpacked)


def test_dlpack_codes():
    assert dtype_to_dlpack("int32") == (0, 32, 1)
    assert dtype_to_dlpack("uint8") == (1, 8, 1)
    assert dtype_to_dlpack("float16") == (2, 16, 1)
    assert dtype_to_dlpack("bfloat16") == (4, 16, 1)
    assert dtype_to_dlpack("bool") == (6, 8, 1)
    assert dtype_to_dlpack("float32x4") == (2, 32, 4)
    assert dlpack_to_dtype(2, 32, 8) == "float32x8"
    assert itemsize("float32x4") == 16


def test_bad_dtypes_have_clear_messages():
    with pytest.raises(DTypeError, match="unknown dtype 'float31x'"):
        dtype_to_dlpack("float31x")
    with pytest.raises(DTypeError, match="vector dtype"):
        numpy_dtype("float32x4")
    with pytest.raises(DTypeError, match="no Ingot equivalent"):
        dtype_str(np.complex64)
    with pytest.raises(DTypeError):
        dlpack_to_dtype(9, 8, 1)


def test_numpy_aliases():
    assert dtype_str("f4") == "float32"
    assert dtype_str(np.int8) == "int8"
    assert dtype_str(np.bool_) == "bool"


def test_devices():
    assert rt.cpu() == rt.cpu(0)
    assert rt.cpu(0) != rt.cpu(1)
    assert rt.cpu(0) != rt.cuda(0)
    assert rt.cuda(1).device_type == 2 and rt.cuda(1).device_id == 1
    assert rt.cpu().device_type == 1
    assert str(rt.cpu(0)) == "cpu(0)"
    assert len({rt.cpu(0), rt.cpu(0), rt.cuda(0)}) == 2
    assert rt.device("cuda:1") == rt.cuda(1)
    assert rt.device("llvm") == rt.cpu(0)
    with pytest.raises(AttributeError):
        rt.cpu().device_id = 3
    with pytest.raises(ValueError, match="unknown device type"):
        rt.device("tpu")
