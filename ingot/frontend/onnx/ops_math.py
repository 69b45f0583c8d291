"""ONNX converters: elementwise math, activations, comparisons and logic, reductions, casts.

Note: ops with no graph operator of their own are decomposed into existing ones (``Softplus`` →
``log(exp(x) + 1)``, ``And`` → ``where(a, b, false)``...), so FuseOps later fuses them back into one
kernel. Binary ops on static shape values (numpy object arrays holding symbolic dims) are evaluated
with numpy, which keeps symbolic shape arithmetic (``batch * 12``) out of the graph.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("Relu", 14) is not None
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ingot import graph as G

from . import ops_dynamic
from ._common import as_array, is_int_dtype, is_static, norm_axes, scalar_like, static_ints
from .importer import register

# -- unary ----------------------------------------------------------------------------------------

_UNARY: dict[str, Callable] = {
    "Relu": G.op.relu, "Sigmoid": G.op.sigmoid, "Tanh": G.op.tanh, "Exp": G.op.exp, "Log": G.op.log,
    "Sqrt": G.op.sqrt, "Abs": G.op.abs, "Neg": G.op.negative, "Floor": G.op.floor, "Ceil": G.op.ceil,
    "Erf": G.op.erf, "Sin": G.op.sin, "Cos": G.op.cos, "Round": G.op.round,
}


def _unary(builder: Callable) -> Callable:
    def convert(ctx: Any, node: Any) -> Any:
        return ctx.emit(builder(ctx.expr(node.input(0))))

    return convert


for _name, _builder in _UNARY.items():
    register(_name)(_unary(_builder))


@register("Identity")
def _identity(ctx: Any, node: Any) -> Any:
    return node.input(0)


def _s(ctx: Any, x: Any, value: float) -> G.Constant:
    return scalar_like(value, ctx.dtype(x))


@register("Reciprocal")
def _reciprocal(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    return ctx.emit(G.op.divide(_s(ctx, x, 1), x))


@register("Tan")
def _tan(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    return ctx.emit(G.op.divide(ctx.emit(G.op.sin(x)), ctx.emit(G.op.cos(x))))


@register("Sign")
def _sign(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    pos = ctx.emit(G.op.cast(ctx.emit(G.op.greater(x, _s(ctx, x, 0))), ctx.dtype(x)))
    neg = ctx.emit(G.op.cast(ctx.emit(G.op.less(x, _s(ctx, x, 0))), ctx.dtype(x)))
    return ctx.emit(G.op.subtract(ctx.expr(pos), ctx.expr(neg)))


@register("Softplus")
def _softplus(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    # log(1 + exp(x)) overflows for large x: use max(x, 0) + log(1 + exp(-|x|)).
    e = ctx.emit(G.op.exp(ctx.emit(G.op.negative(ctx.emit(G.op.abs(x))))))
    return ctx.emit(G.op.add(ctx.emit(G.op.relu(x)), ctx.emit(G.op.log(ctx.emit(G.op.add(e, _s(ctx, x, 1)))))))


@register("Softsign")
def _softsign(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    return ctx.emit(G.op.divide(x, ctx.emit(G.op.add(ctx.emit(G.op.abs(x)), _s(ctx, x, 1)))))


@register("LeakyRelu")
def _leaky_relu(ctx: Any, node: Any) -> Any:
    return ctx.emit(G.op.leaky_relu(ctx.expr(node.input(0)), float(node.attr("alpha", 0.01))))


@register("PRelu")
def _prelu(ctx: Any, node: Any) -> Any:
    x, slope = ctx.expr(node.input(0)), ctx.expr(node.input(1))
    neg = ctx.emit(G.op.less(x, _s(ctx, x, 0)))
    return ctx.emit(G.op.where(ctx.expr(neg), ctx.emit(G.op.multiply(x, slope)), x))


def _elu_like(ctx: Any, x: Any, alpha: float, scale: float = 1.0) -> Any:
    # expm1, not exp(x) - 1: the subtraction cancels near 0 and float16/bfloat16 keep too few bits for it.
    neg = ctx.emit(G.op.multiply(ctx.emit(G.op.expm1(x)), _s(ctx, x, alpha)))
    out = ctx.emit(G.op.where(ctx.emit(G.op.greater(x, _s(ctx, x, 0))), x, neg))
    return out if scale == 1.0 else ctx.emit(G.op.multiply(out, _s(ctx, x, scale)))


@register("Elu")
def _elu(ctx: Any, node: Any) -> Any:
    return _elu_like(ctx, ctx.expr(node.input(0)), float(node.attr("alpha", 1.0)))


@register("Selu")
def _selu(ctx: Any, node: Any) -> Any:
    return _elu_like(ctx, ctx.expr(node.input(0)), float(node.attr("alpha", 1.67326319217681884765625)),
                     float(node.attr("gamma", 1.05070102214813232421875)))


@register("Celu")
def _celu(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    alpha = float(node.attr("alpha", 1.0))
    scaled = ctx.emit(G.op.divide(x, _s(ctx, x, alpha)))
    neg = ctx.emit(G.op.multiply(ctx.emit(G.op.expm1(scaled)), _s(ctx, x, alpha)))
    return ctx.emit(G.op.add(ctx.emit(G.op.relu(x)), ctx.emit(G.op.minimum(neg, _s(ctx, x, 0)))))


@register("ThresholdedRelu")
def _thresholded_relu(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    cond = ctx.emit(G.op.greater(x, _s(ctx, x, float(node.attr("alpha", 1.0)))))
    return ctx.emit(G.op.where(cond, x, _s(ctx, x, 0)))


@register("HardSigmoid")
def _hard_sigmoid(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    lin = ctx.emit(G.op.add(ctx.emit(G.op.multiply(x, _s(ctx, x, float(node.attr("alpha", 0.2))))),
                            _s(ctx, x, float(node.attr("beta", 0.5)))))
    return ctx.emit(G.op.clip(ctx.expr(lin), 0.0, 1.0))


@register("HardSwish")
def _hard_swish(ctx: Any, node: Any) -> Any:
    return ctx.emit(G.op.hard_swish(ctx.expr(node.input(0))))


@register("Mish")
def _mish(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    sp = _softplus(ctx, node)
    return ctx.emit(G.op.multiply(x, ctx.emit(G.op.tanh(ctx.expr(sp)))))


@register("Gelu", since=20)
def _gelu(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    if node.attr("approximate", "none") == "tanh":
        return ctx.emit(G.op.gelu_tanh(x))
    return ctx.emit(G.op.gelu(x))


@register("Clip", since=1)
def _clip_v1(ctx: Any, node: Any) -> Any:
    return ctx.emit(G.op.clip(ctx.expr(node.input(0)), float(node.attr("min", -math.inf)),
                              float(node.attr("max", math.inf))))


@register("Clip", since=11)
def _clip_v11(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    lo, hi = node.input(1), node.input(2)
    if (lo is None or is_static(lo)) and (hi is None or is_static(hi)) and not is_int_dtype(ctx.dtype(x)):
        a = -math.inf if lo is None else float(as_array(lo))
        b = math.inf if hi is None else float(as_array(hi))
        return ctx.emit(G.op.clip(x, a, b))
    out = x
    if lo is not None:
        out = ctx.expr(ctx.emit(G.op.maximum(out, ctx.expr(lo))))
    if hi is not None:
        out = ctx.expr(ctx.emit(G.op.minimum(out, ctx.expr(hi))))
    return out


@register("Cast")
def _cast(ctx: Any, node: Any) -> Any:
    from .importer import np_dtype

    dtype = np_dtype(int(node.attr("to")))
    x = node.input(0)
    if isinstance(x, np.ndarray) and x.dtype == object:
        if all(isinstance(v, (int, np.integer)) for v in x.reshape(-1)):
            return x.astype(dtype)  # the static part of a shape (e.g. head_dim for the 1/sqrt scale)
        if np.dtype(dtype).kind not in "iu":
            raise node.error(f"Cast of the symbolic shape value {x.tolist()} to {dtype} is not supported; "
                             f"fix the dims with shape_dict")
        return x  # a symbolic shape stays a shape (int64) whatever integer type it is cast to
    return _cast_to(ctx, node, x, dtype)


@register("BitCast", since=26)
def _bitcast(ctx: Any, node: Any) -> Any:
    from .importer import np_dtype

    x, dtype = node.input(0), np_dtype(int(node.attr("to")))
    if ctx.dtype(x) == dtype:
        return x
    return ctx.emit(G.op.unary.bitcast(ctx.expr(x), dtype))   # its shape inference checks the widths


@register("CastLike", since=15)
def _cast_like(ctx: Any, node: Any) -> Any:
    return _cast_to(ctx, node, node.input(0), ctx.dtype(node.input(1)))


def _cast_to(ctx: Any, node: Any, x: Any, dtype: str) -> Any:
    from ingot.ir.dtype import EMULATED_FLOATS

    if ctx.dtype(x) == dtype:
        return x
    if dtype in EMULATED_FLOATS or ctx.dtype(x) in EMULATED_FLOATS:
        # float8/float4 are emulated (bit patterns in bytes); saturate=0 turns overflow into Inf/NaN;
        # round_mode (opset 25) is how a value rounds to the power of two of float8_e8m0fnu.
        return ctx.emit(G.op.unary.cast_emulated(ctx.expr(x), dtype, bool(node.attr("saturate", 1)),
                                                 str(node.attr("round_mode", "up"))))
    return ctx.emit(G.op.cast(ctx.expr(x), dtype))


# -- binary -------------------------------------------------------------------------------------

def _np_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == object or b.dtype == object:
        return a // b  # shape arithmetic: dims are non-negative, so floor == trunc
    if a.dtype.kind in "iu":
        return (np.trunc(a / b)).astype(a.dtype)
    return a / b


def _np_shape_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a == b`` on shape values holding symbolic dims (torch's ``expand(-1)`` export compares a shape with
    -1). A symbolic dim is non-negative, so it differs from a negative int; two dims are equal when they
    are the same expression. Anything else is unknown until run time and stays unsupported."""
    from ingot.ir import PrimExpr, structural_equal

    def eq(x: Any, y: Any) -> bool:
        if not isinstance(x, PrimExpr) and not isinstance(y, PrimExpr):
            return bool(x == y)
        if isinstance(x, PrimExpr) and isinstance(y, PrimExpr) and structural_equal(x, y):
            return True
        other = y if isinstance(x, PrimExpr) else x
        if not isinstance(other, PrimExpr) and int(other) < 0:
            return False
        raise ValueError(f"cannot decide {x} == {y} before run time")

    a, b = np.broadcast_arrays(a, b)
    return np.array([eq(x, y) for x, y in zip(a.reshape(-1), b.reshape(-1))], bool).reshape(a.shape)


