"""Emulated low-precision floats (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz, float4 e2m1fn): exact
conversions to and from the IEEE floats, as TE computes and as numpy references.

Note: no C type holds these formats, so a tensor of one of them holds each element's bit pattern in
a byte (`ingot.ir.dtype.EMULATED_FLOATS`); only the conversions here look inside. Both directions
are integer arithmetic on the float's bits, the same formulas in TE and numpy, so compiled kernels
and references agree bit for bit and neither needs ml_dtypes:

* decode: sign, exponent field ``e`` and mantissa ``m`` of the code give
  ``(m + 2**M*(e>0)) * 2**(max(e,1) - bias - M)``; the power of two is built from its float32 bits.
  NaN/Inf codes per format (fn: ``S.1111.111`` is NaN, no Inf; fnuz: ``0x80`` is the only NaN, no -0;
  e5m2: IEEE; e2m1: every code is finite, and a NaN input becomes -0, as ONNX specifies).
* encode: the quantum of the target at the input's binade, ``q = 2**(max(E, emin) - M)``, rounds
  ``|x| / q`` to nearest even (``nearbyint``; exact, q is a power of two), which is IEEE rounding
  including subnormals. A result above the largest finite value saturates to it (ONNX
  ``saturate=1``, the default; float4 always) or becomes Inf (e5m2) / NaN (the others).

``float8_e8m0fnu`` is a power-of-two scale (8 exponent bits, bias 127, no sign, no mantissa; code
``c`` is ``2**(c-127)``, ``0xFF`` is NaN): its code is the float32 exponent field, so both directions
read and write float32 bits directly; encoding follows ONNX's ``round_mode`` (``up``, ``down``,
``nearest``) and ``saturate`` exactly as the ONNX reference (`onnx.numpy_helper.to_float8e8m0`) does.

The sub-byte integers (int4/uint4/int2/uint2) need no TE code here: kernels hold them as int8/uint8
values and the C backend wraps at conversions, loads and stores. `sub_byte_numpy` and
`sub_byte_values` are their numpy side (ml_dtypes' semantics: a float is truncated through int32,
NaN and int32 overflow give 0, then the low bits are kept).

Example:
    >>> import numpy as np
    >>> codes = encode_numpy(np.array([1.0, -0.3, 500.0], "float32"), "float8_e4m3fn")
    >>> decode_numpy(codes, "float8_e4m3fn").tolist()
    [1.0, -0.3125, 448.0]
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ingot import tir
from ingot.ir.dtype import EMULATED_FLOATS, DataType

from ._util import compute


E8M0 = "float8_e8m0fnu"
_ROUND_MODES = ("up", "down", "nearest")


def _format(fmt: str) -> tuple:
    """``(bits, exponent bits, mantissa bits, bias, fnuz, has_inf, has_nan)`` of an emulated format."""
    if fmt not in EMULATED_FLOATS:
        raise ValueError(f"{fmt!r} is not an emulated float format; expected one of {sorted(EMULATED_FLOATS)}")
    ebits, mbits, bias = EMULATED_FLOATS[fmt]
    bits = 1 + ebits + mbits
    fnuz = fmt.endswith("fnuz")
    return bits, ebits, mbits, bias, fnuz, fmt == "float8_e5m2", not fmt.startswith("float4")


@functools.lru_cache(maxsize=None)
def decode_table(fmt: str) -> np.ndarray:
    """The float32 value of every code of ``fmt`` (index = code).

    Example:
        >>> decode_table("float4_e2m1fn")[:8].tolist()
        [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    """
    if fmt == E8M0:   # code c is the float32 with exponent field c; 0 is the subnormal 2**-127
        bits = np.arange(256, dtype=np.uint32) << 23
        bits[0], bits[255] = 0x00400000, 0x7FC00000
        value = bits.view(np.float32)
        value.setflags(write=False)
        return value
    bits, ebits, mbits, bias, fnuz, has_inf, has_nan = _format(fmt)
    codes = np.arange(1 << bits, dtype=np.int64)
    sign = (codes >> (bits - 1)) & 1
    exp = (codes >> mbits) & ((1 << ebits) - 1)
    mant = codes & ((1 << mbits) - 1)
    full = mant + np.where(exp > 0, 1 << mbits, 0)
    mag = full * np.exp2((np.maximum(exp, 1) - bias - mbits).astype(np.float64))
    value = np.where(sign == 1, -mag, mag)
    top = (1 << ebits) - 1
    if fnuz:
        value[1 << (bits - 1)] = np.nan
    elif has_inf:
        value[(exp == top) & (mant == 0)] = np.inf * np.where(sign == 1, -1, 1)[(exp == top) & (mant == 0)]
        value[(exp == top) & (mant != 0)] = np.nan
    elif has_nan:  # fn: only the all-ones pattern is NaN
        value[(exp == top) & (mant == (1 << mbits) - 1)] = np.nan
    value.setflags(write=False)
    return value.astype(np.float32)


@functools.lru_cache(maxsize=None)
def _limits(fmt: str) -> tuple:
    """``(largest finite value, its code, NaN code, +Inf code or None)``."""
    bits, _, _, _, fnuz, has_inf, _ = _format(fmt)
    table = decode_table(fmt)[: 1 << (bits - 1)]          # the non-negative codes
    finite = np.where(np.isfinite(table))[0]
    max_code = int(finite[np.argmax(table[finite])])
    # float4 has no NaN: ONNX (and ml_dtypes) give the -0 pattern.
    nan_code = (1 << (bits - 1)) if (fnuz or fmt.startswith("float4")) else (1 << (bits - 1)) - 1
    inf_code = int(np.where(np.isinf(table))[0][0]) if has_inf else None
    return float(table[max_code]), max_code, nan_code, inf_code


def _as_codes(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.view(np.uint8) if x.dtype.itemsize == 1 and x.dtype.kind not in "iu" else x.astype(np.uint8)


def storage_numpy_dtype(fmt: str) -> np.dtype:
    """The numpy dtype arrays of ``fmt`` use: ml_dtypes' when installed, else the uint8 codes.

    Example:
        >>> storage_numpy_dtype("float8_e5m2").itemsize
        1
    """
    return DataType(fmt).numpy_dtype()


def decode_numpy(x: np.ndarray, fmt: str) -> np.ndarray:
    """float32 values of an array of ``fmt`` (ml_dtypes array or uint8 codes).

    Example:
        >>> decode_numpy(np.array([0x38, 0xC0], np.uint8), "float8_e4m3fn").tolist()
        [1.0, -2.0]
    """
    bits = 8 if fmt == E8M0 else _format(fmt)[0]
    return decode_table(fmt)[_as_codes(x) & ((1 << bits) - 1)]


def _float_layout(dtype: np.dtype) -> tuple:
    return (np.int64, 52, 1023) if dtype == np.float64 else (np.int32, 23, 127)


def _e8m0_rounding(exp: Any, frac: Any, round_mode: str, saturate: bool, xp: Any) -> Any:
    """The e8m0 code of a float32 with exponent field ``exp`` and fraction ``frac`` (int32 values), for
    numpy (``xp=np``) and TE (``xp=_TirOps``) alike: the ONNX reference's rounding, step by step."""
    if round_mode not in _ROUND_MODES:
        raise ValueError(f"round_mode must be one of {_ROUND_MODES} for {E8M0}, got {round_mode!r}")
    special = exp == 0xFF
    if round_mode == "down":
        up = None
    elif round_mode == "up":
        up = frac > 0
    else:  # guard bit set and (round bit, sticky bits or the exponent's lowest bit "exp > 0")
        g, r, sticky = (frac & 0x400000) > 0, (frac & 0x200000) > 0, (frac & 0x1FFFFF) > 0
        up = xp.logical_and(g, xp.logical_or(xp.logical_or(r, sticky), exp > 0))
    code = exp
    if up is not None:
        if saturate:   # the largest exponent stays (no rounding up to the NaN code)
            up = xp.logical_and(up, exp != 0xFE)
        code = xp.where(xp.logical_and(up, xp.logical_not(special)), exp + 1, exp)
    return xp.where(special, 0xFF, code)


def _encode_e8m0_numpy(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    return _e8m0_rounding((b >> 23) & 0xFF, b & 0x7FFFFF, round_mode, saturate, np).astype(np.uint8)


def encode_numpy(x: np.ndarray, fmt: str, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """uint8 codes of ``fmt`` nearest to ``x`` (round to nearest even; see the module note for
    overflow). float64 is converted from float64, everything else through float32 (exact for
    float16/bfloat16 and integers below 2**24). ``round_mode`` applies to ``float8_e8m0fnu`` only
    (which converts through float32, as ONNX does).

    Example:
        >>> encode_numpy(np.array([0.1, 1e6], "float32"), "float8_e5m2", saturate=False).tolist()
        [46, 124]
        >>> encode_numpy(np.array([0.3, 0.25, 3.0], "float32"), "float8_e8m0fnu", round_mode="up").tolist()
        [126, 125, 129]
    """
    if fmt == E8M0:
        return _encode_e8m0_numpy(x, saturate, round_mode)
    bits, _, mbits, bias, fnuz, _, _ = _format(fmt)
    x = np.asarray(x)
    x = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
    int_t, frac, fbias = _float_layout(x.dtype)
    ft = x.dtype.type
    a = np.abs(x)
    exp = (a.view(int_t) >> frac) - fbias
    e8 = np.maximum(exp, 1 - bias)
    quantum = ((e8 - mbits + fbias).astype(int_t) << frac).view(x.dtype)
    with np.errstate(all="ignore"):
        r = np.rint(a / quantum) * quantum
        rb = r.view(int_t)
        normal = ((((rb >> frac) - fbias + bias) << mbits) | ((rb >> (frac - mbits)) & ((1 << mbits) - 1)))
        sub = (r * ft(2.0 ** (bias - 1 + mbits))).astype(int_t)
        mag = np.where(r >= ft(2.0 ** (1 - bias)), normal, sub)
        max_value, max_code, nan_code, inf_code = _limits(fmt)
        over = r > ft(max_value)
        if saturate or fmt.startswith("float4"):
            mag = np.where(over, max_code, mag)
        else:
            mag = np.where(over, inf_code if inf_code is not None else nan_code, mag)
        sign = np.signbit(x).astype(int_t) << (bits - 1)
        code = mag | sign
        if fnuz:
            code = np.where(mag == 0, 0, code)   # no negative zero
        nan = np.isnan(x)
        code = np.where(nan, nan_code if fnuz else (nan_code | sign), code)
    return code.astype(np.uint8)


# -- TE computes ---------------------------------------------------------------------------------


def _pow2_f32(k: Any) -> Any:
    """2**k as float32 for an int32 ``k`` in the normal range, from its bits."""
    return tir.reinterpret("float32", (k + 127) << 23)


def decode(x: Any, fmt: str, out_dtype: str = "float32") -> Any:
    """TE: the values of the ``fmt`` tensor ``x`` as ``out_dtype`` (exact: every code fits float16).

    Example:
        >>> from ingot import te
        >>> y = decode(te.placeholder((4,), "float8_e4m3fn", "x"), "float8_e4m3fn", "float16")
    """
    if fmt == E8M0:
        return compute(x.shape, lambda idx: _decode_e8m0(x[tuple(idx)], out_dtype), "T_decode_" + fmt,
                       tag="elemwise")
    bits, ebits, mbits, bias, fnuz, has_inf, has_nan = _format(fmt)
    top, mmask = (1 << ebits) - 1, (1 << mbits) - 1

    def body(idx: tuple) -> Any:
        c = tir.reinterpret("uint8", x[tuple(idx)]).astype("int32")
        sign = (c >> (bits - 1)) & 1
        exp = (c >> mbits) & top
        mant = c & mmask
        full = tir.select(exp > 0, mant + (1 << mbits), mant)
        mag = full.astype("float32") * _pow2_f32(tir.max(exp, 1) - (bias + mbits))
        value = tir.select(sign == 1, -mag, mag)
        nan = tir.const(float("nan"), "float32")
        if fnuz:
            value = tir.select(c == (1 << (bits - 1)), nan, value)
        elif has_inf:
            inf = tir.select(sign == 1, tir.const(-float("inf"), "float32"), tir.const(float("inf"), "float32"))
            value = tir.select(exp == top, tir.select(mant == 0, inf, nan), value)
        elif has_nan:
            value = tir.select((c & ((1 << (bits - 1)) - 1)) == (1 << (bits - 1)) - 1, nan, value)
        return value if out_dtype == "float32" else value.astype(out_dtype)

    return compute(x.shape, body, "T_decode_" + fmt, tag="elemwise")


def _decode_e8m0(v: Any, out_dtype: str) -> Any:
    c = tir.reinterpret("uint8", v).astype("int32")
    b = tir.select(c == 0, tir.const(0x00400000, "int32"),
                   tir.select(c == 0xFF, tir.const(0x7FC00000, "int32"), c << 23))
    value = tir.reinterpret("float32", b)
    return value if out_dtype == "float32" else value.astype(out_dtype)


class _TirOps:
    """The three numpy functions `_e8m0_rounding` uses, on TIR expressions."""

    where = staticmethod(tir.select)
    logical_and = staticmethod(tir.all)
    logical_or = staticmethod(tir.any)
    logical_not = staticmethod(tir.Not)


def _encode_e8m0(x: Any, saturate: bool, round_mode: str) -> Any:
    def body(idx: tuple) -> Any:
        v = x[tuple(idx)]
        b = tir.reinterpret("int32", v if str(v.dtype) == "float32" else v.astype("float32"))
        code = _e8m0_rounding((b >> 23) & 0xFF, b & 0x7FFFFF, round_mode, saturate, _TirOps)
        return tir.reinterpret(E8M0, code.astype("uint8"))

    return compute(x.shape, body, "T_encode_" + E8M0, tag="elemwise")


def encode(x: Any, fmt: str, saturate: bool = True, round_mode: str = "up") -> Any:
    """TE: the ``fmt`` tensor nearest to the float tensor ``x`` (round to nearest even; overflow as
    in the module note; ``float8_e8m0fnu`` rounds as ``round_mode`` says). float16/bfloat16/integer
    inputs go through float32 (exact).

    Example:
        >>> from ingot import te
        >>> y = encode(te.placeholder((4,), "float32", "x"), "float8_e5m2", saturate=False)
    """
    if fmt == E8M0:
        return _encode_e8m0(x, saturate, round_mode)
    bits, _, mbits, bias, fnuz, _, _ = _format(fmt)
    wide = str(x.dtype) == "float64"
    ft, it = ("float64", "int64") if wide else ("float32", "int32")
    _, frac, fbias = _float_layout(np.dtype(ft))
    max_value, max_code, nan_code, inf_code = _limits(fmt)
    overflow_code = max_code if (saturate or fmt.startswith("float4")) else (
        inf_code if inf_code is not None else nan_code)

    def const(v: float) -> Any:
        return tir.const(v, ft)

    def body(idx: tuple) -> Any:
        v = x[tuple(idx)]
        v = v if str(v.dtype) == ft else v.astype(ft)
        a = tir.abs(v)
        exp = (tir.reinterpret(it, a) >> frac) - fbias
        e8 = tir.max(exp, tir.const(1 - bias, it))
        quantum = tir.reinterpret(ft, (e8 + (fbias - mbits)) << frac)
        r = tir.nearbyint(a / quantum) * quantum
        rb = tir.reinterpret(it, r)
        normal = ((((rb >> frac) - fbias + bias) << mbits) | ((rb >> (frac - mbits)) & ((1 << mbits) - 1)))
        sub = (r * const(2.0 ** (bias - 1 + mbits))).astype(it)
        mag = tir.select(r >= const(2.0 ** (1 - bias)), normal, sub)
        mag = tir.select(r > const(max_value), tir.const(overflow_code, it), mag)
        sign = tir.select(v < const(0.0), tir.const(1 << (bits - 1), it), tir.const(0, it))
        if not fnuz:   # -0.0 keeps its sign bit (v < 0 misses it): read the sign from the bits
            sign = (tir.reinterpret(it, v) >> (64 if wide else 32) - 1) & 1
            sign = sign << (bits - 1)
        code = mag | sign
        if fnuz:
            code = tir.select(mag == 0, tir.const(0, it), code)
            code = tir.select(tir.isnan(v), tir.const(nan_code, it), code)
        else:
            code = tir.select(tir.isnan(v), tir.const(nan_code, it) | sign, code)
        return tir.reinterpret(fmt, code.astype("uint8"))

    return compute(x.shape, body, "T_encode_" + fmt, tag="elemwise")


def cast(x: Any, dtype: str, saturate: bool = True, round_mode: str = "up") -> Any:
    """TE: ``x`` converted to ``dtype`` where either side is an emulated float (float8 → float8 goes
    through float32, exact).

    Example:
        >>> from ingot import te
        >>> y = cast(te.placeholder((4,), "float8_e5m2", "x"), "float8_e4m3fn")
    """
    src, dst = DataType(str(x.dtype)), DataType(dtype)
    if src.is_emulated:
        x = decode(x, str(src), "float32" if dst.is_emulated or not dst.is_float else dtype)
        if not dst.is_emulated and str(x.dtype) != dtype:
            from .elemwise import cast as plain_cast

            return plain_cast(x, dtype)
    return encode(x, dtype, saturate, round_mode) if dst.is_emulated else x


# -- sub-byte integers (numpy side; see the module note) -----------------------------------------


def sub_byte_values(x: np.ndarray, dtype: str) -> np.ndarray:
    """The values of an ``int4``/``uint4``/``int2``/``uint2`` array (ml_dtypes' or its uint8 bytes) as
    int8/uint8.

    Example:
        >>> sub_byte_values(np.array([0x0F, 0x07, 0x08], np.uint8), "int4").tolist()
        [-1, 7, -8]
    """
    t = DataType(dtype)
    x = np.asarray(x)
    raw = (x.view(np.uint8) if x.dtype.itemsize == 1 else x.astype(np.int64)) & ((1 << t.bits) - 1)
    if t.is_uint:
        return raw.astype(np.uint8)
    raw = raw.astype(np.int16)
    return np.where(raw >= 1 << (t.bits - 1), raw - (1 << t.bits), raw).astype(np.int8)


def sub_byte_numpy(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` converted to the sub-byte integer ``dtype`` as ml_dtypes converts: floats truncate
    through int32 (NaN, Inf and int32 overflow give 0), then every value wraps modulo ``2**bits``.
    The result has `storage_numpy_dtype` (ml_dtypes' type, else the uint8 bytes).

    Example:
        >>> sub_byte_values(sub_byte_numpy(np.array([-9.0, 7.9, 17.0]), "int4"), "int4").tolist()
        [7, 7, 1]
    """
    x = np.asarray(x)
    if x.dtype.kind == "f" or x.dtype.itemsize == 1 and x.dtype.kind not in "iub":
        with np.errstate(invalid="ignore"):
            f = x.astype(np.float64)
            ok = np.abs(f) < 2.0 ** 31           # False for NaN
            wide = np.where(ok, np.trunc(np.where(ok, f, 0.0)), 0.0).astype(np.int64)
    else:
        wide = x.astype(np.int64)
    low = (wide & ((1 << DataType(dtype).bits) - 1)).astype(np.uint8)
    return low.view(storage_numpy_dtype(dtype))


def cast_numpy(x: np.ndarray, dtype: str, saturate: bool = True, src: "str | None" = None,
               round_mode: str = "up") -> np.ndarray:
    """numpy reference of `cast` (and of a cast to or from a sub-byte integer): ``x`` (of ``src``, by
    default its own dtype) converted to ``dtype``; an emulated or sub-byte result has
    `storage_numpy_dtype`.

    Example:
        >>> cast_numpy(np.array([3.3], "float32"), "float4_e2m1fn").view(np.uint8).tolist()
        [5]
    """
    x = np.asarray(x)
    src = src or x.dtype.name
    if src in EMULATED_FLOATS:
        x = decode_numpy(x, src)
    elif _is_sub_byte(src):
        x = sub_byte_values(x, src)
    if dtype in EMULATED_FLOATS:
        return encode_numpy(x, dtype, saturate, round_mode).view(storage_numpy_dtype(dtype))
    if _is_sub_byte(dtype):
        return sub_byte_numpy(x, dtype)
    return x.astype(DataType(dtype).numpy_dtype())


def _is_sub_byte(name: str) -> bool:
    try:
        return DataType(name).is_sub_byte_int
    except ValueError:  # numpy names Ingot has no DataType for (object, str): not sub-byte
        return False
