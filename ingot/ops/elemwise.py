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
