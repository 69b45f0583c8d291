"""PyTorch converters: convolution, linear/matmul, normalizations, pooling, softmax, attention,
embedding, and the identity ops of inference (dropout, clone, contiguous).

Note: the graph layer has 2-D convolution and pooling (NCHW); 1-D convolutions are imported as
2-D with a unit height (``expand_dims`` before, ``squeeze`` after). ``ceil_mode`` becomes extra end
padding (static spatial sizes needed). ``scaled_dot_product_attention`` is decomposed into
``matmul → scale → mask → softmax → matmul`` (TVM does the same when no fused attention kernel
is offloaded). ``addmm`` with a constant ``mat2`` — the shape ``torch.export`` gives ``nn.Linear``
after decomposition — becomes ``linear`` on the transposed weight, the form the dense kernels expect.

Example:
    >>> from ingot.frontend.torch.importer import get_converter
    >>> get_converter("aten.convolution.default") is not None
    True
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ingot import graph as G

from .importer import register
from .ops_math import tensor


def _ints(value: Any, n: int, what: str, node: Any) -> list[int]:
    if isinstance(value, int):
        return [value] * n
    value = [int(v) for v in value]
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise node.error(f"{what} must have {n} entries, got {value}")
    return value


# -- convolution -----------------------------------------------------------------------------------


def _conv(ctx: Any, node: Any, x: Any, w: Any, b: Any, stride: Any, padding: Any, dilation: Any,
          groups: int) -> Any:
    x = tensor(ctx, x)
    n = len(ctx.shape(x)) - 2
    if n not in (1, 2):
        raise node.error(f"only 1-D and 2-D convolutions are supported, this one is {n}-D "
                         f"(input shape {tuple(map(str, ctx.shape(x)))})")
    kernel = list(ctx.shape(w)[2:])
    stride, dilation = _ints(stride, n, "stride", node), _ints(dilation, n, "dilation", node)
    if isinstance(padding, str):
        if padding == "valid":
            lo = hi = [0] * n
        elif padding == "same":
            # PyTorch puts the odd element of the total padding at the end.
            total = [d * (k - 1) for d, k in zip(dilation, kernel)]
            lo = [t // 2 for t in total]
            hi = [t - t // 2 for t in total]
        else:
            raise node.error(f"padding={padding!r} is not supported; use 'valid', 'same' or integers")
    else:
        lo = hi = _ints(padding, n, "padding", node)
    if n == 1:
        # 1-D as 2-D with a unit height: (N, C, L) → (N, C, 1, L).
        x = ctx.expr(ctx.emit(G.op.expand_dims(x, 2)))
        w = np.expand_dims(w, 2) if ctx.is_static(w) else ctx.expr(ctx.emit(G.op.expand_dims(ctx.expr(w), 2)))
        stride, dilation = [1] + stride, [1] + dilation
        pads = (0, lo[0], 0, hi[0])
    else:
        pads = (lo[0], lo[1], hi[0], hi[1])
    y = ctx.expr(ctx.emit(G.op.conv2d(x, ctx.expr(w), strides=stride, padding=pads, dilation=dilation,
                                      groups=int(groups))))
    if b is not None:
        if ctx.is_static(b):
            bias = ctx.expr(np.asarray(ctx.static(b)).reshape(-1, 1, 1))
        else:
            bias = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(b), (-1, 1, 1))))
        y = ctx.expr(ctx.emit(G.op.add(y, bias)))
    if n == 1:
        return ctx.emit(G.op.squeeze(y, 2))
    return y


@register("aten.convolution.default")
def _convolution(ctx: Any, node: Any) -> Any:
    if node.arg("transposed"):
        raise node.error("transposed convolution (ConvTranspose) has no graph operator yet; it needs "
                         "conv2d_transpose in ingot/graph/op/nn.py")
    return _conv(ctx, node, node.arg("input"), node.arg("weight"), node.arg("bias"), node.arg("stride"),
                 node.arg("padding"), node.arg("dilation"), node.arg("groups"))


@register("aten.conv2d.default", "aten.conv1d.default", "aten.conv2d.padding", "aten.conv1d.padding")
def _conv_nd(ctx: Any, node: Any) -> Any:
    return _conv(ctx, node, node.arg("input"), node.arg("weight"), node.arg("bias"), node.arg("stride"),
                 node.arg("padding"), node.arg("dilation"), node.arg("groups"))


# -- linear algebra ----------------------------------------------------------------------------------


@register("aten.linear.default")
def _linear(ctx: Any, node: Any) -> Any:
    bias = node.arg("bias")
    return ctx.emit(G.op.linear(tensor(ctx, node.arg("input")), ctx.expr(node.arg("weight")),
                                None if bias is None else ctx.expr(bias)))


@register("aten.mm.default", "aten.bmm.default", "aten.matmul.default")
def _matmul(ctx: Any, node: Any) -> Any:
    other = node.arg("mat2") if node.key != "aten.matmul.default" else node.arg("other")
    return ctx.emit(G.op.matmul(tensor(ctx, node.arg("self")), ctx.expr(other)))


@register("aten.addmm.default")
def _addmm(ctx: Any, node: Any) -> Any:
    bias, mat1, mat2 = node.arg("self"), tensor(ctx, node.arg("mat1")), node.arg("mat2")
    beta, alpha = node.arg("beta"), node.arg("alpha")
    dtype = node.out_dtype
    bias_static = ctx.static(bias)
    if ctx.is_static(mat2) and alpha == 1 and beta == 1 and (bias_static is None or bias_static.ndim == 1):
        weight = np.ascontiguousarray(ctx.static(mat2).T)
        if bias_static is not None and bias_static.shape[0] == weight.shape[0]:
            return ctx.emit(G.op.linear(mat1, ctx.expr(weight), ctx.expr(bias_static)))
        y = ctx.expr(ctx.emit(G.op.linear(mat1, ctx.expr(weight))))
    else:
        y = ctx.expr(ctx.emit(G.op.matmul(mat1, ctx.expr(mat2))))
        if alpha != 1:
            y = ctx.expr(ctx.emit(G.op.multiply(y, ctx.expr(alpha, dtype))))
    if beta == 0:
        return y
    b = tensor(ctx, bias, dtype)
    if beta != 1:
        b = ctx.expr(ctx.emit(G.op.multiply(b, ctx.expr(beta, dtype))))
    return ctx.emit(G.op.add(y, b))


# -- normalizations ----------------------------------------------------------------------------------


def _affine(ctx: Any, value: Any, shape: Sequence[int], fill: float, dtype: str, node: Any) -> G.Expr:
    """A norm's weight/bias, or ones/zeros when the module has none (``affine=False``)."""
    if value is not None:
        return ctx.expr(value)
    if not all(isinstance(d, int) for d in shape):
        raise node.error(f"a normalization without weight over symbolic sizes {shape} is not supported")
    return ctx.expr(np.full(tuple(shape), fill, dtype=dtype))


