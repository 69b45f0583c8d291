"""ONNX converters: convolution, transposed convolution, GEMM/MatMul, pooling, normalizations, softmax, dropout.

Note: the graph layer has 2-D convolution and pooling (NCHW); 1-D ones are imported as 2-D with
a unit height (``expand_dims`` before, ``squeeze`` after), which costs nothing after fusion.
``auto_pad`` and ``ceil_mode`` are resolved into explicit paddings at import time (they need static
spatial sizes). ``InstanceNormalization`` is ``group_norm`` with one group per channel. ``LpPool`` is an average pool
of ``|x|^p`` counting the padding, times the window size, to the power ``1/p``; ``MaxUnpool`` scatters into zeros.
A 3-D ``ConvTranspose`` is one 2-D transposed convolution per depth tap, gathered onto the output depths.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("Conv", 11) is not None
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import graph as G
from ingot.graph.op import onnx_extra as X

from ._common import as_array, is_static, norm_axes, scalar_like
from .importer import register


def _spatial_pads(node: Any, in_sizes: list, kernel: list, strides: list, dilations: list) -> list[int]:
    """ONNX pads ``[b1, b2, ..., e1, e2, ...]`` with ``auto_pad`` resolved."""
    n = len(kernel)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", "", None):
        pads = list(node.attr("pads", [0] * (2 * n)))
        return [int(p) for p in pads]
    if auto == "VALID":
        return [0] * (2 * n)
    begin, end = [], []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
        if not isinstance(size, int):
            raise node.error(f"auto_pad={auto} needs static spatial sizes, got {size}; fix them with shape_dict")
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
        begin.append(lo)
        end.append(total - lo)
    return begin + end


def _ceil_extra(node: Any, in_sizes: list, kernel: list, strides: list, dilations: list, pads: list) -> list[int]:
    """Extra end padding that makes floor-mode output sizes equal ONNX's ``ceil_mode=1`` sizes."""
    n = len(kernel)
    pads = list(pads)
    for i, (size, k, s, d) in enumerate(zip(in_sizes, kernel, strides, dilations)):
        if not isinstance(size, int):
            raise node.error("ceil_mode=1 needs static spatial sizes; fix them with shape_dict")
        eff = (k - 1) * d + 1
        span = size + pads[i] + pads[i + n] - eff
        out = -(-span // s) + 1
        if (out - 1) * s >= size + pads[i]:  # the last window must start inside the input or left padding
            out -= 1
        extra = (out - 1) * s + eff - (size + pads[i] + pads[i + n])
        if extra > 0:
            pads[i + n] += extra
    return pads


def _to_2d(ctx: Any, x: Any) -> Any:
    return ctx.expr(ctx.emit(G.op.expand_dims(x, 2)))


@register("Conv")
def _conv(ctx: Any, node: Any) -> Any:
    b = node.input(2)
    return conv_nd(ctx, node, ctx.expr(node.input(0)), ctx.expr(node.input(1)), ctx.expr(b) if b is not None else None)


def conv_nd(ctx: Any, node: Any, x: Any, w: Any, bias: Any = None) -> Any:
    """The graph code of a Conv ``node`` (its attributes) on expressions ``x``, ``w`` and ``bias`` (one
    value per output channel, or None); the integer convolutions (`ops_quant`) share it.

    Example:
        >>> from onnx import helper, TensorProto
        >>> from ingot.frontend.onnx import from_onnx
        >>> info = helper.make_tensor_value_info
        >>> g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
        ...                       [info("x", TensorProto.FLOAT, [1, 1, 3, 3]), info("w", TensorProto.FLOAT, [2, 1, 2, 2])],
        ...                       [info("y", TensorProto.FLOAT, [1, 2, 4, 4])])
        >>> mod, _ = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
        >>> str(mod["main"].ret_struct_info)
        'R.Tensor((1, 2, 4, 4), dtype="float32")'
    """
    xs, ws = ctx.shape(x), ctx.shape(w)
    n = len(xs) - 2
    if n not in (1, 2):
        raise node.error(f"only 1-D and 2-D convolutions are supported, this one is {n}-D (input shape {xs})")
    kernel = list(node.attr("kernel_shape", ws[2:]))
    strides = list(node.attr("strides", [1] * n))
    dilations = list(node.attr("dilations", [1] * n))
    pads = _spatial_pads(node, list(xs[2:]), kernel, strides, dilations)
    if n == 1:
        x, w = _to_2d(ctx, x), _to_2d(ctx, w)
        strides, dilations, pads = [1] + strides, [1] + dilations, [0, pads[0], 0, pads[1]]
    else:
        pads = [pads[0], pads[1], pads[2], pads[3]]
    out = ctx.emit(G.op.conv2d(x, w, strides=tuple(strides), padding=tuple(pads), dilation=tuple(dilations),
                               groups=int(node.attr("group", 1))))
    if bias is not None:
        out = ctx.emit(G.op.add(ctx.expr(out), ctx.expr(ctx.emit(G.op.reshape(bias, (-1, 1, 1))))))
    if n == 1:
        out = ctx.emit(G.op.squeeze(ctx.expr(out), axis=[2]))
    return out


@register("MatMul")
def _matmul(ctx: Any, node: Any) -> Any:
    a, b = node.input(0), node.input(1)
    sa, sb = list(ctx.shape(a)), list(ctx.shape(b))
    lead = sa[:-1]
    if len(sa) >= 3 and len(sb) == 2 and all(isinstance(d, int) for d in lead):
        # (..., M, K) @ (K, N) is one (prod(...)*M, K) @ (K, N) GEMM: a batched matmul with a shared
        # weight would run prod(...) small products (torch's MHA export gives (seq, 1, hidden) @ W,
        # i.e. 128 GEMVs instead of one GEMM).
        rows = int(np.prod(lead, dtype=np.int64))
        flat = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(a), (rows, sa[-1]))))
        out = ctx.expr(ctx.emit(G.op.matmul(flat, ctx.expr(b))))
        return ctx.emit(G.op.reshape(out, tuple(lead) + (sb[-1],)))
    return ctx.emit(G.op.matmul(ctx.expr(a), ctx.expr(b)))


