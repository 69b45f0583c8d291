"""Elementwise (one input, same shape) operators: activations, math functions, casts.

Example:
    >>> from ingot import te
    >>> x = te.placeholder((8,), name="x")
    >>> y = relu(x)
"""
from __future__ import annotations

import math
from typing import Any, Callable

from ingot import tir
from ingot.ir.dtype import DataType

from ._util import compute, const_like


def unary(x: Any, f: Callable[[Any], Any], name: str) -> Any:
    """``te.compute(x.shape, lambda *i: f(x[i]))``.

    Example:
        >>> from ingot import te, tir
        >>> y = unary(te.placeholder((4,), name="x"), tir.exp, "T_exp")
    """
    return compute(x.shape, lambda idx: f(x[idx]), name, tag="elemwise")


def relu(x: Any) -> Any:
    """``max(x, 0)``.

    Example:
        >>> from ingot import te
        >>> y = relu(te.placeholder((4,), name="x"))
    """
    return unary(x, lambda v: tir.max(v, const_like(0, x.dtype)), "T_relu")


def leaky_relu(x: Any, alpha: float) -> Any:
    """``x if x > 0 else alpha * x``.

    Example:
        >>> from ingot import te
        >>> y = leaky_relu(te.placeholder((4,), name="x"), 0.1)
    """
    return unary(x, lambda v: tir.Select(v > const_like(0, x.dtype), v, v * const_like(alpha, x.dtype)),
                 "T_leaky_relu")


def clip(x: Any, a_min: float, a_max: float) -> Any:
    """``min(max(x, a_min), a_max)``.

    Example:
        >>> from ingot import te
        >>> y = clip(te.placeholder((4,), name="x"), 0.0, 6.0)
    """
    return unary(x, lambda v: tir.min(tir.max(v, const_like(a_min, x.dtype)), const_like(a_max, x.dtype)),
                 "T_clip")


def gelu(x: Any) -> Any:
    """``0.5 x (1 + erf(x / sqrt(2)))`` (exact GELU).

    Example:
        >>> from ingot import te
        >>> y = gelu(te.placeholder((4,), name="x"))
    """
    half, one, inv = (const_like(v, x.dtype) for v in (0.5, 1.0, 1.0 / math.sqrt(2.0)))
    return unary(x, lambda v: half * v * (one + tir.erf(v * inv)), "T_gelu")


def gelu_tanh(x: Any) -> Any:
    """``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (GPT-2's GELU).

    Example:
        >>> from ingot import te
        >>> y = gelu_tanh(te.placeholder((4,), name="x"))
    """
    c = [const_like(v, x.dtype) for v in (0.5, 1.0, math.sqrt(2.0 / math.pi), 0.044715)]
    return unary(x, lambda v: c[0] * v * (c[1] + tir.tanh(c[2] * (v + c[3] * v * v * v))), "T_gelu_tanh")


def silu(x: Any) -> Any:
    """``x * sigmoid(x)``.

    Example:
        >>> from ingot import te
        >>> y = silu(te.placeholder((4,), name="x"))
    """
    return unary(x, lambda v: v * tir.sigmoid(v), "T_silu")


def hard_swish(x: Any) -> Any:
    """``x * clip(x + 3, 0, 6) / 6``.

    Example:
        >>> from ingot import te
        >>> y = hard_swish(te.placeholder((4,), name="x"))
    """
    c = [const_like(v, x.dtype) for v in (3.0, 0.0, 6.0)]
    return unary(x, lambda v: v * tir.min(tir.max(v + c[0], c[1]), c[2]) / c[2], "T_hard_swish")


def negative(x: Any) -> Any:
    """``-x``.

    Example:
        >>> from ingot import te
        >>> y = negative(te.placeholder((4,), name="x"))
    """
    return unary(x, lambda v: const_like(0, x.dtype) - v, "T_negative")