def _batch_norm(ctx: Any, node: Any, training: bool) -> Any:
    if training:
        raise node.error("batch norm in training mode; call module.eval() before torch.export.export")
    x = tensor(ctx, node.arg("input"))
    dtype = str(x.struct_info.dtype)
    channels = (ctx.shape(x)[1],)
    mean, var = node.arg("running_mean"), node.arg("running_var")
    if mean is None or var is None:
        raise node.error("batch norm without running statistics (track_running_stats=False) is not supported")
    return ctx.emit(G.op.batch_norm(x, _affine(ctx, node.arg("weight"), channels, 1.0, dtype, node),
                                    _affine(ctx, node.arg("bias"), channels, 0.0, dtype, node), ctx.expr(mean),
                                    ctx.expr(var), axis=1, epsilon=float(node.arg("eps"))))


@register("aten.batch_norm.default")
def _batch_norm_default(ctx: Any, node: Any) -> Any:
    return _batch_norm(ctx, node, bool(node.arg("training")))


@register("aten._native_batch_norm_legit_no_training.default")
def _batch_norm_no_training(ctx: Any, node: Any) -> Any:
    # Outputs 1 and 2 (saved mean / inverse std) matter only for training.
    return (_batch_norm(ctx, node, False), None, None)


def _layer_norm(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("input"))
    dtype = str(x.struct_info.dtype)
    normalized = [int(d) for d in node.arg("normalized_shape")]
    axes = tuple(range(-len(normalized), 0))
    return ctx.emit(G.op.layer_norm(x, _affine(ctx, node.arg("weight"), normalized, 1.0, dtype, node),
                                    _affine(ctx, node.arg("bias"), normalized, 0.0, dtype, node), axes=axes,
                                    epsilon=float(node.arg("eps"))))


@register("aten.layer_norm.default")
def _layer_norm_default(ctx: Any, node: Any) -> Any:
    return _layer_norm(ctx, node)


@register("aten.native_layer_norm.default")
def _native_layer_norm(ctx: Any, node: Any) -> Any:
    return (_layer_norm(ctx, node), None, None)


