"""C types of IR data types, vector typedefs and the small inline helpers generated code uses.

Note: each IR dtype has a *value* type (how an expression of that dtype is held in C) and a
*storage* type (how one element sits in memory). They differ for two dtypes:

* ``bfloat16`` is stored as ``uint16_t`` and computed in ``float`` (each arithmetic result is
  rounded back to bfloat16 with ``ingot_bf16_round``, as ml_dtypes does);
* ``bool`` is stored as ``int8_t`` (DLPack bool, 8 bits) and held as ``int32_t`` (C comparisons
  give ``int``).

The emulated low-precision floats (``float8_e4m3fn``, ..., ``float4_e2m1fn``) are ``uint8_t`` in both
roles: a value is its bit pattern, which only ``reinterpret`` to/from ``uint8`` looks into
(`ingot.ops.lowp` converts them with integer arithmetic).

The sub-byte integers (``int4``, ``uint4``, ``int2``, ``uint2``) are stored as ``uint8_t`` holding the
value's low bits (ml_dtypes' layout: ``-1`` as ``int4`` is ``0x0F``) and held as ``int8_t``/``uint8_t``:
a load sign-extends (``ingot_wrap_int4``), a store masks, and a conversion to them wraps to the width
(a float is first truncated through ``int32``, whose overflow gives 0, as ml_dtypes and the ONNX
reference do).

``float16`` is ``_Float16`` in both roles (GCC >= 12 / clang on x86-64 and AArch64). Vector
dtypes (lanes > 1) are GCC vector extensions: ``typedef float ingot_float32x16
__attribute__((vector_size(64)))``, plus a ``_u`` variant aligned to the element for unaligned
loads and stores. `CHelpers` collects the typedefs and helper functions a module needs, in a
deterministic order, so the output only contains what is used.

Example:
    >>> h = CHelpers()
    >>> value_type("bfloat16", h), storage_type("bool"), value_type("float32x8", h)
    ('float', 'int8_t', 'ingot_float32x8')
"""
from __future__ import annotations

from typing import Callable

from ingot.ir.dtype import EMULATED_FLOATS, DataType

__all__ = ["CHelpers", "storage_type", "value_type", "elem_value_type", "dtype_tag"]

_SCALAR_VALUE = {
    ("int", 8): "int8_t", ("int", 16): "int16_t", ("int", 32): "int32_t", ("int", 64): "int64_t",
    ("uint", 8): "uint8_t", ("uint", 16): "uint16_t", ("uint", 32): "uint32_t", ("uint", 64): "uint64_t",
    ("float", 16): "_Float16", ("float", 32): "float", ("float", 64): "double",
    ("bfloat", 16): "float", ("bool", 1): "int32_t", ("handle", 64): "void*",
}
_SCALAR_VALUE.update({(name, 4 if name.startswith("float4") else 8): "uint8_t" for name in EMULATED_FLOATS})
_SCALAR_VALUE.update({("int", 4): "int8_t", ("int", 2): "int8_t", ("uint", 4): "uint8_t", ("uint", 2): "uint8_t"})
_SCALAR_STORAGE = dict(_SCALAR_VALUE)
_SCALAR_STORAGE.update({(code, bits): "uint8_t" for code in ("int", "uint") for bits in (4, 2)})
_SCALAR_STORAGE[("bfloat", 16)] = "uint16_t"
_SCALAR_STORAGE[("bool", 1)] = "int8_t"


def _unsupported(dtype: DataType, role: str) -> NotImplementedError:
    return NotImplementedError(
        f"the C backend has no {role} type for dtype {dtype}; supported element types are "
        "int2/4/8/16/32/64, uint2/4/8/16/32/64, float16/32/64, bfloat16, the emulated float8/float4 "
        "formats, bool and handle"
    )


def elem_value_type(dtype: "str | DataType") -> str:
    """C type of one lane of ``dtype`` when computing.

    Example:
        >>> elem_value_type("float16x4")
        '_Float16'
    """
    dtype = DataType(dtype)
    try:
        return _SCALAR_VALUE[(dtype.code, dtype.bits)]
    except KeyError:
        raise _unsupported(dtype, "value") from None


