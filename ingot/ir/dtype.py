"""Scalar and vector data types of the IR.

Note: a `DataType` is a plain value (code, bits, lanes), compared and hashed by value. Strings like
``"float32"``, ``"int8"``, ``"float32x16"`` (16 lanes), ``"bool"`` and ``"handle"`` convert to it, and
every IR constructor accepts either form.

Low-precision floats that no C type stores (``float8_e4m3fn``, ``float8_e4m3fnuz``, ``float8_e5m2``,
``float8_e5m2fnuz``, ``float4_e2m1fn``; ml_dtypes' names) are *emulated*: their code is the full name,
one element is held in a byte (the bit pattern), and only the conversions of `ingot.ops.lowp` compute
with them. `EMULATED_FLOATS` lists them; ``float8_e8m0fnu`` (a power-of-two scale: 8 exponent bits, no
sign, no mantissa) is one of them.

Sub-byte integers (``int4``, ``uint4``, ``int2``, ``uint2``: `DataType.is_sub_byte_int`) are plain
``int``/``uint`` types of 4 or 2 bits. One element is held in a byte, ml_dtypes' layout: the value's low
bits, the upper bits zero. Kernels compute on them as ``int8``/``uint8`` values; a load sign-extends,
a store and every conversion to them wrap to the width (the C backend, `ingot.codegen.c.types`).

``"string"`` is the element type of ONNX string tensors: no kernel computes with it (C has no
string type Ingot would generate code for); its values live in the graph executor as numpy object
arrays of Python ``str`` and only executor builtins read or write them (``ingot.graph.op.string``).

Example:
    >>> DataType("float32x4").lanes
    4
    >>> str(DataType("int64").with_lanes(8))
    'int64x8'
"""
from __future__ import annotations

import re
from functools import lru_cache

_CODES = ("int", "uint", "float", "bfloat", "bool", "handle")

#: Emulated low-precision float formats: name -> (exponent bits, mantissa bits, exponent bias).
EMULATED_FLOATS = {
    "float8_e4m3fn": (4, 3, 7),
    "float8_e4m3fnuz": (4, 3, 8),
    "float8_e5m2": (5, 2, 15),
    "float8_e5m2fnuz": (5, 2, 16),
    "float4_e2m1fn": (2, 1, 1),
    "float8_e8m0fnu": (8, 0, 127),
}
_EMULATED_PATTERN = re.compile(r"^(" + "|".join(EMULATED_FLOATS) + r")(?:x(\d+))?$")
_PATTERN = re.compile(r"^(int|uint|float|bfloat|bool|handle)(\d*)(?:x(\d+))?$")


