"""Data types: Ingot dtype strings, DLPack ``(code, bits, lanes)`` triples and numpy dtypes.

Note: a dtype is named by a string, as in TVM: ``"float32"``, ``"int8"``, ``"bool"``,
``"bfloat16"``, with an optional vector suffix ``"float32x4"`` (lanes). DLPack type codes are
int 0, uint 1, float 2, bfloat 4, bool 6 (bool is stored in 8 bits). ``bfloat16`` arrays
need the ``ml_dtypes`` package on the numpy side. The emulated low-precision floats
(``float8_e4m3fn``, ``float8_e4m3fnuz``, ``float8_e5m2``, ``float8_e5m2fnuz``, ``float4_e2m1fn``) are
one byte per element and use DLPack 1.1's codes; numpy arrays of them are ml_dtypes' when it is
installed, else their uint8 bit patterns. So are ``float8_e8m0fnu`` and the sub-byte integers ``int4``,
``uint4``, ``int2``, ``uint2`` (DLPack int/uint with 4 or 2 bits): one element a byte in ml_dtypes'
layout (the low bits; ``-1`` as ``int4`` is the byte ``0x0F``), so an ml_dtypes array is passed to and
returned from kernels without a copy; without ml_dtypes the same bytes come back as ``uint8``.

Example::

    >>> dtype_to_dlpack("float32")
    (2, 32, 1)
    >>> dlpack_to_dtype(0, 8, 1)
    'int8'
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

DL_INT = 0
DL_UINT = 1
DL_FLOAT = 2
DL_OPAQUE_HANDLE = 3
DL_BFLOAT = 4
DL_COMPLEX = 5
DL_BOOL = 6

_CODE_OF_BASE = {
    "int": DL_INT,
    "uint": DL_UINT,
    "float": DL_FLOAT,
    "bfloat": DL_BFLOAT,
    "complex": DL_COMPLEX,
    "handle": DL_OPAQUE_HANDLE,
}
_BASE_OF_CODE = {code: base for base, code in _CODE_OF_BASE.items()}

#: DLPack 1.1 type codes of the emulated low-precision floats (``(code, bits)``; one byte each in memory).
EMULATED_DLPACK = {
    "float8_e4m3fn": (10, 8), "float8_e4m3fnuz": (11, 8), "float8_e5m2": (12, 8),
    "float8_e5m2fnuz": (13, 8), "float8_e8m0fnu": (14, 8), "float4_e2m1fn": (17, 4),
}

#: Integers narrower than a byte, stored one element a byte (ml_dtypes' layout, see the module note).
SUB_BYTE_INTS = ("int4", "uint4", "int2", "uint2")
_EMULATED_OF_CODE = {code: name for name, (code, _) in EMULATED_DLPACK.items()}

#: The scalar dtypes that can back an NDArray.
SUPPORTED_DTYPES = (
    "bool",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
    "bfloat16",
    *EMULATED_DLPACK,
    *SUB_BYTE_INTS,
)

_DTYPE_RE = re.compile(r"^(int|uint|float|bfloat|complex|handle)(\d+)(?:x(\d+))?$")


class DTypeError(TypeError, ValueError):
    """An unknown or unsupported dtype string was given.

    Example::

        >>> try:
        ...     dtype_to_dlpack("floot32")
        ... except DTypeError as e:
        ...     print("unknown" in str(e))
        True
    """


@lru_cache(maxsize=None)
def dtype_to_dlpack(dtype: str) -> tuple[int, int, int]:
    """Parse a dtype string into the DLPack ``(code, bits, lanes)`` triple.

    Example::

        >>> dtype_to_dlpack("bool")
        (6, 8, 1)
        >>> dtype_to_dlpack("float32x8")
        (2, 32, 8)
    """
    if not isinstance(dtype, str):
        dtype = dtype_str(dtype)
    if dtype == "bool":
        return (DL_BOOL, 8, 1)
    if dtype in EMULATED_DLPACK:
        return (*EMULATED_DLPACK[dtype], 1)
    m = _DTYPE_RE.match(dtype)
    if m is None or dtype == "bfloat" or (m.group(1) == "bfloat" and m.group(2) != "16"):
        raise DTypeError(
            f"unknown dtype {dtype!r}: expected one of {', '.join(SUPPORTED_DTYPES)} "
            f"(optionally with a vector suffix such as 'float32x4')"
        )
    base, bits, lanes = m.group(1), int(m.group(2)), int(m.group(3) or 1)
    if bits <= 0 or bits > 255 or lanes <= 0 or lanes > 65535:
        raise DTypeError(f"dtype {dtype!r} has bits or lanes out of range")
    return (_CODE_OF_BASE[base], bits, lanes)


@lru_cache(maxsize=None)
def dlpack_to_dtype(code: int, bits: int, lanes: int = 1) -> str:
    """Format a DLPack ``(code, bits, lanes)`` triple as a dtype string.

    Example::

        >>> dlpack_to_dtype(2, 16, 1)
        'float16'
        >>> dlpack_to_dtype(6, 8, 1)
        'bool'
    """
    if code == DL_BOOL:
        base = "bool"
    elif code in _EMULATED_OF_CODE:
        base = _EMULATED_OF_CODE[code]
    elif code in _BASE_OF_CODE:
        base = f"{_BASE_OF_CODE[code]}{bits}"
    else:
        raise DTypeError(f"unknown DLPack type code {code} (bits={bits}, lanes={lanes})")
    return base if lanes == 1 else f"{base}x{lanes}"


def _bfloat16_numpy() -> np.dtype:
    try:
        import ml_dtypes  # noqa: PLC0415 - optional dependency
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise DTypeError(
            "dtype 'bfloat16' needs the ml_dtypes package for numpy arrays: "
            "pip install ml_dtypes"
        ) from exc
    return np.dtype(ml_dtypes.bfloat16)


@lru_cache(maxsize=None)
def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype that stores the scalar Ingot dtype ``dtype``.

    Example::

        >>> numpy_dtype("int16")
        dtype('int16')
    """
    if not isinstance(dtype, str):
        dtype = dtype_str(dtype)
    code, bits, lanes = dtype_to_dlpack(dtype)
    if lanes != 1:
        raise DTypeError(
            f"vector dtype {dtype!r} cannot back an array; use the scalar dtype "
            f"{dlpack_to_dtype(code, bits)!r} with an extra axis of {lanes}"
        )
    if dtype == "bfloat16":
        return _bfloat16_numpy()
    if dtype in EMULATED_DLPACK or dtype in SUB_BYTE_INTS:
        try:
            import ml_dtypes  # noqa: PLC0415 - optional dependency
        except ImportError:
            return np.dtype("uint8")
        return np.dtype(getattr(ml_dtypes, dtype))
    if dtype not in SUPPORTED_DTYPES:
        raise DTypeError(
            f"dtype {dtype!r} is not supported for arrays; supported: {', '.join(SUPPORTED_DTYPES)}"
        )
    return np.dtype(dtype)