def _reciprocal_multiplier(ctx: Any, divisor: Any) -> Any:
    """``1 / divisor`` as a float constant when ``divisor`` is a one-element float constant, else None.

    ONNX ``Div(x, c)`` by such a constant imports as ``multiply(x, 1 / c)``.

    Note (why): a vector divide costs 10-16x a multiply on AVX-512 (BERT's GELU divides every
    FFN activation by sqrt(2)). ORT's Gelu and PyTorch's gelu multiply by 1/sqrt(2); so does
    this. The product differs from the quotient by at most 1 ulp (none when 1/c is a power of
    two); ``from_onnx(..., exact_division=True)`` keeps IEEE division (TVM's default without
    fast-math).
    """
    if getattr(ctx, "exact_division", False) or not isinstance(divisor, G.Constant):
        return None
    value = divisor.data.numpy() if hasattr(divisor.data, "numpy") else np.asarray(divisor.data)
    if value.size != 1 or value.dtype.kind != "f":
        return None
    with np.errstate(divide="ignore", over="ignore"):
        recip = (value.dtype.type(1) / value).astype(value.dtype)
    r = recip.reshape(-1)[0]
    # A zero, infinite or subnormal reciprocal would lose more than an ulp: keep the division.
    if not np.isfinite(r) or abs(r) < np.finfo(value.dtype).tiny:
        return None
    return G.const(recip, str(value.dtype))


