"""ONNX converter for ``ai.onnx.preview`` FlexAttention (opset 26 preview): scaled dot-product
attention with grouped K/V heads and user subgraphs that modify the scores and the probabilities.

Note: the ``score_mod`` and ``prob_mod`` attributes are ONNX graphs from one (B, H, L, S) tensor to
another of the same shape. They are imported inline as graph code, exactly as an If branch known at
import time is (`ingot.frontend.onnx.ops_control`): their input is bound to the score (probability)
tensor and their nodes become bindings of ``main``. Their index arithmetic (``Shape``, ``Range``,
``Reshape`` of positions for causal or relative-position masks) folds to constants at import, so what
remains is elementwise work on the scores, which ``FuseOps`` fuses into the Q·Kᵀ matmul's epilogue
(``score_mod``) or the softmax's consumer (``prob_mod``). The computation follows ONNX's function
body of the op: Q and K are each scaled by √scale in their own dtype, scores and probabilities are
computed in ``softmax_precision`` (float32 for float16/float32 inputs, float64 for double), and the
result is cast back.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("FlexAttention", 1, "ai.onnx.preview") is not None
    True
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ingot import graph as G

from ._common import scalar_like
from .importer import np_dtype, register
from .ops_control import _convert_graph  # a subgraph's nodes converted inline, in a scope of their own


def _grouped(ctx: Any, node: Any, kv: Any, q_heads: int, what: str) -> Any:
    """``kv`` (B, Hkv, S, D) with each head repeated for its group of query heads: (B, Hq, S, D)."""
    b, heads, s, d = ctx.shape(kv)
    if heads == q_heads:
        return kv
    if not isinstance(heads, int) or not isinstance(q_heads, int) or q_heads % heads:
        raise node.error(f"Q's {q_heads} heads must be a multiple of {what}'s {heads} heads (grouped-query "
                         f"attention), and both must be static")
    wide = ctx.emit(G.op.broadcast_to(ctx.emit(G.op.expand_dims(kv, 2)), (b, heads, q_heads // heads, s, d)))
    return ctx.emit(G.op.reshape(wide, (b, q_heads, s, d)))


def _modifier(ctx: Any, node: Any, name: str, value: Any) -> Any:
    """``value`` through the subgraph attribute ``name`` (unchanged when the node has none)."""
    graph = node.attr(name)
    if graph is None:
        return value
    if len(graph.input) != 1 or len(graph.output) != 1:
        raise node.error(f"{name} must take one tensor and return one, it has {len(graph.input)} inputs and "
                         f"{len(graph.output)} outputs")
    scope = dict(ctx.scope or {})
    scope[graph.input[0].name] = value
    opset = (ctx.domain_versions or {}).get("", node.opset)   # the subgraph's nodes are ONNX's own ops
    (out,) = _convert_graph(ctx, graph, scope, opset)
    out = ctx.expr(out)
    if ctx.shape(out) != ctx.shape(value) or ctx.dtype(out) != ctx.dtype(value):
        raise node.error(f"{name} must return a tensor of the shape and dtype it takes, {ctx.shape(value)} "
                         f"{ctx.dtype(value)}, it returns {ctx.shape(out)} {ctx.dtype(out)}")
    return out


@register("FlexAttention", since=1, domain="ai.onnx.preview")
def _flex_attention(ctx: Any, node: Any) -> Any:
    q, k, v = (ctx.expr(node.input(i)) for i in range(3))
    shapes = [ctx.shape(t) for t in (q, k, v)]
    if any(s is None or len(s) != 4 for s in shapes):
        raise node.error(f"Q, K and V must be rank 4 (batch, heads, sequence, head size), got {shapes}")
    dtype = ctx.dtype(q)
    if dtype not in ("float16", "float32", "float64", "bfloat16"):
        raise node.error(f"Q, K and V must be floating point, got {dtype}")
    precision = node.attr("softmax_precision")
    work = np_dtype(precision) if precision else ("float64" if dtype == "float64" else "float32")
    head = shapes[0][3]
    if node.attr("scale") is None and not isinstance(head, int):
        raise node.error(f"the default scale 1/sqrt(head size) needs a static head size, got {head}")
    scale = float(node.attr("scale")) if node.attr("scale") is not None else 1.0 / math.sqrt(head)
    # √scale on each side, rounded to the inputs' dtype, as ONNX's function body does (float16-safe)
    root = scalar_like(np.sqrt(np.float32(scale)), dtype)
    k = _grouped(ctx, node, k, shapes[0][1], "K")
    v = _grouped(ctx, node, v, shapes[0][1], "V")
    kt = ctx.emit(G.op.permute_dims(ctx.emit(G.op.multiply(k, root)), (0, 1, 3, 2)))
    scores = ctx.emit(G.op.matmul(ctx.emit(G.op.multiply(q, root)), kt))
    if work != dtype:
        scores = ctx.emit(G.op.cast(scores, work))
    scores = _modifier(ctx, node, "score_mod", scores)
    probs = _modifier(ctx, node, "prob_mod", ctx.emit(G.op.softmax(scores, -1)))
    if ctx.dtype(v) != work:
        v = ctx.emit(G.op.cast(v, work))
    out = ctx.emit(G.op.matmul(probs, v))
    return ctx.emit(G.op.cast(out, dtype)) if work != dtype else out