@register("aten.group_norm.default", "aten.native_group_norm.default")
def _group_norm(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("input"))
    dtype = str(x.struct_info.dtype)
    native = node.key == "aten.native_group_norm.default"
    groups = int(node.arg("group") if native else node.arg("num_groups"))
    channels = (ctx.shape(x)[1],)
    y = ctx.emit(G.op.group_norm(x, _affine(ctx, node.arg("weight"), channels, 1.0, dtype, node),
                                 _affine(ctx, node.arg("bias"), channels, 0.0, dtype, node), groups,
                                 float(node.arg("eps"))))
    return (y, None, None) if native else y


# -- pooling -------------------------------------------------------------------------------------------


def _ceil_extra(node: Any, sizes: Sequence[Any], kernel: list, stride: list, dilation: list, pad: list) -> list:
    """Extra end padding that turns floor-mode output sizes into PyTorch's ``ceil_mode=True`` sizes
    (the last window must start inside the input or the left padding)."""
    extra = []
    for size, k, s, d, p in zip(sizes, kernel, stride, dilation, pad):
        if not isinstance(size, int):
            raise node.error("ceil_mode=True needs static spatial sizes; export with static height/width")
        eff = (k - 1) * d + 1
        out = -(-(size + 2 * p - eff) // s) + 1
        if (out - 1) * s >= size + p:
            out -= 1
        extra.append(max((out - 1) * s + eff - (size + 2 * p), 0))
    return extra


def _pool_args(ctx: Any, node: Any, x: Any, with_dilation: bool) -> tuple:
    if len(ctx.shape(x)) != 4:
        raise node.error(f"only 2-D pooling of NCHW tensors is supported, got shape {ctx.shape(x)}")
    kernel = _ints(node.arg("kernel_size"), 2, "kernel_size", node)
    stride = node.arg("stride")
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _ints(stride, 2, "stride", node)
    pad = _ints(node.arg("padding"), 2, "padding", node)
    dilation = _ints(node.arg("dilation"), 2, "dilation", node) if with_dilation else [1, 1]
    extra = [0, 0]
    if node.arg("ceil_mode"):
        extra = _ceil_extra(node, ctx.shape(x)[2:], kernel, stride, dilation, pad)
    return kernel, stride, (pad[0], pad[1], pad[0] + extra[0], pad[1] + extra[1]), dilation, extra


@register("aten.max_pool2d.default", "aten.max_pool2d_with_indices.default")
def _max_pool2d(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    kernel, stride, pads, dilation, _ = _pool_args(ctx, node, x, True)
    y = ctx.emit(G.op.max_pool2d(x, kernel, stride, pads, dilation))
    return (y, None) if node.key.endswith("with_indices.default") else y


@register("aten.avg_pool2d.default")
def _avg_pool2d(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    if node.arg("divisor_override") is not None:
        raise node.error("avg_pool2d with divisor_override is not supported")
    kernel, stride, pads, dilation, extra = _pool_args(ctx, node, x, False)
    include = bool(node.arg("count_include_pad"))
    if include and any(extra):
        raise node.error("avg_pool2d with ceil_mode=True and count_include_pad=True on sizes where ceil mode adds "
                         "a partial window is not supported; use count_include_pad=False or ceil_mode=False")
    return ctx.emit(G.op.avg_pool2d(x, kernel, stride, pads, dilation, count_include_pad=include))


@register("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default")
def _adaptive_avg_pool2d(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    shape = ctx.shape(x)
    out = _ints(node.arg("output_size"), 2, "output_size", node)
    if out == [1, 1]:
        return ctx.emit(G.op.global_avg_pool2d(x))
    h, w = shape[-2], shape[-1]
    if not (isinstance(h, int) and isinstance(w, int)):
        raise node.error(f"adaptive_avg_pool2d to {out[0]}x{out[1]} needs a static input size, got {h}x{w}")
    if h % out[0] == 0 and w % out[1] == 0:
        kernel = [h // out[0], w // out[1]]
        return ctx.emit(G.op.avg_pool2d(x, kernel, kernel))
    # Uneven bins (PyTorch: bin i covers [floor(i*H/oh), ceil((i+1)*H/oh))): one mean per bin.
    rows = []
    for i in range(out[0]):
        h0, h1 = (i * h) // out[0], -(-((i + 1) * h) // out[0])
        cells = []
        for j in range(out[1]):
            w0, w1 = (j * w) // out[1], -(-((j + 1) * w) // out[1])
            cell = ctx.expr(ctx.emit(G.op.strided_slice(x, [h0, w0], [h1, w1], axes=[2, 3])))
            cells.append(ctx.expr(ctx.emit(G.op.mean(cell, axis=(2, 3), keepdims=True))))
        rows.append(ctx.expr(ctx.emit(G.op.concat(cells, axis=3))) if len(cells) > 1 else cells[0])
    return ctx.emit(G.op.concat(rows, axis=2)) if len(rows) > 1 else rows[0]


# -- softmax and attention -------------------------------------------------------------------------------


@register("aten.softmax.int", "aten._softmax.default", "aten.log_softmax.int", "aten._log_softmax.default")
def _softmax(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"), node.out_dtype)
    fn = G.op.log_softmax if "log_softmax" in node.key else G.op.softmax
    return ctx.emit(fn(x, axis=int(node.arg("dim"))))


def _lowest(dtype: str) -> float:
    # The dtype's lowest finite value rather than -inf: exp(lowest - max) is 0 all the same, and
    # an infinity never reaches generated C code.
    return float(np.finfo(dtype).min)


@register("aten.scaled_dot_product_attention.default")
def _sdpa(ctx: Any, node: Any) -> Any:
    q, k, v = (tensor(ctx, node.arg(n)) for n in ("query", "key", "value"))
    if node.arg("dropout_p"):
        raise node.error(f"dropout_p={node.arg('dropout_p')} in attention; export the module in eval mode with "
                         f"dropout_p=0")
    qs, ks = ctx.shape(q), ctx.shape(k)
    if node.arg("enable_gqa") and len(qs) >= 3 and qs[-3] != ks[-3]:
        raise node.error("grouped-query attention (enable_gqa=True with fewer key heads) is not supported; repeat "
                         "the key/value heads before the call")
    dtype = str(q.struct_info.dtype)
    scale = node.arg("scale")
    if scale is None:
        if not isinstance(qs[-1], int):
            raise node.error("the head size must be static when no scale is given")
        scale = 1.0 / math.sqrt(qs[-1])
    # Step 1. scores = q @ k^T * scale.
    axes = list(range(len(ks)))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    kt = ctx.expr(ctx.emit(G.op.permute_dims(k, axes)))
    scores = ctx.expr(ctx.emit(G.op.matmul(q, kt)))
    scores = ctx.expr(ctx.emit(G.op.multiply(scores, ctx.expr(float(scale), dtype))))
    # Step 2. masks: is_causal keeps j <= i; a bool mask keeps True; a float mask is added.
    if node.arg("is_causal"):
        length, source = qs[-2], ks[-2]
        if not (isinstance(length, int) and isinstance(source, int)):
            raise node.error("is_causal=True needs static sequence lengths; pass an explicit attn_mask instead")
        causal = np.tril(np.ones((length, source), dtype=bool))
        scores = ctx.expr(ctx.emit(G.op.where(ctx.expr(causal), scores, ctx.expr(_lowest(dtype), dtype))))
    mask = node.arg("attn_mask")
    if mask is not None:
        if ctx.dtype(mask) == "bool":
            scores = ctx.expr(ctx.emit(G.op.where(ctx.expr(mask), scores, ctx.expr(_lowest(dtype), dtype))))
        else:
            scores = ctx.expr(ctx.emit(G.op.add(scores, tensor(ctx, mask, dtype))))
    # Step 3. softmax over the keys, weighted sum of the values.
    probs = ctx.expr(ctx.emit(G.op.softmax(scores, axis=-1)))
    return ctx.emit(G.op.matmul(probs, v))


# -- embedding and identities ----------------------------------------------------------------------------


@register("aten.embedding.default")
def _embedding(ctx: Any, node: Any) -> Any:
    indices = tensor(ctx, node.arg("indices"))
    if not str(indices.struct_info.dtype).startswith(("int", "uint")):
        raise node.error(f"embedding indices must be integers, got {indices.struct_info.dtype}")
    return ctx.emit(G.op.take(ctx.expr(node.arg("weight")), indices, axis=0))


@register("aten.dropout.default", "aten.feature_dropout.default", "aten.alpha_dropout.default")
def _dropout(ctx: Any, node: Any) -> Any:
    if node.arg("train") and node.arg("p"):
        raise node.error("dropout in training mode; call module.eval() before torch.export.export")
    return node.arg("input")


@register("aten.native_dropout.default")
def _native_dropout(ctx: Any, node: Any) -> Any:
    if node.arg("train") and node.arg("p"):
        raise node.error("dropout in training mode; call module.eval() before torch.export.export")
    return (node.arg("input"), None)


@register("aten.clone.default", "aten.contiguous.default", "aten.alias.default", "aten.detach.default",
          "aten.lift_fresh_copy.default", "aten.detach_.default")
def _identity(ctx: Any, node: Any) -> Any:
    return node.arg("self")