def storage_type(dtype: "str | DataType") -> str:
    """C type of one element of ``dtype`` in memory (buffers, DLTensor data).

    Example:
        >>> storage_type("bfloat16")
        'uint16_t'
    """
    dtype = DataType(dtype)
    try:
        return _SCALAR_STORAGE[(dtype.code, dtype.bits)]
    except KeyError:
        raise _unsupported(dtype, "storage") from None


def dtype_tag(dtype: "str | DataType") -> str:
    """An identifier-safe name of ``dtype`` (``float32x16``, ``bool``), used in helper names."""
    return str(DataType(dtype))


def _vector_elem_dtype(dtype: DataType) -> DataType:
    """Lane type of the C vector that holds ``dtype`` (bf16 lanes are floats, bool lanes int32)."""
    if dtype.code == "bfloat":
        return DataType("float32")
    if dtype.is_bool:
        return DataType("int32")
    return dtype.element_of()


def value_type(dtype: "str | DataType", helpers: "CHelpers") -> str:
    """C type of a value of ``dtype``; vector types are registered in ``helpers``.

    Example:
        >>> value_type("int8x16", CHelpers())
        'ingot_int8x16'
    """
    dtype = DataType(dtype)
    if dtype.lanes == 1:
        return elem_value_type(dtype)
    return helpers.vector_type(_vector_elem_dtype(dtype).with_lanes(dtype.lanes))


class CHelpers:
    """Typedefs and ``static inline`` helpers needed by a module, emitted once each, in order.

    Example:
        >>> h = CHelpers()
        >>> h.require("ingot_bf16_to_f32") and None
        >>> "ingot_bf16_to_f32" in h.render()
        True
    """

    def __init__(self) -> None:
        self._typedefs: dict[str, str] = {}
        self._functions: dict[str, str] = {}

    # -- vector typedefs ----------------------------------------------------------------------
    def vector_type(self, dtype: DataType, unaligned: bool = False) -> str:
        """The typedef name of the GCC vector type for ``dtype`` (registering it)."""
        lanes = dtype.lanes
        if lanes & (lanes - 1):
            raise NotImplementedError(
                f"vector dtype {dtype}: the C backend needs a power-of-two number of lanes "
                "(GCC vector extensions); keep such loops as ForKind.VECTORIZED loops in lowering "
                "instead of turning them into Ramp/Broadcast expressions"
            )
        name = f"ingot_{dtype_tag(dtype)}" + ("_u" if unaligned else "")
        if name not in self._typedefs:
            elem = elem_value_type(dtype)
            size = max(dtype.bits, 8) // 8 * lanes
            if unaligned:
                self.vector_type(dtype)
                attrs = f"vector_size({size}), aligned({max(dtype.bits, 8) // 8}), may_alias"
            else:
                attrs = f"vector_size({size})"
            self._typedefs[name] = f"typedef {elem} {name} __attribute__(({attrs}));"
        return name

    # -- helper functions ---------------------------------------------------------------------
    def require(self, name: str, *args: str) -> str:
        """Register helper ``name`` (a key of ``_HELPER_TEMPLATES``, with type arguments) and
        return the C function name to call."""
        maker = _HELPER_TEMPLATES.get(name)
        if maker is None:
            raise KeyError(f"internal error: no C helper template named {name!r}")
        for dep in _HELPER_DEPS.get(name, ()):
            self.require(dep)
        fname, text = maker(*args)
        if fname not in self._functions:
            self._functions[fname] = text
        return fname

    def render(self) -> str:
        """All registered typedefs, then all helper functions (C text)."""
        parts = list(self._typedefs.values())
        if parts:
            parts.append("")
        parts.extend(self._functions.values())
        return "\n".join(parts) + ("\n" if parts else "")


# ------------------------------------------------------------------------------------------------
# Helper templates: name -> (args -> (function name, C text))
# ------------------------------------------------------------------------------------------------


def _bf16_to_f32() -> "tuple[str, str]":
    return "ingot_bf16_to_f32", (
        "static inline float ingot_bf16_to_f32(uint16_t v) {\n"
        "  uint32_t u = (uint32_t)v << 16;\n  float f;\n  memcpy(&f, &u, sizeof(f));\n  return f;\n}\n"
    )


def _f32_to_bf16() -> "tuple[str, str]":
    # Round to nearest even; NaN stays a (quiet) NaN.
    return "ingot_f32_to_bf16", (
        "static inline uint16_t ingot_f32_to_bf16(float f) {\n"
        "  uint32_t u;\n  memcpy(&u, &f, sizeof(u));\n"
        "  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);\n"
        "  u += 0x7fffu + ((u >> 16) & 1u);\n  return (uint16_t)(u >> 16);\n}\n"
    )