@register("Gemm")
def _gemm(ctx: Any, node: Any) -> Any:
    a, b, c = ctx.expr(node.input(0)), ctx.expr(node.input(1)), node.input(2)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if node.attr("transA", 0):
        a = ctx.expr(ctx.emit(G.op.permute_dims(a, (1, 0))))
    if node.attr("transB", 0) and is_static(node.input(1)):
        # A constant (out, in) weight is transposed once here: matmul's default schedule streams a
        # (in, out) weight contiguously, linear's walks it with stride `in` (measured: ResNet-50's
        # 1x2048 @ 2048x1000 head took 131 ms as linear, 0.26 ms as matmul).
        wt = np.ascontiguousarray(as_array(node.input(1)).T)
        out = ctx.emit(G.op.matmul(a, G.const(wt)))
    elif node.attr("transB", 0):
        out = ctx.emit(G.op.linear(a, b))  # torch.nn.Linear's layout: weight (out, in)
    else:
        out = ctx.emit(G.op.matmul(a, b))
    if alpha != 1.0:
        out = ctx.emit(G.op.multiply(ctx.expr(out), scalar_like(alpha, ctx.dtype(a))))
    if c is not None and beta != 0.0:
        cexpr = ctx.expr(c)
        if beta != 1.0:
            cexpr = ctx.expr(ctx.emit(G.op.multiply(cexpr, scalar_like(beta, ctx.dtype(cexpr)))))
        out = ctx.emit(G.op.add(ctx.expr(out), cexpr))
    return out