_BINARY: dict[str, tuple[Callable, Callable]] = {
    "Add": (G.op.add, lambda a, b: a + b),
    "Sub": (G.op.subtract, lambda a, b: a - b),
    "Mul": (G.op.multiply, lambda a, b: a * b),
    "Div": (G.op.divide, _np_div),
    "Pow": (G.op.power, None),
    "Equal": (G.op.equal, _np_shape_equal),
    "Less": (G.op.less, None),
    "Greater": (G.op.greater, None),
    "LessOrEqual": (G.op.less_equal, None),
    "GreaterOrEqual": (G.op.greater_equal, None),
}


def _binary(builder: Callable, shape_ref: "Callable | None") -> Callable:
    def convert(ctx: Any, node: Any) -> Any:
        a, b = node.input(0), node.input(1)
        if builder is G.op.equal and "string" in (ctx.dtype(a), ctx.dtype(b)):  # a builtin (ops_string)
            from .ops_string import string_equal

            return string_equal(ctx, node)
        if shape_ref is not None and is_static(a) and is_static(b) and (
                as_array(a).dtype == object or as_array(b).dtype == object):
            try:
                out = shape_ref(as_array(a), as_array(b))
            except ValueError as exc:
                raise node.error(f"{exc}; fix the symbolic dims with shape_dict") from None
            if isinstance(out, np.ndarray) and out.dtype == bool:
                return out
            return np.asarray(out, dtype=object)
        ea, eb = ops_dynamic.check_broadcast(ctx, node, ops_dynamic.unify_runtime_dims(ctx, [ctx.expr(a), ctx.expr(b)]))
        if builder is G.op.power and ctx.dtype(ea) != ctx.dtype(eb):
            eb = ctx.expr(ctx.emit(G.op.cast(eb, ctx.dtype(ea))))  # Pow allows a different exponent type
        if builder is G.op.power and is_int_dtype(ctx.dtype(ea)):
            # The C pow is floating-point only: integer powers go through float64 (exact below 2**53).
            dt = ctx.dtype(ea)
            fa, fb = (ctx.expr(ctx.emit(G.op.cast(e, "float64"))) for e in (ea, eb))
            r = ctx.expr(ctx.emit(G.op.round(ctx.expr(ctx.emit(G.op.power(fa, fb))))))
            return ctx.emit(G.op.cast(r, dt))
        if builder is G.op.divide:
            recip = _reciprocal_multiplier(ctx, eb)
            if recip is not None:
                return ctx.emit(G.op.multiply(ea, recip))
        return ctx.emit(builder(ea, eb))

    return convert


