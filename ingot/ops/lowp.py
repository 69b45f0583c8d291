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
    bits = _format(fmt)[0]
    return decode_table(fmt)[_as_codes(x) & ((1 << bits) - 1)]


def _float_layout(dtype: np.dtype) -> tuple:
    return (np.int64, 52, 1023) if dtype == np.float64 else (np.int32, 23, 127)


def encode_numpy(x: np.ndarray, fmt: str, saturate: bool = True) -> np.ndarray:
    """uint8 codes of ``fmt`` nearest to ``x`` (round to nearest even; see the module note for
    overflow). float64 is converted from float64, everything else through float32 (exact for
    float16/bfloat16 and integers below 2**24).

    Example:
        >>> encode_numpy(np.array([0.1, 1e6], "float32"), "float8_e5m2", saturate=False).tolist()
        [46, 124]
    """
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


def encode(x: Any, fmt: str, saturate: bool = True) -> Any:
    """TE: the ``fmt`` tensor nearest to the float tensor ``x`` (round to nearest even; overflow as
    in the module note). float16/bfloat16/integer inputs go through float32 (exact).

    Example:
        >>> from ingot import te
        >>> y = encode(te.placeholder((4,), "float32", "x"), "float8_e5m2", saturate=False)
    """
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


def cast(x: Any, dtype: str, saturate: bool = True) -> Any:
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
    return encode(x, dtype, saturate) if dst.is_emulated else x


def cast_numpy(x: np.ndarray, dtype: str, saturate: bool = True, src: "str | None" = None) -> np.ndarray:
    """numpy reference of `cast`: ``x`` (of ``src``, by default its own dtype) converted to ``dtype``;
    an emulated result has `storage_numpy_dtype`.

    Example:
        >>> cast_numpy(np.array([3.3], "float32"), "float4_e2m1fn").view(np.uint8).tolist()
        [5]
    """
    x = np.asarray(x)
    src = src or x.dtype.name
    if src in EMULATED_FLOATS:
        x = decode_numpy(x, src)
    if dtype in EMULATED_FLOATS:
        return encode_numpy(x, dtype, saturate).view(storage_numpy_dtype(dtype))
    return x.astype(DataType(dtype).numpy_dtype())
