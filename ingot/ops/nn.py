"""Neural-network operators: dense, conv2d (NCHW/NHWC, stride/padding/dilation/groups),
conv2d_transpose, padding, pooling (ceil mode), softmax, normalizations.

Note: as in TVM's topi, each operator is a small chain of TE stages (padding, the main reduction,
an epilogue). Default schedules inline the cheap stages into their consumers.

Example:
    >>> from ingot import te
    >>> x = te.placeholder((1, 3, 8, 8), name="x")
    >>> w = te.placeholder((4, 3, 3, 3), name="w")
    >>> y = conv2d_nchw(x, w, strides=1, padding=1)
    >>> [int(d) for d in y.shape]
    [1, 4, 8, 8]
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot import tir
from ingot.ir import as_const_int, convert

from ._util import compute, const_like, normalize_axis, prod
from ._window import cast_pair, conv_window, out_extent, pair




def dense(x: Any, weight: Any, bias: Any = None, out_dtype: "str | None" = None) -> Any:
    """``x @ weight.T (+ bias)``: ``x`` is ``(..., K)``, ``weight`` ``(N, K)``, ``bias`` ``(N,)``.

    Example:
        >>> from ingot import te
        >>> y = dense(te.placeholder((2, 8), name="x"), te.placeholder((4, 8), name="w"))
    """
    from ingot import te

    out_dtype = out_dtype or str(x.dtype)
    K = x.shape[-1]
    k = te.reduce_axis((0, K), name="k")
    out_shape = tuple(x.shape[:-1]) + (weight.shape[0],)

    def body(idx: tuple) -> Any:
        lhs, rhs = x[idx[:-1] + (k,)], weight[idx[-1], k]
        lhs, rhs = cast_pair(lhs, rhs, out_dtype)
        return te.sum(lhs * rhs, axis=k)

    out = compute(out_shape, body, "T_dense", tag="dense")
    if bias is None:
        return out
    return compute(out_shape, lambda idx: out[idx] + bias[idx[-1]], "T_add_bias", tag="broadcast")


def pad(x: Any, pad_before: Sequence[Any], pad_after: Sequence[Any], pad_value: float = 0.0, name: str = "T_pad") -> Any:
    """``x`` padded with ``pad_value`` (``pad_before[i]``/``pad_after[i]`` elements on axis i).

    Example:
        >>> from ingot import te
        >>> y = pad(te.placeholder((2, 2), name="x"), (1, 0), (1, 0))
    """
    out_shape = tuple(convert(d) + b + a for d, b, a in zip(x.shape, pad_before, pad_after))

    def body(idx: tuple) -> Any:
        conds = []
        src = []
        for i, d, b, a in zip(idx, x.shape, pad_before, pad_after):
            if as_const_int(convert(b)) == 0 and as_const_int(convert(a)) == 0:
                src.append(i)  # an unpadded axis needs no bounds check
                continue
            conds.append(i >= b)
            conds.append(i < convert(b) + d)
            src.append(i - b)
        if not conds:
            return x[tuple(idx)]
        return tir.if_then_else(tir.all(*conds), x[tuple(src)], const_like(pad_value, x.dtype))

    return compute(out_shape, body, name, tag="injective,pad")


def pad_hw(data: Any, padding: tuple, h_axis: int, w_axis: int) -> Any:
    """``data`` padded with zeros by ``padding`` (top, left, bottom, right) on its H and W axes, or
    ``data`` itself when every side is a constant 0 (no copy stage to inline later).

    Example:
        >>> from ingot import te
        >>> [int(d) for d in pad_hw(te.placeholder((1, 4, 4, 2), name="x"), (1, 1, 0, 0), 1, 2).shape]
        [1, 5, 5, 2]
    """
    if all(as_const_int(convert(p)) == 0 for p in padding):
        return data
    pt, pl, pb, pr = padding
    before, after = [0] * len(data.shape), [0] * len(data.shape)
    before[h_axis], before[w_axis], after[h_axis], after[w_axis] = pt, pl, pb, pr
    return pad(data, before, after, name="pad_temp")


def conv2d_nchw(
    data: Any, kernel: Any, strides: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
    out_dtype: "str | None" = None,
) -> Any:
    """2-D convolution, data ``(N, C, H, W)``, kernel ``(O, C/groups, KH, KW)``.

    Example:
        >>> from ingot import te
        >>> y = conv2d_nchw(te.placeholder((1, 4, 8, 8), name="x"), te.placeholder((4, 1, 3, 3), name="w"),
        ...                 padding=1, groups=4)
    """
    from ingot import te

    win = conv_window("conv2d_nchw", data, strides, padding, dilation, out_dtype)
    (sh, sw), (dh, dw), (pt, pl, pb, pr), out_dtype = win
    N, C, H, W = data.shape
    O, CG, KH, KW = kernel.shape
    OH = out_extent(H, pt + pb, KH, sh, dh)
    OW = out_extent(W, pl + pr, KW, sw, dw)
    padded = pad_hw(data, win.padding, 2, 3)
    rc = te.reduce_axis((0, CG), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    out_per_group = convert(O) // groups

    def body(idx: tuple) -> Any:
        n, o, y, x = idx
        c = rc if groups == 1 else (o // out_per_group) * CG + rc
        lhs = padded[n, c, y * sh + ry * dh, x * sw + rx * dw]
        rhs = kernel[o, rc, ry, rx]
        lhs, rhs = cast_pair(lhs, rhs, out_dtype)
        return te.sum(lhs * rhs, axis=[rc, ry, rx])

    return compute((N, O, OH, OW), body, "conv2d_nchw", tag="conv2d_nchw")


def conv2d_nhwc(
    data: Any, kernel: Any, strides: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
    out_dtype: "str | None" = None,
) -> Any:
    """2-D convolution, data ``(N, H, W, C)``, kernel ``(KH, KW, C/groups, O)`` (HWIO, as TVM's NHWC).

    Example:
        >>> from ingot import te
        >>> y = conv2d_nhwc(te.placeholder((1, 8, 8, 3), name="x"), te.placeholder((3, 3, 3, 4), name="w"))
    """
    from ingot import te

    N, H, W, C = data.shape
    KH, KW, CG, O = kernel.shape
    if groups > 1 and as_const_int(convert(CG)) == 1 and _same_int(C, groups) and _same_int(O, groups):
        # depthwise (one input channel per group, O == C): no extent-1 reduce axis, the channel
        # indexes both operands as their contiguous last axis (vectorized over channels)
        return depthwise_conv2d_nhwc(data, kernel, strides, padding, dilation, out_dtype)
    win = conv_window("conv2d_nhwc", data, strides, padding, dilation, out_dtype)
    (sh, sw), (dh, dw), (pt, pl, pb, pr), out_dtype = win
    OH = out_extent(H, pt + pb, KH, sh, dh)
    OW = out_extent(W, pl + pr, KW, sw, dw)
    padded = pad_hw(data, win.padding, 1, 2)
    rc = te.reduce_axis((0, CG), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    out_per_group = convert(O) // groups

    def body(idx: tuple) -> Any:
        n, y, x, o = idx
        c = rc if groups == 1 else (o // out_per_group) * CG + rc
        lhs = padded[n, y * sh + ry * dh, x * sw + rx * dw, c]
        rhs = kernel[ry, rx, rc, o]
        lhs, rhs = cast_pair(lhs, rhs, out_dtype)
        return te.sum(lhs * rhs, axis=[rc, ry, rx])

    return compute((N, OH, OW, O), body, "conv2d_nhwc", tag="conv2d_nhwc")


def _same_int(a: Any, b: Any) -> bool:
    x, y = as_const_int(convert(a)), as_const_int(convert(b))
    return x is not None and x == y


def depthwise_conv2d_nhwc(data: Any, kernel: Any, strides: Any = 1, padding: Any = 0, dilation: Any = 1,
                          out_dtype: "str | None" = None) -> Any:
    """Depthwise 2-D convolution, data ``(N, H, W, C)``, kernel ``(KH, KW, 1, C)`` (HWIO with one
    input channel per group, as `conv2d_nhwc` with ``groups = C`` takes it); output
    ``(N, OH, OW, C)``. Reduce axes (ry, rx) only; ``c`` is the last index of every operand.

    Example:
        >>> from ingot import te
        >>> y = depthwise_conv2d_nhwc(te.placeholder((1, 8, 8, 32), name="x"),
        ...                           te.placeholder((3, 3, 1, 32), name="w"), strides=2, padding=1)
        >>> [int(d) for d in y.shape]
        [1, 4, 4, 32]
    """
    from ingot import te

    win = conv_window("depthwise_conv2d_nhwc", data, strides, padding, dilation, out_dtype)
    (sh, sw), (dh, dw), (pt, pl, pb, pr), out_dtype = win
    N, H, W, C = data.shape
    KH, KW, one, CK = kernel.shape
    if as_const_int(convert(one)) != 1 or (as_const_int(convert(C)) is not None and not _same_int(C, CK)):
        raise ValueError(f"depthwise_conv2d_nhwc: kernel shape {tuple(kernel.shape)} is not (KH, KW, 1, C) for "
                         f"data with C = {C} channels")
    OH = out_extent(H, pt + pb, KH, sh, dh)
    OW = out_extent(W, pl + pr, KW, sw, dw)
    padded = pad_hw(data, win.padding, 1, 2)
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")

    def body(idx: tuple) -> Any:
        n, y, x, c = idx
        lhs = padded[n, y * sh + ry * dh, x * sw + rx * dw, c]
        rhs = kernel[ry, rx, 0, c]
        lhs, rhs = cast_pair(lhs, rhs, out_dtype)
        return te.sum(lhs * rhs, axis=[ry, rx])

    return compute((N, OH, OW, C), body, "depthwise_conv2d_nhwc", tag="depthwise_conv2d_nhwc")


def pool2d(
    data: Any, pool_type: str, pool_size: Any, strides: Any = 1, padding: Any = 0, dilation: Any = 1,
    layout: str = "NCHW", count_include_pad: bool = False, ceil_mode: bool = False,
) -> Any:
    """Max or average pooling over the H and W axes of ``layout`` (``"NCHW"`` or ``"NHWC"``).

    Example:
        >>> from ingot import te
        >>> y = pool2d(te.placeholder((1, 2, 8, 8), name="x"), "max", 2, strides=2)
    """
    from ingot import te

    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool_type must be 'max' or 'avg', got {pool_type!r}")
    kh, kw = pair("pool2d", "pool_size", pool_size)
    (sh, sw), (dh, dw), (pt, pl, pb, pr), _ = conv_window("pool2d", None, strides, padding, dilation)
    h_axis, w_axis = layout.index("H"), layout.index("W")
    H, W = data.shape[h_axis], data.shape[w_axis]
    eh = ew = 0  # extra end padding of ceil mode (windows that start inside but run past the end)
    if ceil_mode:
        OH, eh = pool_out_size_ceil(H, pt, pb, kh, sh, dh)
        OW, ew = pool_out_size_ceil(W, pl, pr, kw, sw, dw)
    else:
        OH = out_extent(H, pt + pb, kh, sh, dh)
        OW = out_extent(W, pl + pr, kw, sw, dw)
    before = [0] * 4
    after = [0] * 4
    before[h_axis], before[w_axis], after[h_axis], after[w_axis] = pt, pl, pb + eh, pr + ew
    has_pad = any(as_const_int(convert(p)) != 0 for p in (pt, pl, pb + eh, pr + ew))
    pad_value = tir.min_value(str(data.dtype)).value if pool_type == "max" else 0.0
    padded = pad(data, before, after, pad_value, name="pad_temp") if has_pad else data
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    out_shape = list(data.shape)
    out_shape[h_axis], out_shape[w_axis] = OH, OW

    def window(idx: tuple) -> tuple:
        src = list(idx)
        src[h_axis] = idx[h_axis] * sh + ry * dh
        src[w_axis] = idx[w_axis] * sw + rx * dw
        return tuple(src)

    if pool_type == "max":
        return compute(out_shape, lambda idx: te.max(padded[window(idx)], axis=[ry, rx]), "pool_max", tag="pool_max")
    total = compute(out_shape, lambda idx: te.sum(padded[window(idx)], axis=[ry, rx]), "pool_sum", tag="pool_sum")
    if not has_pad or (count_include_pad and eh == 0 and ew == 0):
        return compute(out_shape, lambda idx: total[idx] / const_like(kh * kw, data.dtype), "pool_avg",
                       tag="elemwise")
    # The positions counted: the unpadded input, or (count_include_pad) the input with its declared
    # padding but never ceil mode's extra end padding (PyTorch's rule).
    lo_h, lo_w = (-pt, -pl) if count_include_pad else (0, 0)
    hi_h, hi_w = (convert(H) + pb, convert(W) + pr) if count_include_pad else (H, W)

    def avg(idx: tuple) -> Any:
        y0 = idx[h_axis] * sh - pt
        x0 = idx[w_axis] * sw - pl
        hs, he = tir.max(y0, lo_h), tir.min(y0 + (kh - 1) * dh + 1, hi_h)
        ws, we = tir.max(x0, lo_w), tir.min(x0 + (kw - 1) * dw + 1, hi_w)
        count = ((he - hs + dh - 1) // dh) * ((we - ws + dw - 1) // dw)
        return total[idx] / tir.max(count, 1).astype(str(data.dtype))

    return compute(out_shape, avg, "pool_avg", tag="elemwise")


def pool_out_size_ceil(size: Any, lo: int, hi: int, k: int, s: int, d: int) -> "tuple[int, int]":
    """Output size of a ceil-mode pooling window and the extra end padding it needs.

    As PyTorch: ``ceil((size + lo + hi - dk) / s) + 1`` windows, minus the last one if it would
    start past the input and its start padding. Needs a static ``size``.

    Example:
        >>> pool_out_size_ceil(6, 0, 0, 3, 2, 1)
        (3, 1)
    """
    size = as_const_int(convert(size))
    if size is None:
        raise ValueError("pool2d: ceil_mode=True needs static spatial sizes (the output size depends on them)")
    span = (k - 1) * d + 1
    out = -(-(size + lo + hi - span) // s) + 1
    if (out - 1) * s >= size + lo:
        out -= 1
    return out, max(0, (out - 1) * s + span - (size + lo + hi))


def conv2d_transpose_nchw(
    data: Any, kernel: Any, strides: Any = 1, padding: Any = 0, output_padding: Any = 0, dilation: Any = 1,
    groups: int = 1, out_dtype: "str | None" = None,
) -> Any:
    """Transposed 2-D convolution (the gradient of conv2d w.r.t. its input; PyTorch's
    ``ConvTranspose2d``): data ``(N, C, H, W)``, kernel ``(C, O/groups, KH, KW)`` (IOHW).

    Output size ``(H - 1) * stride - pad_top - pad_bottom + dilation * (KH - 1) + output_padding + 1``.
    Computed as TVM does: a stride-1 convolution with the flipped kernel over the input dilated by
    the stride (zeros between rows/columns) and padded by ``dilation * (K - 1) - pad``; that
    dilated, padded input is one injective stage that reads the data only where it is defined.

    Example:
        >>> from ingot import te
        >>> y = conv2d_transpose_nchw(te.placeholder((1, 4, 5, 5), name="x"), te.placeholder((4, 2, 3, 3), name="w"),
        ...                           strides=2, padding=1, output_padding=1)
        >>> [int(d) for d in y.shape]
        [1, 2, 10, 10]
    """
    from ingot import te

    win = conv_window("conv2d_transpose_nchw", data, strides, padding, dilation, out_dtype)
    (sh, sw), (dh, dw), (pt, pl, pb, pr), out_dtype = win
    oph, opw = pair("conv2d_transpose_nchw", "output_padding", output_padding, minimum=0)
    N, C, H, W = data.shape
    CI, OG, KH, KW = kernel.shape
    kh, kw = as_const_int(convert(KH)), as_const_int(convert(KW))
    if kh is None or kw is None:
        raise ValueError("conv2d_transpose: the kernel's spatial size must be static")
    OH = (convert(H) - 1) * sh - pt - pb + dh * (kh - 1) + oph + 1
    OW = (convert(W) - 1) * sw - pl - pr + dw * (kw - 1) + opw + 1
    # Step 1: the stride-dilated input, shifted by the flipped kernel's padding (may be negative:
    # a padding larger than the kernel crops), of size OH + dh * (kh - 1).
    bh, bw = dh * (kh - 1) - pt, dw * (kw - 1) - pl
    zero = const_like(0, data.dtype)

    def dilated(idx: tuple) -> Any:
        n, c, y, x = idx
        yy, xx = y - bh, x - bw
        inside = [yy >= 0, yy < (convert(H) - 1) * sh + 1, xx >= 0, xx < (convert(W) - 1) * sw + 1]
        if sh > 1:
            inside.append(yy % sh == 0)
        if sw > 1:
            inside.append(xx % sw == 0)
        return tir.if_then_else(tir.all(*inside), data[n, c, yy // sh, xx // sw], zero)

    padded = compute((N, C, OH + dh * (kh - 1), OW + dw * (kw - 1)), dilated, "data_dilate_pad",
                     tag="injective,pad")
    # Step 2: a stride-1 convolution with the flipped kernel (group g reads channels g*cpg..).
    cpg = convert(C) // groups
    rc = te.reduce_axis((0, cpg), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    out_channels = convert(OG) * groups

    def body(idx: tuple) -> Any:
        n, o, y, x = idx
        c = rc if groups == 1 else (o // OG) * cpg + rc
        lhs = padded[n, c, y + ry * dh, x + rx * dw]
        rhs = kernel[c, o if groups == 1 else o % OG, kh - 1 - ry, kw - 1 - rx]
        lhs, rhs = cast_pair(lhs, rhs, out_dtype)
        return te.sum(lhs * rhs, axis=[rc, ry, rx])

    return compute((N, out_channels, OH, OW), body, "conv2d_transpose_nchw", tag="conv2d_transpose_nchw")


def adaptive_pool2d_global(data: Any, pool_type: str = "avg", layout: str = "NCHW") -> Any:
    """Global pooling: H and W reduced to 1 (``keepdims``), average or max.

    Example:
        >>> from ingot import te
        >>> y = adaptive_pool2d_global(te.placeholder((1, 2, 4, 4), name="x"))
    """
    from ingot import te

    h_axis, w_axis = layout.index("H"), layout.index("W")
    H, W = data.shape[h_axis], data.shape[w_axis]
    ry = te.reduce_axis((0, H), name="ry")
    rx = te.reduce_axis((0, W), name="rx")
    out_shape = list(data.shape)
    out_shape[h_axis] = out_shape[w_axis] = 1

    def src(idx: tuple) -> tuple:
        s = list(idx)
        s[h_axis], s[w_axis] = ry, rx
        return tuple(s)

    if pool_type == "max":
        return compute(out_shape, lambda idx: te.max(data[src(idx)], axis=[ry, rx]), "adaptive_pool_max")
    total = compute(out_shape, lambda idx: te.sum(data[src(idx)], axis=[ry, rx]), "adaptive_pool_sum")
    area = (convert(H) * W).astype(str(data.dtype))
    return compute(out_shape, lambda idx: total[idx] / area, "adaptive_pool_avg", tag="elemwise")


def global_avg_pool2d(data: Any, layout: str = "NCHW") -> Any:
    """Average over H and W, keeping them as size-1 axes (TVM's ``global_avg_pool2d``)."""
    return adaptive_pool2d_global(data, "avg", layout)


def _reduce_along(x: Any, axis: int, kind: str, fbody: Any, name: str) -> Any:
    """A keepdims reduction of ``fbody(index)`` along ``axis`` (index has ``k`` at ``axis``)."""
    from ingot import te

    k = te.reduce_axis((0, x.shape[axis]), name="k")
    out_shape = list(x.shape)
    out_shape[axis] = 1
    reducer = {"max": te.max, "sum": te.sum}[kind]

    def body(idx: tuple) -> Any:
        src = list(idx)
        src[axis] = k
        return reducer(fbody(tuple(src)), axis=k)

    return compute(out_shape, body, name)


def _zero_axis(idx: tuple, axis: int) -> tuple:
    out = list(idx)
    out[axis] = convert(idx[axis]) * 0
    return tuple(out)


def softmax(x: Any, axis: int = -1, round_steps_to: "str | None" = None) -> Any:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (four stages, as topi).

    With ``round_steps_to`` (``"float16"``/``"bfloat16"``, for a float32 ``x`` widened from that type)
    the result of each step — ``x - max``, ``exp``, the sum (accumulated in float32), the quotient —
    is rounded to that type, the way numpy evaluates a float16 softmax and hence the way the ONNX
    reference defines its float16 results (within 4 ulp of the exact softmax).

    Example:
        >>> from ingot import te
        >>> y = softmax(te.placeholder((2, 8), name="x"))
    """
    axis = normalize_axis(axis, len(x.shape))
    dtype = str(x.dtype)

    def r(v: Any) -> Any:
        return v.astype(round_steps_to).astype(dtype) if round_steps_to else v

    mx = _reduce_along(x, axis, "max", lambda i: x[i], "T_softmax_maxelem")
    ex = compute(x.shape, lambda i: r(tir.exp(r(x[i] - mx[_zero_axis(i, axis)]))), "T_softmax_exp",
                 tag="elemwise")
    sm = _reduce_along(x, axis, "sum", lambda i: ex[i], "T_softmax_expsum")
    return compute(x.shape, lambda i: r(ex[i] / r(sm[_zero_axis(i, axis)])), "T_softmax_norm", tag="softmax")


def log_softmax(x: Any, axis: int = -1) -> Any:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``.

    Example:
        >>> from ingot import te
        >>> y = log_softmax(te.placeholder((2, 8), name="x"))
    """
    axis = normalize_axis(axis, len(x.shape))
    mx = _reduce_along(x, axis, "max", lambda i: x[i], "T_softmax_maxelem")
    sm = _reduce_along(x, axis, "sum", lambda i: tir.exp(x[i] - mx[_zero_axis(i, axis)]), "T_softmax_expsum")
    return compute(x.shape, lambda i: x[i] - mx[_zero_axis(i, axis)] - tir.log(sm[_zero_axis(i, axis)]),
                   "T_log_softmax", tag="log_softmax")


def layer_norm(x: Any, gamma: Any, beta: Any, axes: Sequence[int] = (-1,), epsilon: float = 1e-5) -> Any:
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over ``axes`` (gamma/beta have those axes' shape).

    Example:
        >>> from ingot import te
        >>> y = layer_norm(te.placeholder((2, 8), name="x"), te.placeholder((8,), name="g"),
        ...                te.placeholder((8,), name="b"))
    """
    from ingot import te

    ndim = len(x.shape)
    axes = sorted(normalize_axis(a, ndim) for a in axes)
    raxes = [te.reduce_axis((0, x.shape[a]), name=f"k{j}") for j, a in enumerate(axes)]
    red_shape = [1 if a in axes else d for a, d in enumerate(x.shape)]
    count = prod([convert(x.shape[a]) for a in axes]).astype(str(x.dtype))

    def src(idx: tuple) -> tuple:
        s = list(idx)
        for r, a in zip(raxes, axes):
            s[a] = r
        return tuple(s)

    def kept(idx: tuple) -> tuple:
        return tuple(convert(v) * 0 if a in axes else v for a, v in enumerate(idx))

    # One pass of statistics: the shifted sums S1 = sum(x - s), S2 = sum((x - s)^2) with the shift
    # s = the row's first element. Both read only x, so a row schedule computes them together
    # (ops/schedule/reduction.py: row_norm_rule), then mean = s + S1/n, var = S2/n - (S1/n)^2.
    # Why the shift: E[x^2] - E[x]^2 cancels catastrophically when |mean| >> std (a row at
    # 100 +- 1 keeps ~4 correct digits in float32); shifted by a sample of the row, the
    # cancellation is bounded by (mean - s)^2 / var, a few units for any row whose first element
    # is not an extreme outlier. Measured vs float64 (768-wide rows, 1e-5 bound): offset 0
    # 2.7e-6, offset 100 8.2e-6; the former two-pass mean/variance had 7.9e-7 and 3.4e-5.
    def shift(i: tuple) -> Any:
        return x[kept(i)]

    def dev(i: tuple) -> Any:
        return x[src(i)] - shift(i)

    s1 = compute(red_shape, lambda i: te.sum(dev(i), axis=raxes), "T_layer_norm_sum")
    s2 = compute(red_shape, lambda i: te.sum(dev(i) * dev(i), axis=raxes), "T_layer_norm_sumsq")
    mean = compute(red_shape, lambda i: shift(i) + s1[i] / count, "T_layer_norm_mean", tag="elemwise")
    eps = const_like(epsilon, x.dtype)

    def rstd(i: tuple) -> Any:
        m = s1[i] / count
        var = te.max(s2[i] / count - m * m, const_like(0.0, x.dtype))  # >= 0 despite rounding
        return const_like(1.0, x.dtype) / tir.sqrt(var + eps)

    inv = compute(red_shape, rstd, "T_layer_norm_rstd", tag="elemwise")

    def body(idx: tuple) -> Any:
        gidx = tuple(idx[a] for a in axes)
        return (x[idx] - mean[kept(idx)]) * inv[kept(idx)] * gamma[gidx] + beta[gidx]

    return compute(x.shape, body, "T_layer_norm", tag="layer_norm")


def group_norm(x: Any, gamma: Any, beta: Any, num_groups: int, epsilon: float = 1e-5) -> Any:
    """Group normalization of ``(N, C, ...)`` over channel groups and all spatial axes.

    Example:
        >>> from ingot import te
        >>> y = group_norm(te.placeholder((1, 4, 2, 2), name="x"), te.placeholder((4,), name="g"),
        ...                te.placeholder((4,), name="b"), num_groups=2)
    """
    from ingot import te

    N, C = x.shape[0], x.shape[1]
    spatial = list(x.shape[2:])
    cpg = convert(C) // num_groups
    rc = te.reduce_axis((0, cpg), name="rc")
    rs = [te.reduce_axis((0, d), name=f"rs{j}") for j, d in enumerate(spatial)]
    count = (cpg * prod(spatial)).astype(str(x.dtype))

    def src(idx: tuple) -> tuple:
        n, g = idx
        return (n, g * cpg + rc) + tuple(rs)

    total = compute((N, num_groups), lambda i: te.sum(x[src(i)], axis=[rc] + rs), "T_group_norm_sum")
    mean = compute((N, num_groups), lambda i: total[i] / count, "T_group_norm_mean", tag="elemwise")

    def dev2(i: tuple) -> Any:
        d = x[src(i)] - mean[i]
        return te.sum(d * d, axis=[rc] + rs)

    var = compute((N, num_groups), dev2, "T_group_norm_var")
    eps = const_like(epsilon, x.dtype)

    def body(idx: tuple) -> Any:
        n, c = idx[0], idx[1]
        g = c // cpg
        return (x[idx] - mean[n, g]) / tir.sqrt(var[n, g] / count + eps) * gamma[c] + beta[c]

    return compute(x.shape, body, "T_group_norm", tag="group_norm")


def batch_norm_inference(
    x: Any, gamma: Any, beta: Any, moving_mean: Any, moving_var: Any, axis: int = 1, epsilon: float = 1e-5,
) -> Any:
    """Inference batch norm: ``(x - mean) / sqrt(var + eps) * gamma + beta`` per channel ``axis``.

    Example:
        >>> from ingot import te
        >>> c = lambda n: te.placeholder((2,), name=n)
        >>> y = batch_norm_inference(te.placeholder((1, 2, 4, 4), name="x"), c("g"), c("b"), c("m"), c("v"))
    """
    axis = normalize_axis(axis, len(x.shape))
    eps = const_like(epsilon, x.dtype)

    def body(idx: tuple) -> Any:
        c = idx[axis]
        return (x[idx] - moving_mean[c]) / tir.sqrt(moving_var[c] + eps) * gamma[c] + beta[c]

    return compute(x.shape, body, "T_batch_norm", tag="broadcast")