def _pool(kind: str):
    def convert(ctx: Any, node: Any) -> Any:
        x = ctx.expr(node.input(0))
        xs = ctx.shape(x)
        n = len(xs) - 2
        if n not in (1, 2, 3):
            raise node.error(f"only 1-D, 2-D and 3-D pooling is supported, this one is {n}-D (input shape {xs})")
        kernel = list(node.attr("kernel_shape"))
        strides = list(node.attr("strides", [1] * n))
        dilations = list(node.attr("dilations", [1] * n))
        pads = _spatial_pads(node, list(xs[2:]), kernel, strides, dilations)
        base = list(pads)
        if node.attr("ceil_mode", 0):
            pads = _ceil_extra(node, list(xs[2:]), kernel, strides, dilations, pads)
        include_pad = kind == "avg" and bool(node.attr("count_include_pad", 0))
        if include_pad and pads != base:
            # ceil_mode's extra end cells lie outside the padded input: ONNX counts the real pads in the
            # divisor but not them. Pad explicitly with zeros (counted as cells), then pool with the
            # extra cells only, not counted.
            if any(base):
                x = ctx.expr(ctx.emit(G.op.pad(x, [(0, 0), (0, 0)] + [(base[i], base[i + n]) for i in range(n)])))
            pads, include_pad = [0] * n + [pads[i + n] - base[i + n] for i in range(n)], False

        def pool2d(v: Any, kernel: list, strides: list, pads: list, dilations: list) -> Any:
            if kind == "max":
                return ctx.emit(G.op.max_pool2d(v, tuple(kernel), tuple(strides), tuple(pads), tuple(dilations)))
            return ctx.emit(G.op.avg_pool2d(v, tuple(kernel), tuple(strides), tuple(pads), tuple(dilations),
                                            count_include_pad=include_pad))

        if n == 3:
            out = _pool3d_separable(ctx, node, x, pool2d, kernel, strides, pads, dilations)
        else:
            x2 = _to_2d(ctx, x) if n == 1 else x
            k2, s2, d2, p2 = ([1] + kernel, [1] + strides, [1] + dilations, [0, pads[0], 0, pads[1]]) if n == 1 \
                else (kernel, strides, dilations, pads)
            out = pool2d(x2, k2, s2, p2, d2)
            if n == 1:
                out = ctx.emit(G.op.squeeze(ctx.expr(out), axis=[2]))
        if kind == "max" and node.num_outputs > 1 and node.proto.output[1]:
            return [out, _max_pool_indices(ctx, node, x, ctx.expr(out), kernel, strides, pads, dilations)]
        return out

    return convert


