"""Operators that read pre-packed (panel-major) weights: dense and NCHW conv2d / depthwise conv2d.

Note: the default CPU schedules (`ingot.ops.schedule.blocked_gemm_rule`, `conv_oc_rule`) vectorize
over output channels / output columns and want the weights laid out as ``P``-wide panels whose
``P`` lanes are contiguous (P = 16 or 32 floats: one or two AVX-512 registers). For constant
weights the graph pass `ingot.graph.transform.PackWeights` transforms them once at compile time
with the numpy helpers below, and these TE computes read that layout directly, so the kernels
have no per-call packing stage:

    dense:      w_packed[N / P, K, P]            w_packed[jo, k, ji]         = w[jo * P + ji, k]
    conv2d:     w_packed[O / P, C, KH, KW, P]    w_packed[oo, c, y, x, oi]   = w[oo * P + oi, c, y, x]
    conv2d NHWC w_packed[O / P, KH, KW, C, P]    w_packed[oo, y, x, c, oi]   = w_hwio[y, x, c, oo * P + oi]
    depthwise:  w_packed[C / P, KH, KW, P]       w_packed[cb, y, x, ci]      = w[cb * P + ci, 0, y, x]

The depthwise compute also re-lays out its (padded) input channel-blocked inside the kernel
(``data_pack[n, C / P, H + pads, W + pads, P]``, NCHWc): one copy that pads and transposes, after
which output channels are contiguous in both operands and the conv vectorizes over channels at
any width (MobileNet's 14 and 7 included).

Example:
    >>> import numpy as np
    >>> from ingot import te
    >>> w = np.arange(64 * 8, dtype="float32").reshape(64, 8)
    >>> wp = pack_dense_weight(w, 32)
    >>> wp.shape, bool(wp[1, 3, 5] == w[37, 3])
    ((2, 8, 32), True)
    >>> y = dense_packed_weight(te.placeholder((4, 8), name="x"), te.placeholder(wp.shape, name="w"))
    >>> [int(d) for d in y.shape]
    [4, 64]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import tir
from ingot.ir import as_const_int, convert

from ._util import compute, const_like
from ._window import cast_pair, conv_window, out_extent
from .nn import pad_hw

__all__ = [
    "pack_dense_weight", "unpack_dense_weight", "pack_conv2d_weight", "unpack_conv2d_weight",
    "pack_depthwise_weight", "unpack_depthwise_weight", "dense_packed_weight", "conv2d_nchw_packed_weight",
    "depthwise_conv2d_nchw_packed_weight", "pack_conv2d_nhwc_weight", "unpack_conv2d_nhwc_weight",
    "conv2d_nhwc_packed_weight",
]


def _check_panel(what: str, extent: int, panel: int) -> None:
    if panel <= 0 or extent % panel:
        raise ValueError(f"{what}: {extent} is not a multiple of the panel width {panel}; keep the unpacked "
                         f"operator for this shape (PackWeights does)")


# -- numpy packing (compile time) ---------------------------------------------------------------


def pack_dense_weight(w: np.ndarray, panel: int) -> np.ndarray:
    """``w[N, K]`` → ``[N / panel, K, panel]`` (dense/linear weight, rows = output features).

    Example:
        >>> pack_dense_weight(np.zeros((32, 4), "float32"), 16).shape
        (2, 4, 16)
    """
    n, k = w.shape
    _check_panel("pack_dense_weight: output features", n, panel)
    return np.ascontiguousarray(w.reshape(n // panel, panel, k).transpose(0, 2, 1))


def unpack_dense_weight(wp: np.ndarray) -> np.ndarray:
    """Inverse of `pack_dense_weight`.

    Example:
        >>> w = np.arange(64, dtype="float32").reshape(16, 4)
        >>> bool((unpack_dense_weight(pack_dense_weight(w, 8)) == w).all())
        True
    """
    no, k, p = wp.shape
    return np.ascontiguousarray(wp.transpose(0, 2, 1).reshape(no * p, k))


def pack_conv2d_weight(w: np.ndarray, panel: int) -> np.ndarray:
    """OIHW ``w[O, C, KH, KW]`` → ``[O / panel, C, KH, KW, panel]`` (TVM's ``OIHW{panel}o``).

    Example:
        >>> pack_conv2d_weight(np.zeros((32, 3, 3, 3), "float32"), 16).shape
        (2, 3, 3, 3, 16)
    """
    o, c, kh, kw = w.shape
    _check_panel("pack_conv2d_weight: output channels", o, panel)
    return np.ascontiguousarray(w.reshape(o // panel, panel, c, kh, kw).transpose(0, 2, 3, 4, 1))


def unpack_conv2d_weight(wp: np.ndarray) -> np.ndarray:
    """Inverse of `pack_conv2d_weight`.

    Example:
        >>> w = np.random.rand(32, 2, 3, 3).astype("float32")
        >>> bool((unpack_conv2d_weight(pack_conv2d_weight(w, 16)) == w).all())
        True
    """
    oo, c, kh, kw, p = wp.shape
    return np.ascontiguousarray(wp.transpose(0, 4, 1, 2, 3).reshape(oo * p, c, kh, kw))


def pack_conv2d_nhwc_weight(w: np.ndarray, panel: int) -> np.ndarray:
    """HWIO ``w[KH, KW, C, O]`` → ``[O / panel, KH, KW, C, panel]``: for each panel of output
    channels, the whole reduction (ky, kx, c) in the order an NHWC conv walks it.

    Example:
        >>> pack_conv2d_nhwc_weight(np.zeros((3, 3, 8, 32), "float32"), 16).shape
        (2, 3, 3, 8, 16)
    """
    kh, kw, c, o = w.shape
    _check_panel("pack_conv2d_nhwc_weight: output channels", o, panel)
    return np.ascontiguousarray(w.reshape(kh, kw, c, o // panel, panel).transpose(3, 0, 1, 2, 4))


def unpack_conv2d_nhwc_weight(wp: np.ndarray) -> np.ndarray:
    """Inverse of `pack_conv2d_nhwc_weight` (back to HWIO).

    Example:
        >>> w = np.random.rand(3, 3, 2, 32).astype("float32")
        >>> bool((unpack_conv2d_nhwc_weight(pack_conv2d_nhwc_weight(w, 16)) == w).all())
        True
    """
    oo, kh, kw, c, p = wp.shape
    return np.ascontiguousarray(wp.transpose(1, 2, 3, 0, 4).reshape(kh, kw, c, oo * p))


def pack_depthwise_weight(w: np.ndarray, panel: int) -> np.ndarray:
    """Depthwise OIHW ``w[C, 1, KH, KW]`` → ``[C / panel, KH, KW, panel]``.

    Example:
        >>> pack_depthwise_weight(np.zeros((32, 1, 3, 3), "float32"), 16).shape
        (2, 3, 3, 16)
    """
    c, one, kh, kw = w.shape
    if one != 1:
        raise ValueError(f"pack_depthwise_weight: weight shape {w.shape} is not depthwise (C, 1, KH, KW)")
    _check_panel("pack_depthwise_weight: channels", c, panel)
    return np.ascontiguousarray(w.reshape(c // panel, panel, kh, kw).transpose(0, 2, 3, 1))


def unpack_depthwise_weight(wp: np.ndarray) -> np.ndarray:
    """Inverse of `pack_depthwise_weight`.

    Example:
        >>> w = np.random.rand(32, 1, 3, 3).astype("float32")
        >>> bool((unpack_depthwise_weight(pack_depthwise_weight(w, 16)) == w).all())
        True
    """
    cb, kh, kw, p = wp.shape
    return np.ascontiguousarray(wp.transpose(0, 3, 1, 2).reshape(cb * p, 1, kh, kw))


# -- TE computes (kernels) ----------------------------------------------------------------------


def _times(dim: Any, p: Any) -> Any:
    """``dim * p`` as an int when both are constants (shapes stay plain ints)."""
    d, q = as_const_int(convert(dim)), as_const_int(convert(p))
    return d * q if d is not None and q is not None else convert(dim) * p


def dense_packed_weight(x: Any, w_packed: Any, bias: Any = None, out_dtype: "str | None" = None) -> Any:
    """``x @ w.T (+ bias)`` reading ``w`` packed as ``[N / P, K, P]`` (`pack_dense_weight`).

    Example:
        >>> from ingot import te
        >>> y = dense_packed_weight(te.placeholder((2, 8), name="x"), te.placeholder((2, 8, 16), name="w"))
        >>> [int(d) for d in y.shape]
        [2, 32]
    """
    from ingot import te

    out_dtype = out_dtype or str(x.dtype)
    no, K, P = w_packed.shape
    k = te.reduce_axis((0, K), name="k")
    out_shape = tuple(x.shape[:-1]) + (_times(no, P),)

    def body(idx: tuple) -> Any:
        j = idx[-1]
        lhs, rhs = cast_pair(x[idx[:-1] + (k,)], w_packed[j // P, k, j % P], out_dtype)
        return te.sum(lhs * rhs, axis=k)

    out = compute(out_shape, body, "T_dense", tag="dense,packed_weight")
    if bias is None:
        return out
    return compute(out_shape, lambda idx: out[idx] + bias[idx[-1]], "T_add_bias", tag="broadcast")


def conv2d_nchw_packed_weight(data: Any, w_packed: Any, strides: Any = 1, padding: Any = 0, dilation: Any = 1,
                              out_dtype: "str | None" = None) -> Any:
    """NCHW conv2d (groups = 1) reading the weight packed as ``[O / P, C, KH, KW, P]``.

    Example:
        >>> from ingot import te
        >>> y = conv2d_nchw_packed_weight(te.placeholder((1, 3, 8, 8), name="x"),
        ...                               te.placeholder((2, 3, 3, 3, 16), name="w"), padding=1)
        >>> [int(d) for d in y.shape]
        [1, 32, 8, 8]
    """
    from ingot import te

    win = conv_window("conv2d_nchw_packed_weight", data, strides, padding, dilation, out_dtype)
    (sh, sw), (dh, dw), (pt, pl, pb, pr), out_dtype = win
    N, C, H, W = data.shape
    OO, CW, KH, KW, P = w_packed.shape
    OH, OW = out_extent(H, pt + pb, KH, sh, dh), out_extent(W, pl + pr, KW, sw, dw)
    padded = pad_hw(data, win.padding, 2, 3)
    rc = te.reduce_axis((0, CW), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")

    def body(idx: tuple) -> Any:
        n, o, y, x = idx
        lhs, rhs = cast_pair(padded[n, rc, y * sh + ry * dh, x * sw + rx * dw], w_packed[o // P, rc, ry, rx, o % P],
                              out_dtype)
        return te.sum(lhs * rhs, axis=[rc, ry, rx])

    return compute((N, _times(OO, P), OH, OW), body, "conv2d_nchw", tag="conv2d_nchw,packed_weight")


def depthwise_conv2d_nchw_packed_weight(data: Any, w_packed: Any, strides: Any = 1, padding: Any = 0,
                                        dilation: Any = 1, out_dtype: "str | None" = None) -> Any:
    """Depthwise NCHW conv2d (groups = C = O) with the weight packed as ``[C / P, KH, KW, P]``.

    The input is copied once, padded and channel-blocked (``data_pack[n, C/P, H', W', P]``), in
    the same kernel, so that both operands are contiguous over P channels (see the module note).

    Example:
        >>> from ingot import te
        >>> y = depthwise_conv2d_nchw_packed_weight(te.placeholder((1, 32, 7, 7), name="x"),
        ...                                         te.placeholder((2, 3, 3, 16), name="w"), padding=1)
        >>> [int(d) for d in y.shape]
        [1, 32, 7, 7]
    """
    from ingot import te

    win = conv_window("depthwise_conv2d_nchw_packed_weight", data, strides, padding, dilation, out_dtype)
    (sh, sw), (dh, dw), (pt, pl, pb, pr), out_dtype = win
    N, C, H, W = data.shape
    CB, KH, KW, P = w_packed.shape
    if as_const_int(convert(C)) is not None and as_const_int(convert(C)) != _times(CB, P):
        raise ValueError(f"depthwise_conv2d_nchw_packed_weight: data has {C} channels but the packed weight "
                         f"{tuple(w_packed.shape)} holds {_times(CB, P)}")
    OH, OW = out_extent(H, pt + pb, KH, sh, dh), out_extent(W, pl + pr, KW, sw, dw)
    HP, WP = convert(H) + (pt + pb), convert(W) + (pl + pr)

    def pack_body(idx: tuple) -> Any:
        n, cb, h, w, ci = idx
        src = data[n, cb * P + ci, h - pt, w - pl]
        conds = [c for c, p in ((h >= pt, pt), (h < convert(H) + pt, pb), (w >= pl, pl), (w < convert(W) + pl, pr))
                 if p]
        if not conds:
            return data[n, cb * P + ci, h, w]
        return tir.if_then_else(tir.all(*conds), src, const_like(0.0, data.dtype))

    packed = compute((N, CB, HP, WP, P), pack_body, "data_pack", tag="injective,pad")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")

    def body(idx: tuple) -> Any:
        n, o, y, x = idx
        lhs, rhs = cast_pair(packed[n, o // P, y * sh + ry * dh, x * sw + rx * dw, o % P],
                              w_packed[o // P, ry, rx, o % P], out_dtype)
        return te.sum(lhs * rhs, axis=[ry, rx])

    return compute((N, _times(CB, P), OH, OW), body, "depthwise_conv2d_nchw",
                   tag="depthwise_conv2d_nchw,packed_weight")


def conv2d_nhwc_packed_weight(data: Any, w_packed: Any, strides: Any = 1, padding: Any = 0, dilation: Any = 1,
                              out_dtype: "str | None" = None) -> Any:
    """NHWC conv2d (groups = 1) reading the weight packed as ``[O / P, KH, KW, C, P]``
    (`pack_conv2d_nhwc_weight` of an HWIO weight); output ``(N, OH, OW, O)``.

    Example:
        >>> from ingot import te
        >>> y = conv2d_nhwc_packed_weight(te.placeholder((1, 8, 8, 3), name="x"),
        ...                               te.placeholder((2, 3, 3, 3, 16), name="w"), padding=1)
        >>> [int(d) for d in y.shape]
        [1, 8, 8, 32]
    """
    from ingot import te

    win = conv_window("conv2d_nhwc_packed_weight", data, strides, padding, dilation, out_dtype)
    (sh, sw), (dh, dw), (pt, pl, pb, pr), out_dtype = win
    N, H, W, C = data.shape
    OO, KH, KW, CW, P = w_packed.shape
    if as_const_int(convert(C)) is not None and as_const_int(convert(CW)) is not None \
            and as_const_int(convert(C)) != as_const_int(convert(CW)):
        raise ValueError(f"conv2d_nhwc_packed_weight: data has {C} channels but the packed weight "
                         f"{tuple(w_packed.shape)} reduces over {CW}")
    OH, OW = out_extent(H, pt + pb, KH, sh, dh), out_extent(W, pl + pr, KW, sw, dw)
    padded = pad_hw(data, win.padding, 1, 2)
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    rc = te.reduce_axis((0, CW), name="rc")

    def body(idx: tuple) -> Any:
        n, y, x, o = idx
        lhs, rhs = cast_pair(padded[n, y * sh + ry * dh, x * sw + rx * dw, rc], w_packed[o // P, ry, rx, rc, o % P],
                              out_dtype)
        return te.sum(lhs * rhs, axis=[ry, rx, rc])

    return compute((N, OH, OW, _times(OO, P)), body, "conv2d_nhwc", tag="conv2d_nhwc,packed_weight")