for _name, (_builder, _ref) in _BINARY.items():
    register(_name)(_binary(_builder, _ref))


@register("Mod", since=10)
def _mod(ctx: Any, node: Any) -> Any:
    a, b = ctx.expr(node.input(0)), ctx.expr(node.input(1))
    # fmod=1 is C's fmod/% (sign of the dividend), fmod=0 numpy's mod (sign of the divisor). Both are
    # primitive ops: composing them from a division (a - trunc(a / b) * b) gives NaN for an infinite
    # divisor, loses the sign of zero, and rounds the quotient before the subtraction.
    if node.attr("fmod", 0):
        return ctx.emit(G.op.mod(a, b))
    return ctx.emit(G.op.floor_mod(a, b))


def _variadic(builder: Callable, mean: bool = False) -> Callable:
    def convert(ctx: Any, node: Any) -> Any:
        vals = ops_dynamic.check_broadcast(ctx, node, [ctx.expr(v) for v in node.inputs if v is not None])
        acc = vals[0]
        for v in vals[1:]:
            acc = ctx.expr(ctx.emit(builder(acc, v)))
        if mean:
            acc = ctx.emit(G.op.divide(acc, _s(ctx, acc, len(vals))))
        return acc

    return convert


register("Sum")(_variadic(G.op.add))
register("Mean")(_variadic(G.op.add, mean=True))
register("Max")(_variadic(G.op.maximum))
register("Min")(_variadic(G.op.minimum))


@register("Where", since=9)
def _where(ctx: Any, node: Any) -> Any:
    c, a, b = node.input(0), node.input(1), node.input(2)
    if all(is_static(v) for v in (c, a, b)) and any(as_array(v).dtype == object for v in (a, b)):
        return np.where(as_array(c), as_array(a), as_array(b)).astype(object)
    return ctx.emit(G.op.where(*ops_dynamic.check_broadcast(ctx, node, [ctx.expr(c), ctx.expr(a), ctx.expr(b)])))


def _bool_const(value: bool) -> G.Constant:
    return G.const(np.array(value))


@register("Not")
def _not(ctx: Any, node: Any) -> Any:
    return ctx.emit(G.op.equal(ctx.expr(node.input(0)), _bool_const(False)))


@register("And", since=7)
def _and(ctx: Any, node: Any) -> Any:
    a, b = ops_dynamic.check_broadcast(ctx, node, [ctx.expr(node.input(0)), ctx.expr(node.input(1))])
    return ctx.emit(G.op.where(a, b, _bool_const(False)))


@register("Or", since=7)
def _or(ctx: Any, node: Any) -> Any:
    a, b = ops_dynamic.check_broadcast(ctx, node, [ctx.expr(node.input(0)), ctx.expr(node.input(1))])
    return ctx.emit(G.op.where(a, _bool_const(True), b))


@register("Xor", since=7)
def _xor(ctx: Any, node: Any) -> Any:
    a, b = ops_dynamic.check_broadcast(ctx, node, [ctx.expr(node.input(0)), ctx.expr(node.input(1))])
    return ctx.emit(G.op.not_equal(a, b))