def _max_pool_indices(ctx: Any, node: Any, x: Any, y: Any, kernel: list, strides: list, pads: list,
                      dilations: list) -> Any:
    """MaxPool's Indices: for each output cell, the flat position in x (N, C, spatial..., row-major, or the
    spatial dims column-major with storage_order=1) of the first window element, in row-major window order,
    equal to the pooled maximum ``y``. One strided slice of the padded x per kernel offset, compared with y;
    walking the offsets backwards with ``where`` leaves the first match. Which cells of an offset are real
    input (not padding) and their positions are constants of the static shapes."""
    xs, ys = list(ctx.shape(x)), list(ctx.shape(y))
    n = len(kernel)
    if not all(isinstance(d, int) for d in xs):
        raise node.error(f"MaxPool's Indices output needs a static input shape, got {xs}; fix it with shape_dict")
    sizes, out_sizes = xs[2:], ys[2:]
    order = int(node.attr("storage_order", 0))
    if order not in (0, 1):
        raise node.error(f"storage_order must be 0 (row-major) or 1 (column-major), got {order}")
    dim_strides = [int(np.prod(sizes[i + 1:], dtype=np.int64)) for i in range(n)] if order == 0 \
        else [int(np.prod(sizes[:i], dtype=np.int64)) for i in range(n)]
    # x padded so that every offset's strided slice is in range (the pad value is never chosen: masked out)
    ends = [max((out_sizes[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - sizes[i] - pads[i], 0)
            for i in range(n)]
    xp = ctx.expr(ctx.emit(G.op.pad(x, [(0, 0), (0, 0)] + [(pads[i], ends[i]) for i in range(n)])))
    res = ctx.expr(ctx.emit(G.op.zeros(tuple(ys), "int64")))
    for offset in reversed(list(np.ndindex(*kernel))):
        begin = [int(offset[i]) * dilations[i] for i in range(n)]
        end = [begin[i] + (out_sizes[i] - 1) * strides[i] + 1 for i in range(n)]
        cand = ctx.expr(ctx.emit(G.op.strided_slice(xp, begin, end, strides, axes=list(range(2, n + 2)))))
        # positions of this offset's cells in x; -1 where the cell is padding
        pos = np.zeros(out_sizes, np.int64)
        valid = np.ones(out_sizes, bool)
        for i in range(n):
            coord = np.arange(out_sizes[i]) * strides[i] - pads[i] + begin[i]
            shape = [1] * n
            shape[i] = out_sizes[i]
            pos = pos + (coord * dim_strides[i]).reshape(shape)
            valid = valid & ((coord >= 0) & (coord < sizes[i])).reshape(shape)
        hit = ctx.expr(ctx.emit(G.op.equal(cand, y)))
        if not valid.all():   # a padding cell never counts
            hit = ctx.expr(ctx.emit(G.op.where(G.const(valid), hit, G.const(np.zeros((), bool)))))
        res = ctx.expr(ctx.emit(G.op.where(hit, G.const(pos), res)))
    # plus the start of each (n, c) plane
    plane = int(np.prod(sizes, dtype=np.int64))
    starts = np.arange(xs[0] * xs[1], dtype=np.int64).reshape(xs[:2] + [1] * n) * plane
    return ctx.emit(G.op.add(res, G.const(starts)))


def _pool3d_separable(ctx: Any, node: Any, x: Any, pool2d: Any, kernel: list, strides: list, pads: list,
                      dilations: list) -> Any:
    """3-D max/average pooling as two 2-D poolings: over (H, W) with D folded into the channels, then over D
    with H x W flattened. Exact because a pooling window is a box (a product of per-axis ranges): the max
    of maxima is the max, and the average's divisor (the window's element count, padded or valid cells)
    is the product of per-axis counts, so averaging per axis gives the same quotient."""
    nb, c, d, h, w = ctx.shape(x)
    if not all(isinstance(v, int) for v in (c, d, h, w)):
        raise node.error(f"3-D pooling needs static C, D, H, W, got {(c, d, h, w)}; fix them with shape_dict")
    bd, bh, bw, ed, eh, ew = pads
    # Step 1. pool H, W: (N, C*D, H, W) -> (N, C*D, H', W').
    y = ctx.expr(ctx.emit(G.op.reshape(x, (nb, c * d, h, w))))
    y = ctx.expr(pool2d(y, kernel[1:], strides[1:], [bh, bw, eh, ew], dilations[1:]))
    h2, w2 = ctx.shape(y)[2:]
    # Step 2. pool D: (N, C, D, H'*W') with a (kd, 1) window -> (N, C, D', H'*W').
    y = ctx.expr(ctx.emit(G.op.reshape(y, (nb, c, d, h2 * w2))))
    y = ctx.expr(pool2d(y, [kernel[0], 1], [strides[0], 1], [bd, 0, ed, 0], [dilations[0], 1]))
    return ctx.emit(G.op.reshape(y, (nb, c, ctx.shape(y)[2], h2, w2)))


register("MaxPool")(_pool("max"))
register("AveragePool")(_pool("avg"))


def _with(node: Any, inputs: list, **attrs: Any) -> Any:
    """A view of ``node`` with other inputs and some attributes replaced (to reuse a converter)."""
    import copy

    view = copy.copy(node)
    view.inputs = list(inputs)
    view.attrs = {**node.attrs, **attrs}
    return view


@register("LpPool", since=2)
def _lp_pool(ctx: Any, node: Any) -> Any:
    # (sum over the window of |x|^p)^(1/p): the window sum is an average pool that counts the padding
    # (every window then divides by the full kernel size) times that size; padded cells add 0.
    x = ctx.expr(node.input(0))
    dt = ctx.dtype(x)
    p = float(node.attr("p", 2))
    if node.attr("ceil_mode", 0):
        raise node.error("LpPool with ceil_mode=1 is not supported (its edge windows are partial); export with "
                         "ceil_mode=0 or pad the input explicitly")
    if p <= 0:
        raise node.error(f"p must be positive, got {p:g}")
    if p == 2:
        v = ctx.expr(ctx.emit(G.op.multiply(x, x)))
    else:
        v = ctx.expr(ctx.emit(G.op.abs(x)))
        if p != 1:
            v = ctx.expr(ctx.emit(G.op.power(v, scalar_like(p, dt))))
    avg = ctx.expr(_pool("avg")(ctx, _with(node, [v], count_include_pad=1)))
    size = int(np.prod([int(k) for k in node.attr("kernel_shape")], dtype=np.int64))
    total = ctx.expr(ctx.emit(G.op.multiply(avg, scalar_like(size, dt))))
    if p == 1:
        return total
    if p == 2:
        return ctx.emit(G.op.sqrt(total))
    return ctx.emit(G.op.power(total, scalar_like(1.0 / p, dt)))


@register("MaxUnpool", since=9)
def _max_unpool(ctx: Any, node: Any) -> Any:
    # MaxPool's Indices are flat positions in the whole (N, C, spatial...) output: a zero tensor of the
    # output size with the values scattered there (ScatterElements on the flattened view).
    x, idx, shape_in = node.input(0), node.input(1), node.input(2)
    xs = list(ctx.shape(x))
    n = len(xs) - 2
    if n < 1 or not all(isinstance(d, int) for d in xs):
        raise node.error(f"MaxUnpool needs a static input of rank >= 3, got {tuple(map(str, xs))}; fix the dims "
                         f"with shape_dict")
    if shape_in is not None:
        if not is_static(shape_in):
            raise node.error("output_shape must be known at import time (a constant or an initializer)")
        out_shape = [int(d) for d in as_array(shape_in).reshape(-1)]
        if len(out_shape) != len(xs):
            raise node.error(f"output_shape {out_shape} must have the rank of the input {xs}")
    else:
        kernel = [int(k) for k in node.attr("kernel_shape")]
        strides = [int(s) for s in node.attr("strides", [1] * n)]
        pads = [int(p) for p in node.attr("pads", [0] * (2 * n))]
        out_shape = xs[:2] + [(xs[2 + i] - 1) * strides[i] - pads[i] - pads[n + i] + kernel[i] for i in range(n)]
    total = int(np.prod(out_shape, dtype=np.int64))
    dt = ctx.dtype(x)
    flat_idx = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(ctx.emit(G.op.astype(ctx.expr(idx), "int64"))), (-1,))))
    flat_x = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(x), (-1,))))
    zeros = ctx.expr(ctx.emit(G.op.zeros((total,), dt)))
    out = ctx.expr(ctx.emit(X.scatter_elements(zeros, flat_idx, flat_x, axis=0)))
    return ctx.emit(G.op.reshape(out, tuple(out_shape)))