class DataType:
    """A data type: ``code`` (int, uint, float, bfloat, bool, handle), ``bits`` and ``lanes``.

    Example:
        >>> t = DataType("float16")
        >>> (t.code, t.bits, t.lanes, t.is_float)
        ('float', 16, 1, True)
    """

    __slots__ = ("code", "bits", "lanes")

    def __new__(cls, spec: "str | DataType"):
        if isinstance(spec, DataType):
            return spec
        return _parse(str(spec))

    @classmethod
    def _make(cls, code: str, bits: int, lanes: int) -> "DataType":
        obj = object.__new__(cls)
        object.__setattr__(obj, "code", code)
        object.__setattr__(obj, "bits", bits)
        object.__setattr__(obj, "lanes", lanes)
        return obj

    def __setattr__(self, name, value):
        raise AttributeError("DataType is immutable")

    def __reduce__(self):
        return (DataType, (str(self),))

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = DataType(other)
            except ValueError:
                return False
        if not isinstance(other, DataType):
            return NotImplemented
        return (self.code, self.bits, self.lanes) == (other.code, other.bits, other.lanes)

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self):
        return hash((self.code, self.bits, self.lanes))

    def __str__(self):
        if self.code in ("bool", "string") or self.code in EMULATED_FLOATS:
            base = self.code
        elif self.code == "handle":
            base = "handle"
        else:
            base = f"{self.code}{self.bits}"
        return base if self.lanes == 1 else f"{base}x{self.lanes}"

    def __repr__(self):
        return f"DataType({str(self)!r})"

    # -- predicates ------------------------------------------------------------------------------
    @property
    def is_int(self) -> bool:
        return self.code == "int"

    @property
    def is_uint(self) -> bool:
        return self.code == "uint"

    @property
    def is_integer(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.code in ("int", "uint")

    @property
    def is_float(self) -> bool:
        """IEEE float or bfloat."""
        return self.code in ("float", "bfloat")

    @property
    def is_emulated(self) -> bool:
        """A low-precision float held as its bit pattern in a byte (see `EMULATED_FLOATS`).

        Example:
            >>> (DataType("float8_e5m2").is_emulated, DataType("float8_e5m2").is_float)
            (True, False)
        """
        return self.code in EMULATED_FLOATS

    @property
    def is_sub_byte_int(self) -> bool:
        """An integer narrower than a byte (``int4``, ``uint4``, ``int2``, ``uint2``), held one element
        a byte as its low bits (see the module note).

        Example:
            >>> (DataType("int4").is_sub_byte_int, DataType("int4").bytes, DataType("int8").is_sub_byte_int)
            (True, 1, False)
        """
        return self.code in ("int", "uint") and self.bits < 8

    @property
    def is_bool(self) -> bool:
        return self.code == "bool"

    @property
    def is_handle(self) -> bool:
        return self.code == "handle"

    @property
    def is_string(self) -> bool:
        """A string tensor's element (values held by the executor, never by a kernel).

        Example:
            >>> DataType("string").is_string, DataType("string").numpy_dtype()
            (True, dtype('O'))
        """
        return self.code == "string"

    @property
    def is_scalar(self) -> bool:
        return self.lanes == 1

    @property
    def is_vector(self) -> bool:
        return self.lanes > 1

    @property
    def bytes(self) -> int:
        """Storage size of one element of all lanes, in bytes (bool takes one byte)."""
        return max(self.bits, 8) // 8 * self.lanes

    def with_lanes(self, lanes: int) -> "DataType":
        """The same element type with ``lanes`` lanes."""
        return DataType._make(self.code, self.bits, int(lanes))

    def element_of(self) -> "DataType":
        """The scalar type of one lane."""
        return self.with_lanes(1)

    def numpy_dtype(self):
        """The numpy dtype of one lane (``bfloat16`` needs the ``ml_dtypes`` package; float8/float4 and
        the sub-byte integers are ml_dtypes' types when it is installed, else ``uint8`` bytes as stored).

        Example:
            >>> DataType("int8").numpy_dtype()
            dtype('int8')
        """
        import numpy as np

        if self.code == "bfloat":
            try:
                import ml_dtypes
            except ImportError as err:  # pragma: no cover - depends on the environment
                raise ImportError("bfloat16 needs the ml_dtypes package: pip install ml_dtypes") from err
            return np.dtype(ml_dtypes.bfloat16)
        if self.code == "handle":
            raise TypeError("a handle has no numpy dtype")
        if self.code == "string":  # numpy object arrays of str, as ONNX Runtime and onnx.reference hold them
            return np.dtype(object)
        if self.code in EMULATED_FLOATS or self.is_sub_byte_int:
            try:
                import ml_dtypes
            except ImportError:  # the bytes, uninterpreted (numpy's "int4" would be int32)
                return np.dtype("uint8")
            return np.dtype(getattr(ml_dtypes, str(self.element_of())))
        return np.dtype(str(self.element_of()))


@lru_cache(maxsize=None)
def _parse(spec: str) -> DataType:
    if spec.strip() == "string":  # one element is a pointer to a Python str (a numpy object array)
        return DataType._make("string", 64, 1)
    emulated = _EMULATED_PATTERN.match(spec.strip())
    if emulated is not None:
        name, lanes = emulated.groups()
        return DataType._make(name, 4 if name.startswith("float4") else 8, int(lanes) if lanes else 1)
    match = _PATTERN.match(spec.strip())
    if match is None:
        raise ValueError(
            f"unknown data type {spec!r}: expected one of {', '.join(_CODES)} followed by a bit width "
            "and an optional 'xLANES', e.g. 'float32', 'int8', 'float32x16'"
        )
    code, bits, lanes = match.groups()
    if code == "bool":
        bits_i = 1
    elif code == "handle":
        bits_i = 64
    else:
        if not bits:
            raise ValueError(f"data type {spec!r} needs a bit width, e.g. '{code}32'")
        bits_i = int(bits)
    return DataType._make(code, bits_i, int(lanes) if lanes else 1)


def dtype_of_numpy(np_dtype) -> DataType:
    """The IR type of a numpy dtype.

    Example:
        >>> import numpy as np
        >>> str(dtype_of_numpy(np.float32))
        'float32'
    """
    import numpy as np

    dt = np.dtype(np_dtype)
    if dt.kind in "OUS":  # str/bytes/object arrays are string tensors (see the module note)
        return DataType("string")
    name = dt.name
    if name == "bfloat16":
        return DataType("bfloat16")
    return DataType(name)
