"""ONNX converters for the optimizers of ``ai.onnx.preview.training``: Adagrad, Adam, Momentum
(standard and Nesterov).

Note: each optimizer updates n tensors at once (inputs ``R, T, X1..Xn, G1..Gn, <state>1..n``; outputs
``X_new1..n, <state>_new1..n``). The update is elementwise, so it imports as a short chain of graph
elementwise ops per tensor, which fusion turns into one kernel per tensor; nothing needs an operator
of its own. The learning-rate schedule (``R``, the step ``T`` and the attributes: decay, bias
corrections) is a scalar computed in float64, as ONNX's reference does, and rounded once to the
tensors' dtype.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("Adam", 1, "ai.onnx.preview.training") is not None
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ingot import graph as G

from ._common import scalar_like
from .importer import register

_DOMAIN = "ai.onnx.preview.training"


def _groups(node: Any, states: int) -> list:
    """``[(X, G, state1, ...), ...]`` per optimized tensor, from the inputs after ``R`` and ``T``."""
    tensors = node.inputs[2:]
    if not tensors or len(tensors) % (2 + states):
        raise node.error(f"takes R, T and then {2 + states} groups of n tensors (X, G and the state), got "
                         f"{len(node.inputs)} inputs")
    n = len(tensors) // (2 + states)
    return [tuple(tensors[k * n + i] for k in range(2 + states)) for i in range(n)]


class _Emitter:
    """Emits one graph op per call (the graph stays in A-normal form: arguments are bound values)."""

    def __init__(self, ctx: Any):
        self.ctx = ctx

    def __getattr__(self, name: str) -> Callable:
        fn = getattr(G.op, name)
        # a folded value comes back as a numpy array: made a constant again for the next op
        return lambda *args: self.ctx.emit(fn(*[self.ctx.expr(a) if isinstance(a, np.ndarray) else a for a in args]))


def _update(ctx: Any, node: Any, states: int, step: Callable) -> list:
    """The outputs ``X_new1..n, state1_new1..n, ...``: ``step(x, g, *state, dtype)`` per tensor gives
    ``(x_new, *state_new)``."""
    per_tensor = []
    for values in _groups(node, states):
        exprs = [ctx.expr(v) for v in values]
        if not exprs[0].struct_info.dtype.is_float:
            raise node.error(f"optimizes floating-point tensors, got X of dtype {exprs[0].struct_info.dtype}")
        per_tensor.append(step(*exprs, str(exprs[0].struct_info.dtype)))
    return [outs[k] for k in range(1 + states) for outs in per_tensor]


def _regularized(e: _Emitter, x: Any, g: Any, norm_coefficient: float) -> Any:
    # the gradient of the L2 term (norm_coefficient / 2) * ||X||^2, added to G
    return e.add(e.multiply(x, norm_coefficient), g) if norm_coefficient else g


@register("Adagrad", since=1, domain=_DOMAIN)
def _adagrad(ctx: Any, node: Any) -> list:
    decay, eps = float(node.attr("decay_factor", 0.0)), float(node.attr("epsilon", 0.0))
    norm = float(node.attr("norm_coefficient", 0.0))
    e = _Emitter(ctx)
    r, t = e.cast(ctx.expr(node.input(0)), "float64"), e.cast(ctx.expr(node.input(1)), "float64")
    rate = e.divide(r, e.add(e.multiply(t, decay), 1.0))          # R / (1 + T * decay_factor)

    def step(x: Any, g: Any, h: Any, dtype: str) -> tuple:
        g = _regularized(e, x, g, norm)
        h_new = e.add(h, e.multiply(g, g))
        scaled = e.multiply(e.cast(rate, dtype), g)
        return e.subtract(x, e.divide(scaled, e.add(e.sqrt(h_new), eps))), h_new

    return _update(ctx, node, 1, step)


@register("Adam", since=1, domain=_DOMAIN)
def _adam(ctx: Any, node: Any) -> list:
    alpha, beta = float(node.attr("alpha", 0.9)), float(node.attr("beta", 0.999))
    eps, norm = float(node.attr("epsilon", 1e-6)), float(node.attr("norm_coefficient", 0.0))
    post = float(node.attr("norm_coefficient_post", 0.0))
    e = _Emitter(ctx)
    r, t = e.cast(ctx.expr(node.input(0)), "float64"), e.cast(ctx.expr(node.input(1)), "float64")
    # bias correction from step 1 on: R * sqrt(1 - beta^T) / (1 - alpha^T); step 0 keeps R
    corrected = e.divide(e.multiply(r, e.sqrt(e.subtract(1.0, e.power(beta, t)))), e.subtract(1.0, e.power(alpha, t)))
    rate = e.where(e.greater(t, 0.0), corrected, r)

    def step(x: Any, g: Any, v: Any, h: Any, dtype: str) -> tuple:
        g = _regularized(e, x, g, norm)
        v_new = e.add(e.multiply(v, alpha), e.multiply(g, 1.0 - alpha))
        h_new = e.add(e.multiply(h, beta), e.multiply(e.multiply(g, g), 1.0 - beta))
        direction = e.divide(v_new, e.add(e.sqrt(h_new), eps))
        x_new = e.subtract(x, e.multiply(e.cast(rate, dtype), direction))
        return (e.multiply(x_new, 1.0 - post) if post else x_new), v_new, h_new

    return _update(ctx, node, 2, step)


@register("Momentum", since=1, domain=_DOMAIN)
def _momentum(ctx: Any, node: Any) -> list:
    alpha, beta = float(node.attr("alpha", 0.0)), float(node.attr("beta", 0.0))
    norm, mode = float(node.attr("norm_coefficient", 0.0)), node.attr("mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise node.error(f"mode must be 'standard' or 'nesterov', got {mode!r}")
    e = _Emitter(ctx)
    r = e.cast(ctx.expr(node.input(0)), "float64")
    later = e.greater(e.cast(ctx.expr(node.input(1)), "float64"), 0.0)

    def step(x: Any, g: Any, v: Any, dtype: str) -> tuple:
        g = _regularized(e, x, g, norm)
        # the gradient's coefficient is 1 at the first step (T == 0), beta after
        coeff = e.where(later, scalar_like(beta, dtype), scalar_like(1.0, dtype))
        v_new = e.add(e.multiply(v, alpha), e.multiply(coeff, g))
        moved = v_new if mode == "standard" else e.add(g, e.multiply(v_new, alpha))
        return e.subtract(x, e.multiply(e.cast(r, dtype), moved)), v_new

    return _update(ctx, node, 1, step)