@register("IsNaN", since=9)
def _isnan(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    return ctx.emit(G.op.not_equal(x, x))


@register("IsInf", since=10)
def _isinf(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    if pos and neg:
        return ctx.emit(G.op.equal(ctx.emit(G.op.abs(x)), _s(ctx, x, math.inf)))
    if pos:
        return ctx.emit(G.op.equal(x, _s(ctx, x, math.inf)))
    if neg:
        return ctx.emit(G.op.equal(x, _s(ctx, x, -math.inf)))
    return np.zeros([int(d) for d in ctx.shape(x)], dtype=bool)


# -- reductions ---------------------------------------------------------------------------------

_REDUCE = {"ReduceSum": G.op.sum, "ReduceMean": G.op.mean, "ReduceMax": G.op.max, "ReduceMin": G.op.min,
           "ReduceProd": G.op.prod}
# the opset from which `axes` is an input instead of an attribute
_AXES_INPUT_SINCE = {"ReduceSum": 13}


def _reduce_axes(ctx: Any, node: Any, input_since: int) -> "list[int] | None":
    ndim = len(ctx.shape(node.input(0)))
    if node.opset >= input_since:
        axes = static_ints(node.input(1), node, "the `axes` input")
    else:
        axes = node.attr("axes")
    if not axes:
        return [] if node.attr("noop_with_empty_axes", 0) else list(range(ndim))
    return norm_axes(axes, ndim)


def _empty_extremum(node: Any, dtype: str, shape: tuple, axes: list, keep: bool, is_max: bool) -> np.ndarray:
    """The constant result of ReduceMax/ReduceMin over an axis of size 0."""
    out = [1 if a in axes else d for a, d in enumerate(shape) if keep or a not in axes]
    if not all(isinstance(d, int) for d in out):
        raise node.error(f"{node.op_type} over an empty axis needs a static output shape, got {out}; "
                         f"fix the dims with shape_dict")
    dt = np.dtype(dtype)
    if dt.kind == "f":
        value = -np.inf if is_max else np.inf
    elif dt.kind in "iu":
        value = np.iinfo(dt).min if is_max else np.iinfo(dt).max
    else:
        value = not is_max   # bool: max of nothing is False, min is True
    return np.full(out, value, dt)


def _reduce(kind: str) -> Callable:
    def convert(ctx: Any, node: Any) -> Any:
        if node.opset >= _AXES_INPUT_SINCE.get(kind, 18) and node.input(1) is not None and not is_static(
                node.input(1)):  # axes computed at run time
            from .ops_dynamic import dynamic_reduce

            return dynamic_reduce(ctx, node)
        x = ctx.expr(node.input(0))
        axes = _reduce_axes(ctx, node, _AXES_INPUT_SINCE.get(kind, 18))
        keep = bool(node.attr("keepdims", 1))
        if not axes:
            return x
        shape = ctx.shape(x)
        if kind in ("ReduceMax", "ReduceMin") and any(shape[a] == 0 for a in axes):
            # ONNX: the max/min of an empty set is -inf/+inf (the type's lowest/highest for integers);
            # the TE reduction's identity is the finite lowest float, so answer statically.
            return _empty_extremum(node, ctx.dtype(x), shape, axes, keep, kind == "ReduceMax")
        if kind in _REDUCE:
            return ctx.emit(_REDUCE[kind](x, axis=axes, keepdims=keep))
        if kind == "ReduceSumSquare":
            return ctx.emit(G.op.sum(ctx.emit(G.op.multiply(x, x)), axis=axes, keepdims=keep))
        if kind == "ReduceL1":
            return ctx.emit(G.op.sum(ctx.emit(G.op.abs(x)), axis=axes, keepdims=keep))
        if kind == "ReduceL2":
            return ctx.emit(G.op.sqrt(ctx.emit(G.op.sum(ctx.emit(G.op.multiply(x, x)), axis=axes, keepdims=keep))))
        if kind == "ReduceLogSum":
            return ctx.emit(G.op.log(ctx.emit(G.op.sum(x, axis=axes, keepdims=keep))))
        if kind == "ReduceLogSumExp":
            m = ctx.emit(G.op.max(x, axis=axes, keepdims=True))
            s = ctx.emit(G.op.sum(ctx.emit(G.op.exp(ctx.emit(G.op.subtract(x, ctx.expr(m))))), axis=axes,
                                  keepdims=True))
            out = ctx.emit(G.op.add(ctx.emit(G.op.log(ctx.expr(s))), ctx.expr(m)))
            if not keep:
                out = ctx.emit(G.op.squeeze(ctx.expr(out), axis=axes))
            return out
        raise node.error(f"internal: no reduction {kind}")

    return convert


for _kind in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"):
    register(_kind)(_reduce(_kind))