# -- ConvTranspose (graph op conv2d_transpose; 1-D runs as 2-D with H = 1, 3-D as 2-D per depth tap) ----


@register("ConvTranspose", since=1)
def _conv_transpose(ctx: Any, node: Any) -> Any:
    x, w, b = node.input(0), node.input(1), node.input(2)
    xs, ws = list(ctx.shape(x)), list(ctx.shape(w))
    nd = len(xs) - 2
    if nd not in (1, 2, 3) or not all(isinstance(d, int) for d in xs[2:] + ws):
        raise node.error(f"only 1-D, 2-D and 3-D ConvTranspose with static spatial sizes and weights is supported, "
                         f"got input {tuple(map(str, xs))} and weight {tuple(map(str, ws))}")
    kernel = [int(k) for k in node.attr("kernel_shape", ws[2:])]
    strides = list(node.attr("strides", [1] * nd))
    dil = list(node.attr("dilations", [1] * nd))
    out_pad = list(node.attr("output_padding", [0] * nd))
    pads = list(node.attr("pads", [0] * (2 * nd)))
    auto_pad = node.attr("auto_pad", "NOTSET")
    out_shape = node.attr("output_shape")
    if out_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # Step 1. pads from the requested output size (ONNX's formula; SAME_*: output = input * stride).
        want = list(out_shape)[-nd:] if out_shape is not None else [xs[2 + i] * strides[i] for i in range(nd)]
        pads = [0] * (2 * nd)
        for i in range(nd):
            total = strides[i] * (xs[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - want[i]
            if total < 0:
                out_pad[i] += -total
                total = 0
            first = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pads[i], pads[nd + i] = first, total - first
    elif auto_pad == "VALID":
        pads = [0] * (2 * nd)
    e, we = ctx.expr(x), ctx.expr(w)
    groups = int(node.attr("group", 1))
    if nd == 3:
        y = _conv_transpose3d(ctx, node, e, we, kernel, strides, pads, out_pad, dil, groups)
        return _add_channel_bias(ctx, y, b, nd)
    if nd == 1:  # Step 2. 1-D as 2-D with a unit height.
        e = ctx.expr(ctx.emit(G.op.expand_dims(e, 2)))
        we = ctx.expr(ctx.emit(G.op.expand_dims(we, 2)))
        strides, dil, out_pad = [1] + strides, [1] + dil, [0] + out_pad
        pads = [0, pads[0], 0, pads[1]]
    y = ctx.emit(G.op.conv2d_transpose(e, we, strides=tuple(strides), padding=tuple(pads),
                                       output_padding=tuple(out_pad), dilation=tuple(dil),
                                       groups=groups))
    if nd == 1:
        y = ctx.emit(G.op.squeeze(ctx.expr(y), [2]))
    return _add_channel_bias(ctx, y, b, nd)


def _add_channel_bias(ctx: Any, y: Any, b: Any, nd: int) -> Any:
    if b is None:
        return y
    c = ctx.shape(y)[1]
    return ctx.emit(G.op.add(ctx.expr(y), ctx.expr(ctx.emit(G.op.reshape(ctx.expr(b), (1, c) + (1,) * nd)))))


def _conv_transpose3d(ctx: Any, node: Any, e: Any, we: Any, kernel: list, strides: list, pads: list,
                      out_pad: list, dil: list, groups: int) -> Any:
    """3-D ConvTranspose as one 2-D ConvTranspose per depth tap ``kd``: input depth slice ``i`` lands on
    output depth ``i*sd + kd*dd - pad_front``, so with D folded into the batch each tap's (H, W) result is
    gathered onto the output depths (``take``, zero where no input slice lands) and the taps are summed."""
    n, ci, d, h, w = ctx.shape(e)
    od = (d - 1) * strides[0] + (kernel[0] - 1) * dil[0] + 1 + out_pad[0] - pads[0] - pads[3]
    # Step 1. (N, Ci, D, H, W) -> (N*D, Ci, H, W): every depth slice is an independent 2-D image.
    x2 = ctx.expr(ctx.emit(G.op.permute_dims(e, (0, 2, 1, 3, 4))))
    x2 = ctx.expr(ctx.emit(G.op.reshape(x2, (n * d, ci, h, w))))
    acc = None
    for kd in range(kernel[0]):
        src = np.arange(od) + pads[0] - kd * dil[0]       # input depth * sd for each output depth
        hit = (src % strides[0] == 0) & (src >= 0) & (src < d * strides[0])
        if not hit.any():
            continue   # this tap lands outside the (cropped) output
        # Step 2. the tap's 2-D transposed convolution: (N*D, Co, OH, OW) -> (N, D, Co, OH, OW).
        wk = ctx.expr(ctx.emit(G.op.strided_slice(we, [kd], [kd + 1], axes=[2])))
        wk = ctx.expr(ctx.emit(G.op.squeeze(wk, [2])))
        z = ctx.expr(ctx.emit(G.op.conv2d_transpose(
            x2, wk, strides=tuple(strides[1:]), padding=(pads[1], pads[2], pads[4], pads[5]),
            output_padding=tuple(out_pad[1:]), dilation=tuple(dil[1:]), groups=groups)))
        co, oh, ow = ctx.shape(z)[1:]
        z = ctx.expr(ctx.emit(G.op.reshape(z, (n, d, co, oh, ow))))
        # Step 3. onto the output depths: gather the landing slice, zero where none lands.
        t = ctx.expr(ctx.emit(G.op.take(z, G.const(np.where(hit, src // strides[0], 0).astype("int64")), axis=1)))
        if not hit.all():
            mask = G.const(hit.reshape(1, od, 1, 1, 1))
            t = ctx.expr(ctx.emit(G.op.where(mask, t, G.const(np.zeros((), ctx.dtype(e))))))
        acc = t if acc is None else ctx.expr(ctx.emit(G.op.add(acc, t)))
    if acc is None:
        raise node.error(f"no kernel tap of this 3-D ConvTranspose reaches the output depth {od} (pads {pads})")
    return ctx.emit(G.op.permute_dims(acc, (0, 2, 1, 3, 4)))


@register("GlobalAveragePool")
def _global_avg_pool(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    ndim = len(ctx.shape(x))
    if ndim == 4:
        return ctx.emit(G.op.global_avg_pool2d(x))
    return ctx.emit(G.op.mean(x, axis=list(range(2, ndim)), keepdims=True))


@register("GlobalMaxPool")
def _global_max_pool(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    return ctx.emit(G.op.max(x, axis=list(range(2, len(ctx.shape(x)))), keepdims=True))


@register("BatchNormalization")
def _batch_norm(ctx: Any, node: Any) -> Any:
    args = [ctx.expr(node.input(i)) for i in range(5)]
    eps = float(node.attr("epsilon", 1e-5))
    if node.attr("training_mode", 0):
        return _batch_norm_training(ctx, node, args, eps)
    return ctx.emit(G.op.batch_norm(*args, axis=1, epsilon=eps))


def _batch_norm_training(ctx: Any, node: Any, args: list, eps: float) -> list:
    """BatchNormalization with ``training_mode=1`` (opset 14+): normalize with the batch's statistics
    (population variance over every axis but 1) and also return the updated running mean/variance,
    ``running * momentum + batch * (1 - momentum)``."""
    x, scale, bias, mean, var = args
    ndim = len(ctx.shape(x))
    dt = ctx.dtype(x)
    axes = [a for a in range(ndim) if a != 1]
    momentum = float(node.attr("momentum", 0.9))
    batch_mean = ctx.expr(ctx.emit(G.op.mean(x, axis=axes)))
    centered = ctx.expr(ctx.emit(G.op.subtract(x, ctx.expr(ctx.emit(G.op.mean(x, axis=axes, keepdims=True))))))
    batch_var = ctx.expr(ctx.emit(G.op.mean(ctx.expr(ctx.emit(G.op.multiply(centered, centered))), axis=axes)))
    y = ctx.emit(G.op.batch_norm(x, scale, bias, batch_mean, batch_var, axis=1, epsilon=eps))

    def blend(running: Any, batch: Any) -> Any:
        a = ctx.expr(ctx.emit(G.op.multiply(running, scalar_like(momentum, dt))))
        b = ctx.expr(ctx.emit(G.op.multiply(batch, scalar_like(1.0 - momentum, dt))))
        return ctx.emit(G.op.add(a, b))

    return [y, blend(mean, batch_mean), blend(var, batch_var)]


@register("InstanceNormalization")
def _instance_norm(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    channels = ctx.shape(x)[1]
    if not isinstance(channels, int):
        raise node.error("the channel count must be static")
    return ctx.emit(G.op.group_norm(x, ctx.expr(node.input(1)), ctx.expr(node.input(2)), num_groups=channels,
                                    epsilon=float(node.attr("epsilon", 1e-5))))


@register("LayerNormalization", since=17)
def _layer_norm(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    ndim = len(ctx.shape(x))
    axis = norm_axes([node.attr("axis", -1)], ndim)[0]
    axes = list(range(axis, ndim))
    extra = []
    if node.num_outputs > 1 and any(node.proto.output[1:]):
        # Mean and InvStdDev (training graphs ask for them): computed beside the fused layer_norm.
        eps = scalar_like(float(node.attr("epsilon", 1e-5)), ctx.dtype(x))
        mean = ctx.expr(ctx.emit(G.op.mean(x, axis=axes, keepdims=True)))
        d = ctx.expr(ctx.emit(G.op.subtract(x, mean)))
        var = ctx.expr(ctx.emit(G.op.mean(ctx.emit(G.op.multiply(d, d)), axis=axes, keepdims=True)))
        extra = [mean, ctx.emit(G.op.rsqrt(ctx.expr(ctx.emit(G.op.add(var, eps)))))]
    norm_shape = tuple(ctx.shape(x)[axis:])
    scale = ctx.expr(node.input(1))
    if tuple(ctx.shape(scale)) != norm_shape:
        scale = ctx.expr(ctx.emit(G.op.add(scale, G.const(np.zeros(norm_shape, ctx.dtype(x))))))
    bias = node.input(2)
    bias = G.const(np.zeros(norm_shape, ctx.dtype(x))) if bias is None else ctx.expr(bias)
    if tuple(ctx.shape(bias)) != norm_shape:
        bias = ctx.expr(ctx.emit(G.op.add(bias, G.const(np.zeros(norm_shape, ctx.dtype(x))))))
    out = ctx.emit(G.op.layer_norm(x, scale, bias, axes=axes, epsilon=float(node.attr("epsilon", 1e-5))))
    return [out] + extra if extra else out


def _softmax(kind: str, since13: bool):
    def convert(ctx: Any, node: Any) -> Any:
        x = ctx.expr(node.input(0))
        shape = ctx.shape(x)
        ndim = len(shape)
        builder = G.op.softmax if kind == "softmax" else G.op.log_softmax
        if since13:
            return ctx.emit(builder(x, axis=int(node.attr("axis", -1))))
        # Before opset 13 the input is coerced to 2-D ([:axis], [axis:]) and normalized over the second.
        axis = norm_axes([node.attr("axis", 1)], ndim)[0]
        if axis == ndim - 1:
            return ctx.emit(builder(x, axis=-1))
        flat = ctx.emit(G.op.reshape(x, tuple(shape[:axis]) + (-1,)))
        out = ctx.emit(builder(ctx.expr(flat), axis=-1))
        return ctx.emit(G.op.reshape(ctx.expr(out), shape))

    return convert


register("Softmax")(_softmax("softmax", False))
register("Softmax", since=13)(_softmax("softmax", True))
register("LogSoftmax")(_softmax("log_softmax", False))
register("LogSoftmax", since=13)(_softmax("log_softmax", True))


@register("Hardmax", since=13)
def _hardmax(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    shape, dtype = ctx.sinfo(x)
    axis = norm_axes([node.attr("axis", -1)], len(shape))[0]
    if not isinstance(shape[axis], int):
        raise node.error(f"Hardmax needs a static size on axis {axis}, got {shape[axis]}")
    # one-hot of the (first) argmax: arange(n) == argmax(x, keepdims) broadcast along the axis.
    best = ctx.expr(ctx.emit(G.op.argmax(ctx.expr(x), axis=axis, keepdims=True)))
    pos = np.arange(shape[axis], dtype="int64").reshape([-1 if a == axis else 1 for a in range(len(shape))])
    hit = ctx.expr(ctx.emit(G.op.equal(best, G.const(pos))))
    return ctx.emit(G.op.astype(hit, dtype))


@register("Dropout")
def _dropout(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    training = node.input(2)
    if training is not None and (not is_static(training) or bool(as_array(training))):
        raise node.error("Dropout in training mode draws random values; only inference (training_mode=False) "
                         "is supported")
    if node.num_outputs > 1:
        mask = np.ones([int(d) for d in ctx.shape(x)], dtype=bool)
        return [x, mask]
    return x


@register("LRN")
def _lrn(ctx: Any, node: Any) -> Any:
    # y = x / (bias + alpha / size * sum_{window over channels} x^2) ** beta: a channel window sum
    # written as a 1-D average pool over the channel axis (a (size, 1) window on (N, 1, C, H*W)).
    x = ctx.expr(node.input(0))
    shape = ctx.shape(x)
    size = int(node.attr("size"))
    alpha, beta, bias = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75)), float(node.attr("bias", 1.0))
    sq = ctx.emit(G.op.multiply(x, x))
    flat = ctx.emit(G.op.reshape(ctx.expr(sq), (shape[0], 1, shape[1], -1)))
    lo = (size - 1) // 2
    hi = size - 1 - lo
    summed = ctx.emit(G.op.avg_pool2d(ctx.expr(flat), (size, 1), (1, 1), (lo, 0, hi, 0), count_include_pad=True))
    summed = ctx.emit(G.op.reshape(ctx.expr(summed), shape))
    dt = ctx.dtype(x)
    # avg_pool divided by size; alpha / size * sum == alpha * avg
    denom = ctx.emit(G.op.add(ctx.emit(G.op.multiply(ctx.expr(summed), scalar_like(alpha, dt))),
                              scalar_like(bias, dt)))
    denom = ctx.emit(G.op.power(ctx.expr(denom), scalar_like(beta, dt)))
    return ctx.emit(G.op.divide(x, ctx.expr(denom)))