def dtype_str(dtype) -> str:
    """Normalize a numpy dtype, a numpy scalar type or a dtype string to an Ingot dtype string.

    Example::

        >>> dtype_str(np.float32)
        'float32'
        >>> dtype_str("float64")
        'float64'
    """
    if isinstance(dtype, str):
        if dtype in SUPPORTED_DTYPES:
            return dtype
        try:
            dtype_to_dlpack(dtype)
            return dtype
        except DTypeError:
            pass  # maybe a numpy alias such as "f4" or "double"
    try:
        npd = np.dtype(dtype)
    except TypeError as exc:
        raise DTypeError(f"unknown dtype {dtype!r}; supported: {', '.join(SUPPORTED_DTYPES)}") from exc
    return _numpy_dtype_name(npd)


@lru_cache(maxsize=None)
def _numpy_dtype_name(npd: np.dtype) -> str:
    if npd.kind == "b":
        return "bool"
    if npd.kind in "iuf" and npd.name in SUPPORTED_DTYPES:
        return npd.name
    if npd.name == "bfloat16" or npd.name in EMULATED_DLPACK or npd.name in SUB_BYTE_INTS:  # ml_dtypes' types
        return npd.name
    raise DTypeError(
        f"numpy dtype {npd} has no Ingot equivalent; supported: {', '.join(SUPPORTED_DTYPES)}"
    )


def itemsize(dtype: str) -> int:
    """Bytes of one element (all lanes) of ``dtype``.

    Example::

        >>> itemsize("float32x4")
        16
    """
    _, bits, lanes = dtype_to_dlpack(dtype)
    return (bits * lanes + 7) // 8
