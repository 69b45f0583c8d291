"""PyTorch converters: elementwise math, activations, comparisons, ``where``, reductions, casts.

Note: PyTorch promotes types (an int tensor divided by an int is float; an int tensor plus a
Python float is float32) while Ingot's binary operators want equal dtypes. Arithmetic converters
therefore cast every operand to the dtype PyTorch recorded for the result (``node.out_dtype``);
comparisons compute in ``torch.result_type`` of their operands. Python scalars become 0-d
constants, which `LegalizeOps` inlines into the kernels.

Example:
    >>> from ingot.frontend.torch.importer import get_converter
    >>> get_converter("aten.add.Tensor") is not None
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ingot import graph as G

from .importer import register


def tensor(ctx: Any, value: Any, dtype: "str | None" = None) -> G.Expr:
    """A graph expression for a tensor or scalar operand, cast to ``dtype`` when given.

    Example: ``tensor(ctx, node.arg("self"), node.out_dtype)``.
    """
    if isinstance(value, (bool, int, float, np.generic)):
        return ctx.expr(value, dtype)
    expr = ctx.expr(value)
    if dtype is not None and str(expr.struct_info.dtype) != dtype:
        return ctx.expr(ctx.emit(G.op.cast(expr, dtype)))
    return expr


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.generic))


def _result_type(ctx: Any, *operands: Any) -> str:
    """``torch.result_type`` of tensor/scalar operands (for comparisons, whose result is bool)."""
    import torch

    from ._common import torch_dtype_name

    probes = []
    for v in operands:
        if _is_scalar(v):
            probes.append(v.item() if isinstance(v, np.generic) else v)
        else:
            dt = getattr(torch, ctx.dtype(v))
            probes.append(torch.empty((1,) * len(ctx.shape(v)), dtype=dt))
    if len(probes) == 1:
        return torch_dtype_name(probes[0].dtype)
    return torch_dtype_name(torch.result_type(*probes[:2]))


# -- unary -----------------------------------------------------------------------------------------

_UNARY: dict[str, Callable] = {
    "aten.relu.default": G.op.relu, "aten.sigmoid.default": G.op.sigmoid, "aten.tanh.default": G.op.tanh,
    "aten.exp.default": G.op.exp, "aten.log.default": G.op.log, "aten.sqrt.default": G.op.sqrt,
    "aten.rsqrt.default": G.op.rsqrt, "aten.erf.default": G.op.erf, "aten.sin.default": G.op.sin,
    "aten.cos.default": G.op.cos, "aten.neg.default": G.op.negative, "aten.abs.default": G.op.abs,
    "aten.floor.default": G.op.floor, "aten.ceil.default": G.op.ceil, "aten.round.default": G.op.round,
    "aten.silu.default": G.op.silu, "aten.hardswish.default": G.op.hard_swish,
}


def _unary(fn: Callable) -> Callable:
    def convert(ctx: Any, node: Any) -> Any:
        return ctx.emit(fn(tensor(ctx, node.arg("self"), node.out_dtype)))

    return convert


for _key, _fn in _UNARY.items():
    register(_key)(_unary(_fn))


@register("aten.gelu.default")
def _gelu(ctx: Any, node: Any) -> Any:
    approximate = node.arg("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise node.error(f"approximate={approximate!r} is not supported; use 'none' or 'tanh'")
    x = tensor(ctx, node.arg("self"), node.out_dtype)
    return ctx.emit(G.op.gelu(x) if approximate == "none" else G.op.gelu_tanh(x))


def _bounds(dtype: str, lo: Any, hi: Any) -> tuple[float, float]:
    """Clip bounds; a missing bound is the dtype's extreme (integer clips must stay finite)."""
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return (float(info.min) if lo is None else float(lo)), (float(info.max) if hi is None else float(hi))
    return (-math.inf if lo is None else float(lo)), (math.inf if hi is None else float(hi))


@register("aten.hardtanh.default")
def _hardtanh(ctx: Any, node: Any) -> Any:
    return ctx.emit(G.op.clip(tensor(ctx, node.arg("self")), float(node.arg("min_val")), float(node.arg("max_val"))))


@register("aten.relu6.default")
def _relu6(ctx: Any, node: Any) -> Any:
    return ctx.emit(G.op.clip(tensor(ctx, node.arg("self")), 0.0, 6.0))


