"""ctypes mirrors of the C ABI structs (see :mod:`ingot.codegen.prelude`).

Note: ``DLTensor.data/shape/strides`` are declared ``c_void_p`` (same size and alignment as
the C pointers) so the runtime can store plain integer addresses without building ctypes
pointer objects on the hot path.

Example::

    >>> import ctypes
    >>> ctypes.sizeof(DLTensor)
    48
"""

from __future__ import annotations

import ctypes


class DLDevice(ctypes.Structure):
    """``typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;``

    Example::

        >>> DLDevice(1, 0).device_type
        1
    """

    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    """``typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;``

    Example::

        >>> DLDataType(2, 32, 1).bits
        32
    """

    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """The DLPack ``DLTensor`` (pointer members as integer addresses).

    Example::

        >>> t = DLTensor()
        >>> t.ndim
        0
    """

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("byte_offset", ctypes.c_uint64),
    ]


class IngotValue(ctypes.Union):
    """``typedef union { int64_t v_int64; double v_float64; void* v_handle; } IngotValue;``

    Example::

        >>> ctypes.sizeof(IngotValue)
        8
    """

    _fields_ = [("v_int64", ctypes.c_int64), ("v_float64", ctypes.c_double),
                ("v_handle", ctypes.c_void_p)]


PACKED_FUNC_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.POINTER(IngotValue),
    ctypes.POINTER(ctypes.c_int32),
    ctypes.c_int32,
    ctypes.c_void_p,  # char* err (writable buffer)
    ctypes.c_int32,
)

assert ctypes.sizeof(IngotValue) == 8
assert ctypes.sizeof(DLTensor) == 48 or ctypes.sizeof(ctypes.c_void_p) != 8