def _bf16_round() -> "tuple[str, str]":
    return "ingot_bf16_round", (
        "static inline float ingot_bf16_round(float f) { return ingot_bf16_to_f32(ingot_f32_to_bf16(f)); }\n"
    )


def _floor_int(kind: str) -> Callable[[str], "tuple[str, str]"]:
    def make(ctype: str) -> "tuple[str, str]":
        name = f"ingot_{kind}_{ctype.replace('_t', '')}"
        fix = "q - 1" if kind == "floordiv" else "r + b"
        result = "q" if kind == "floordiv" else "r"
        return name, (
            f"static inline {ctype} {name}({ctype} a, {ctype} b) {{\n"
            f"  {ctype} q = a / b, r = a % b;\n"
            f"  (void)q; (void)r;\n"
            f"  return (r != 0 && ((r < 0) != (b < 0))) ? {fix} : {result};\n}}\n"
        )

    return make


def _floormod_float(ctype: str) -> "tuple[str, str]":
    # Python semantics: the remainder takes the sign of the divisor.
    name = f"ingot_floormod_{ctype}"
    fmod = "fmod" if ctype == "double" else "fmodf"
    copysign = "copysign" if ctype == "double" else "copysignf"
    return name, (
        f"static inline {ctype} {name}({ctype} a, {ctype} b) {{\n"
        f"  {ctype} r = {fmod}(a, b);\n"
        f"  if (r == 0) return {copysign}(({ctype})0, b);  /* numpy: a zero remainder has b's sign */\n"
        f"  return ((r < 0) != (b < 0)) ? r + b : r;\n}}\n"
    )


def _minmax(kind: str) -> Callable[[str, str], "tuple[str, str]"]:
    # TVM semantics (std::min/std::max): no NaN special-casing, unlike fminf/fmaxf.
    def make(tag: str, ctype: str) -> "tuple[str, str]":
        name = f"ingot_{kind}_{tag}"
        op = "<" if kind == "min" else ">"
        return name, f"static inline {ctype} {name}({ctype} a, {ctype} b) {{ return b {op} a ? b : a; }}\n"

    return make


def _wrap_sub_byte(dtype: str) -> "tuple[str, str]":
    # The value of the low bits of v as the sub-byte integer `dtype` (modulo 2**bits, sign from the top bit).
    t = DataType(dtype)
    name, mask = f"ingot_wrap_{t}", (1 << t.bits) - 1
    if t.is_uint:
        return name, f"static inline uint8_t {name}(int64_t v) {{ return (uint8_t)((uint64_t)v & {mask}u); }}\n"
    half = 1 << (t.bits - 1)
    return name, (
        f"static inline int8_t {name}(int64_t v) {{\n"
        f"  int32_t b = (int32_t)((uint64_t)v & {mask}u);\n  return (int8_t)(b >= {half} ? b - {mask + 1} : b);\n}}\n"
    )


def _float_to_int32_or_zero() -> "tuple[str, str]":
    # Truncation toward zero; NaN and values outside int32 give 0 (ml_dtypes' float -> int4 goes through
    # a C int, whose x86 overflow value INT32_MIN has zero low bits): defined behaviour, unlike a C cast.
    return "ingot_f2i32_or_zero", (
        "static inline int32_t ingot_f2i32_or_zero(double v) {\n"
        "  return (v > -2147483649.0 && v < 2147483648.0) ? (int32_t)v : 0;\n}\n"
    )


_HELPER_TEMPLATES: dict[str, Callable[..., "tuple[str, str]"]] = {
    "wrap_sub_byte": _wrap_sub_byte,
    "ingot_f2i32_or_zero": _float_to_int32_or_zero,
    "ingot_bf16_to_f32": _bf16_to_f32,
    "ingot_f32_to_bf16": _f32_to_bf16,
    "ingot_bf16_round": _bf16_round,
    "floordiv": _floor_int("floordiv"),
    "floormod": _floor_int("floormod"),
    "floormod_float": _floormod_float,
    "min": _minmax("min"),
    "max": _minmax("max"),
}
_HELPER_DEPS = {"ingot_bf16_round": ("ingot_bf16_to_f32", "ingot_f32_to_bf16")}