def rsqrt(x: Any) -> Any:
    """``1 / sqrt(x)``."""
    return unary(x, lambda v: const_like(1.0, x.dtype) / tir.sqrt(v), "T_rsqrt")


def cast(x: Any, dtype: str) -> Any:
    """``x`` converted to ``dtype``.

    Example:
        >>> from ingot import te
        >>> y = cast(te.placeholder((4,), name="x"), "float16")
    """
    return unary(x, lambda v: v.astype(dtype), "T_cast")


def _bit_pattern(v: Any, src: "DataType") -> Any:
    """The bits of a value of a type narrower than 16 bits, as a uint8 (see `bitcast`)."""
    if src.is_emulated:
        return tir.reinterpret("uint8", v)
    if src.is_sub_byte_int:   # -1 as int4 is 0x0F: the low bits of the C value
        return v.astype("uint8") & tir.const((1 << src.bits) - 1, "uint8")
    return v.astype("uint8")   # bool (0/1), int8 (C's conversion keeps the bits), uint8


def _from_bit_pattern(code: Any, dst: "DataType") -> Any:
    if dst.is_emulated:
        return tir.reinterpret(str(dst), code)
    if dst.is_bool:
        return code != tir.const(0, "uint8")
    return code.astype(str(dst))   # a sub-byte integer wraps (sign from its top bit); int8 keeps the bits


def bitcast(x: Any, dtype: str) -> Any:
    """``x``'s bits read as ``dtype`` (ONNX BitCast, numpy ``view``): both types have the same width;
    bool counts as 8 bits, bfloat16 is reinterpreted through its float32 bits (kernels hold it as float32,
    so a signalling-NaN pattern read as bfloat16 comes out as the quiet NaN).

    Example:
        >>> from ingot import te
        >>> y = bitcast(te.placeholder((4,), "float32", "x"), "int32")
    """
    src, dst = DataType(str(x.dtype)), DataType(dtype)
    if max(src.bits, 8) != max(dst.bits, 8):   # the graph op names both widths; this guards direct TE use
        raise ValueError(f"bitcast: {src} and {dst} differ in width; Cast converts values")

    def body(v: Any) -> Any:
        if src.bits <= 8:
            return _from_bit_pattern(_bit_pattern(v, src), dst)
        if src.code == "bfloat":   # a bfloat16 value is held as float32: its bits are the top half
            v = (tir.reinterpret("int32", v.astype("float32")) >> 16).astype("int16")
            src_t = DataType("int16")
        else:
            src_t = src
        if dst.code == "bfloat":
            wide = tir.reinterpret("int16", v) if src_t != DataType("int16") else v
            return tir.reinterpret("float32", wide.astype("int32") << 16).astype("bfloat16")
        return tir.reinterpret(str(dst), v) if src_t != dst else v

    return unary(x, body, "T_bitcast")


def _math(name: str) -> Callable[[Any], Any]:
    fn = getattr(tir, name)

    def op(x: Any) -> Any:
        return unary(x, fn, f"T_{name}")

    op.__name__ = name
    op.__doc__ = f"""Elementwise ``{name}`` (the ``{name}`` intrinsic).

    Example:
        >>> from ingot import te
        >>> y = {name}(te.placeholder((4,), name="x"))
    """
    return op


exp = _math("exp")
expm1 = _math("expm1")
log = _math("log")
sqrt = _math("sqrt")
tanh = _math("tanh")
sigmoid = _math("sigmoid")
erf = _math("erf")
floor = _math("floor")
ceil = _math("ceil")
round = _math("round")  # noqa: A001 - numpy/TVM name
sin = _math("sin")
cos = _math("cos")


def abs(x: Any) -> Any:  # noqa: A001 - numpy/TVM name
    """Elementwise absolute value.

    Example:
        >>> from ingot import te
        >>> y = abs(te.placeholder((4,), name="x"))
    """
    return unary(x, tir.abs, "T_abs")