@register("aten.clamp.default", "aten.clamp_min.default", "aten.clamp_max.default")
def _clamp(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"), node.out_dtype)
    lo = node.arg("min", None) if node.key != "aten.clamp_max.default" else None
    hi = node.arg("max", None) if node.key != "aten.clamp_min.default" else None
    for name, bound in (("min", lo), ("max", hi)):
        if bound is not None and not _is_scalar(bound):
            raise node.error(f"a tensor-valued clamp {name} is not supported; use a Python number")
    return ctx.emit(G.op.clip(x, *_bounds(node.out_dtype, lo, hi)))


@register("aten.hardsigmoid.default")
def _hardsigmoid(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    dtype = str(x.struct_info.dtype)
    shifted = ctx.emit(G.op.add(ctx.expr(ctx.emit(G.op.multiply(x, ctx.expr(1.0 / 6.0, dtype)))),
                                ctx.expr(0.5, dtype)))
    return ctx.emit(G.op.clip(ctx.expr(shifted), 0.0, 1.0))


@register("aten.leaky_relu.default")
def _leaky_relu(ctx: Any, node: Any) -> Any:
    return ctx.emit(G.op.leaky_relu(tensor(ctx, node.arg("self")), float(node.arg("negative_slope"))))


@register("aten.softplus.default")
def _softplus(ctx: Any, node: Any) -> Any:
    # softplus(x) = log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (as PyTorch).
    x = tensor(ctx, node.arg("self"))
    dtype = str(x.struct_info.dtype)
    beta, threshold = float(node.arg("beta")), float(node.arg("threshold"))
    bx = ctx.expr(ctx.emit(G.op.multiply(x, ctx.expr(beta, dtype))))
    soft = ctx.emit(G.op.log(ctx.expr(ctx.emit(G.op.add(ctx.expr(ctx.emit(G.op.exp(bx))), ctx.expr(1.0, dtype))))))
    soft = ctx.emit(G.op.divide(ctx.expr(soft), ctx.expr(beta, dtype)))
    big = ctx.emit(G.op.greater(bx, ctx.expr(threshold, dtype)))
    return ctx.emit(G.op.where(ctx.expr(big), x, ctx.expr(soft)))


@register("aten.reciprocal.default")
def _reciprocal(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"), node.out_dtype)
    return ctx.emit(G.op.divide(ctx.expr(1.0, node.out_dtype), x))


@register("aten.square.default")
def _square(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"), node.out_dtype)
    return ctx.emit(G.op.multiply(x, x))


# -- binary ----------------------------------------------------------------------------------------


def _binary(fn: Callable, scale_arg: "str | None" = None, reverse: bool = False) -> Callable:
    def convert(ctx: Any, node: Any) -> Any:
        dtype = node.out_dtype
        a, b = node.arg("self"), node.arg("other")
        if reverse:
            a, b = b, a
        ea, eb = tensor(ctx, a, dtype), tensor(ctx, b, dtype)
        alpha = node.arg(scale_arg) if scale_arg else 1
        if alpha is not None and alpha != 1:
            eb = ctx.expr(ctx.emit(G.op.multiply(eb, ctx.expr(alpha, dtype))))
        return ctx.emit(fn(ea, eb))

    return convert


register("aten.add.Tensor", "aten.add.Scalar")(_binary(G.op.add, "alpha"))
register("aten.sub.Tensor", "aten.sub.Scalar")(_binary(G.op.subtract, "alpha"))
register("aten.rsub.Scalar", "aten.rsub.Tensor")(_binary(G.op.subtract, "alpha", reverse=True))
register("aten.mul.Tensor", "aten.mul.Scalar")(_binary(G.op.multiply))
register("aten.div.Tensor", "aten.div.Scalar")(_binary(G.op.divide))
register("aten.maximum.default")(_binary(G.op.maximum))
register("aten.minimum.default")(_binary(G.op.minimum))


@register("aten.div.Tensor_mode", "aten.div.Scalar_mode", "aten.floor_divide.default")
def _div_mode(ctx: Any, node: Any) -> Any:
    mode = "floor" if node.key == "aten.floor_divide.default" else node.arg("rounding_mode", None)
    dtype = node.out_dtype
    a, b = tensor(ctx, node.arg("self"), dtype), tensor(ctx, node.arg("other"), dtype)
    is_int = np.dtype(dtype).kind in "iu"
    if mode is None or (mode == "trunc" and is_int):
        return ctx.emit(G.op.divide(a, b))  # integer divide truncates, as C and PyTorch's trunc mode
    if mode == "floor":
        if is_int:
            return ctx.emit(G.op.floor_divide(a, b))
        return ctx.emit(G.op.floor(ctx.expr(ctx.emit(G.op.divide(a, b)))))
    if mode == "trunc":
        q = ctx.expr(ctx.emit(G.op.divide(a, b)))
        neg = ctx.expr(ctx.emit(G.op.less(q, ctx.expr(0.0, dtype))))
        return ctx.emit(G.op.where(neg, ctx.expr(ctx.emit(G.op.ceil(q))), ctx.expr(ctx.emit(G.op.floor(q)))))
    raise node.error(f"rounding_mode={mode!r} is not supported (use None, 'floor' or 'trunc')")


@register("aten.pow.Tensor_Scalar")
def _pow_scalar(ctx: Any, node: Any) -> Any:
    dtype = node.out_dtype
    x, exponent = tensor(ctx, node.arg("self"), dtype), node.arg("exponent")
    # Common exponents as cheaper ops (and exact for negative bases, unlike exp(e log x)).
    if exponent == 1:
        return x
    if exponent == 2:
        return ctx.emit(G.op.multiply(x, x))
    if exponent == 0.5:
        return ctx.emit(G.op.sqrt(x))
    if exponent == -0.5:
        return ctx.emit(G.op.rsqrt(x))
    if exponent == -1:
        return ctx.emit(G.op.divide(ctx.expr(1.0, dtype), x))
    return ctx.emit(G.op.power(x, ctx.expr(exponent, dtype)))


@register("aten.pow.Scalar", "aten.pow.Tensor_Tensor")
def _pow_tensor(ctx: Any, node: Any) -> Any:
    dtype = node.out_dtype
    return ctx.emit(G.op.power(tensor(ctx, node.arg("self"), dtype), tensor(ctx, node.arg("exponent"), dtype)))


def _compare(fn: Callable) -> Callable:
    def convert(ctx: Any, node: Any) -> Any:
        a, b = node.arg("self"), node.arg("other")
        dtype = _result_type(ctx, a, b)
        return ctx.emit(fn(tensor(ctx, a, dtype), tensor(ctx, b, dtype)))

    return convert


for _name, _fn in (("eq", G.op.equal), ("ne", G.op.not_equal), ("lt", G.op.less), ("le", G.op.less_equal),
                   ("gt", G.op.greater), ("ge", G.op.greater_equal)):
    register(f"aten.{_name}.Tensor", f"aten.{_name}.Scalar")(_compare(_fn))


@register("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def _where(ctx: Any, node: Any) -> Any:
    dtype = node.out_dtype
    cond = tensor(ctx, node.arg("condition"), "bool")
    return ctx.emit(G.op.where(cond, tensor(ctx, node.arg("self"), dtype), tensor(ctx, node.arg("other"), dtype)))


@register("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def _masked_fill(ctx: Any, node: Any) -> Any:
    dtype = node.out_dtype
    value = node.arg("value")
    fill = ctx.expr(np.asarray(value).astype(dtype)) if not isinstance(value, G.Expr) else tensor(ctx, value, dtype)
    mask = tensor(ctx, node.arg("mask"), "bool")
    return ctx.emit(G.op.where(mask, fill, tensor(ctx, node.arg("self"), dtype)))


# -- reductions ------------------------------------------------------------------------------------


def _dims(value: Any) -> "tuple | None":
    """A reduction's ``dim`` argument: None/[] → all axes."""
    if value is None:
        return None
    if isinstance(value, int):
        return (value,)
    value = tuple(value)
    return value or None


def _reduce(fn: Callable, has_dim: bool = True) -> Callable:
    def convert(ctx: Any, node: Any) -> Any:
        x = tensor(ctx, node.arg("self"), node.out_dtype if fn in (G.op.sum, G.op.mean, G.op.prod) else None)
        axis = _dims(node.arg("dim")) if has_dim else None
        keepdims = bool(node.arg("keepdim", False)) if has_dim else False
        return ctx.emit(fn(x, axis=axis, keepdims=keepdims))

    return convert


register("aten.sum.dim_IntList")(_reduce(G.op.sum))
register("aten.sum.default")(_reduce(G.op.sum, has_dim=False))
register("aten.mean.dim")(_reduce(G.op.mean))
register("aten.mean.default")(_reduce(G.op.mean, has_dim=False))
register("aten.prod.dim_int")(_reduce(G.op.prod))
register("aten.prod.default")(_reduce(G.op.prod, has_dim=False))
register("aten.amax.default")(_reduce(G.op.max))
register("aten.amin.default")(_reduce(G.op.min))
register("aten.max.default")(_reduce(G.op.max, has_dim=False))
register("aten.min.default")(_reduce(G.op.min, has_dim=False))


@register("aten.max.dim", "aten.min.dim")
def _max_dim(ctx: Any, node: Any) -> Any:
    fn = G.op.max if node.key == "aten.max.dim" else G.op.min
    values = ctx.emit(fn(tensor(ctx, node.arg("self")), axis=(int(node.arg("dim")),),
                         keepdims=bool(node.arg("keepdim", False))))
    # Output 1 (the indices, an argmax) has no graph operator yet; getitem reports it if used.
    return (values, None)


@register("aten.var.correction", "aten.var.dim", "aten.std.correction", "aten.std.dim")
def _var(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"), node.out_dtype)
    shape = ctx.shape(x)
    axes = _dims(node.arg("dim"))
    axes = tuple(range(len(shape))) if axes is None else tuple(a % len(shape) for a in axes)
    if node.key.endswith(".dim"):
        correction = 1 if node.arg("unbiased", True) else 0
    else:
        correction = node.arg("correction", None)
        correction = 1 if correction is None else correction
    count = 1
    for a in axes:
        if not isinstance(shape[a], int):
            raise node.error(f"variance over the symbolic axis {a} ({shape[a]}) is not supported; export with a "
                             f"static size for it")
        count *= shape[a]
    keepdim = bool(node.arg("keepdim", False))
    dtype = node.out_dtype
    # var = sum((x - mean)^2) / (n - correction), the two-pass form (numerically like PyTorch).
    mean = ctx.expr(ctx.emit(G.op.mean(x, axis=axes, keepdims=True)))
    centered = ctx.expr(ctx.emit(G.op.subtract(x, mean)))
    squares = ctx.expr(ctx.emit(G.op.multiply(centered, centered)))
    total = ctx.expr(ctx.emit(G.op.sum(squares, axis=axes, keepdims=keepdim)))
    var = ctx.emit(G.op.divide(total, ctx.expr(float(max(count - correction, 0)), dtype)))
    return ctx.emit(G.op.sqrt(ctx.expr(var))) if node.key.startswith("aten.std") else var


# -- casts -----------------------------------------------------------------------------------------


@register("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device", "aten.type_as.default",
          "aten.to.other")
def _to(ctx: Any, node: Any) -> Any:
    return tensor(ctx, node.arg("self"), node.out_dtype)


@register("aten.cumsum.default")
def _cumsum(ctx: Any, node: Any) -> Any:
    return ctx.emit(G.op.cumsum(tensor(ctx, node.arg("self"), node.out_dtype), axis=int(node.arg("dim"))))


@register("aten.remainder.Scalar", "aten.remainder.Tensor")
def _remainder(ctx: Any, node: Any) -> Any:
    # Python's modulo (the sign of the divisor): a - floor(a / b) * b.
    dtype = node.out_dtype
    a, b = tensor(ctx, node.arg("self"), dtype), tensor(ctx, node.arg("other"), dtype)
    if np.dtype(dtype).kind in "iu":
        q = ctx.expr(ctx.emit(G.op.floor_divide(a, b)))
    else:
        q = ctx.expr(ctx.emit(G.op.floor(ctx.expr(ctx.emit(G.op.divide(a, b))))))
    return ctx.emit(G.op.subtract(a, ctx.expr(ctx.emit(G.op.multiply(q, b)))))


@register("aten.elu.default")
def _elu(ctx: Any, node: Any) -> Any:
    # elu(x) = scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1)).
    x = tensor(ctx, node.arg("self"))
    dtype = str(x.struct_info.dtype)
    alpha, scale, input_scale = (float(node.arg(n)) for n in ("alpha", "scale", "input_scale"))
    scaled = x if input_scale == 1 else ctx.expr(ctx.emit(G.op.multiply(x, ctx.expr(input_scale, dtype))))
    neg = ctx.expr(ctx.emit(G.op.subtract(ctx.expr(ctx.emit(G.op.exp(scaled))), ctx.expr(1.0, dtype))))
    neg = ctx.expr(ctx.emit(G.op.multiply(neg, ctx.expr(alpha, dtype))))
    y = ctx.expr(ctx.emit(G.op.where(ctx.expr(ctx.emit(G.op.greater(x, ctx.expr(0.0, dtype)))), x, neg)))
    return y if scale == 1 else ctx.emit(G.op.multiply(y, ctx.expr(scale, dtype)))


@register("aten.linalg_vector_norm.default")
def _vector_norm(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"), node.out_dtype)
    order, axis, keepdims = float(node.arg("ord")), _dims(node.arg("dim")), bool(node.arg("keepdim"))
    if order == 2:
        total = ctx.expr(ctx.emit(G.op.sum(ctx.expr(ctx.emit(G.op.multiply(x, x))), axis=axis, keepdims=keepdims)))
        return ctx.emit(G.op.sqrt(total))
    if order == 1:
        return ctx.emit(G.op.sum(ctx.expr(ctx.emit(G.op.abs(x))), axis=axis, keepdims=keepdims))
    if order == math.inf:
        return ctx.emit(G.op.max(ctx.expr(ctx.emit(G.op.abs(x))), axis=axis, keepdims=keepdims))
    raise node.error(f"vector norm of order {order} is not supported (1, 2 and inf are)")
