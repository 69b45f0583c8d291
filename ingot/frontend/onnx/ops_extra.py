"""ONNX converters on the frontend's extra graph ops (`ingot.graph.op.onnx_extra`): ArgMax, ArgMin,
TopK, CumSum, BitShift, BitwiseAnd/Or/Xor/Not, Resize/Upsample (nearest, linear),
QuantizeLinear/DequantizeLinear (integer types), LpNormalization, ScatterElements/ScatterND, GatherND, CumProd,
ReverseSequence, inverse and hyperbolic trigonometry.

Note: TopK is the graph op ``topk`` (values and indices from one ranking, `ingot.ops.sort`); CumSum's ``reverse`` is a flip
(``take`` with reversed positions) on both sides of the scan. GatherND and ScatterND view data as rows (one row per
index tuple) and become one ``take`` / ``scatter_elements``; CumProd is a masked ``prod`` (a log-depth scan on long
axes); ReverseSequence is a ``gather_elements`` along time. A CumSum/CumProd axis given at run time builds every
axis and selects by the value.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("ArgMax", 13) is not None
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import graph as G
from ingot.graph.op import onnx_extra as X
from ingot.graph.op_registry import get_op_def

from . import ops_dynamic
from ._common import as_array, is_static, norm_axes, static_ints
from .importer import register


def _axis(ctx: Any, node: Any, x: Any, axis: int) -> int:
    return norm_axes([axis], len(ctx.shape(x)))[0]


def _arg(kind: str) -> Any:
    def convert(ctx: Any, node: Any) -> Any:
        x = node.input(0)
        axis = _axis(ctx, node, x, node.attr("axis", 0))
        keep, last = bool(node.attr("keepdims", 1)), bool(node.attr("select_last_index", 0))
        fn = G.op.argmax if kind == "max" else G.op.argmin
        return ctx.emit(fn(ctx.expr(x), axis=axis, keepdims=keep, select_last_index=last))

    return convert


register("ArgMax", since=1)(_arg("max"))
register("ArgMin", since=1)(_arg("min"))


@register("TopK", since=1)
def _topk(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    if node.opset >= 10 and not is_static(node.input(1)):  # K computed at run time
        from .ops_dynamic import dynamic_topk

        return dynamic_topk(ctx, node, _axis(ctx, node, x, node.attr("axis", -1)))
    if node.opset >= 10:
        k = static_ints(node.input(1), node, "K")[0]
    else:
        k = int(node.attr("k"))
    axis = _axis(ctx, node, x, node.attr("axis", -1))
    largest, is_sorted = bool(node.attr("largest", 1)), bool(node.attr("sorted", 1))
    n = ctx.shape(x)[axis]
    if not isinstance(n, int):
        raise node.error(f"TopK needs a static size on axis {axis}, got {n}; fix it with shape_dict")
    if not 0 <= int(k) <= n:
        raise node.error(f"TopK: K={k} is outside [0, {n}] (the size of axis {axis})")
    attrs = {"k": int(k), "axis": axis, "largest": largest, "sorted": is_sorted}
    if is_static(x):
        values, indices = get_op_def("topk").numpy([as_array(x)], {**attrs, "ret_type": "both", "dtype": "int64"})
        return [values, indices]
    pair = ctx.emit(G.op.topk(ctx.expr(x), **attrs))
    return [ctx.emit(G.TupleGetItem(pair, 0)), ctx.emit(G.TupleGetItem(pair, 1))]


def _flip(ctx: Any, value: Any, axis: int) -> Any:
    n = ctx.shape(value)[axis]
    return ctx.expr(ctx.emit(G.op.take(ctx.expr(value), G.const(np.arange(n - 1, -1, -1, dtype="int64")), axis=axis)))


@register("CumSum", since=11)
def _cumsum(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    if not is_static(node.input(1)):  # a run-time axis: every axis built, the value picks one
        return _per_axis_value(ctx, node, x, node.input(1), lambda axis: _cumsum_on(ctx, node, ctx.expr(x), axis))
    return _cumsum_on(ctx, node, x, _axis(ctx, node, x, static_ints(node.input(1), node, "axis")[0]))


def _cumsum_on(ctx: Any, node: Any, x: Any, axis: int) -> Any:
    exclusive, reverse = bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0))
    if is_static(x):
        arr = as_array(x)
        arr = np.flip(arr, axis) if reverse else arr
        out = np.cumsum(arr, axis=axis).astype(arr.dtype)
        out = out - arr if exclusive else out
        return np.flip(out, axis).copy() if reverse else out
    if reverse and not isinstance(ctx.shape(x)[axis], int):
        raise node.error(f"CumSum reverse=1 needs a static size on axis {axis}")
    e = _flip(ctx, x, axis) if reverse else ctx.expr(x)
    out = ctx.emit(G.op.cumsum(e, axis=axis, exclusive=exclusive))
    return _flip(ctx, out, axis) if reverse else out


def _bitwise(kind: str) -> Any:
    def convert(ctx: Any, node: Any) -> Any:
        a, b = node.input(0), node.input(1)
        if kind == "shift":
            direction = str(node.attr("direction", "")).upper()
            if direction not in ("LEFT", "RIGHT"):
                raise node.error(f"BitShift direction must be 'LEFT' or 'RIGHT', got {direction!r}")
            op = "shift_left" if direction == "LEFT" else "shift_right"
        else:
            op = kind
        return ctx.emit(X.bitwise(ctx.expr(a), ctx.expr(b), op))

    return convert


register("BitShift", since=11)(_bitwise("shift"))
register("BitwiseAnd", since=18)(_bitwise("and"))
register("BitwiseOr", since=18)(_bitwise("or"))
register("BitwiseXor", since=18)(_bitwise("xor"))


@register("BitwiseNot", since=18)
def _bitwise_not(ctx: Any, node: Any) -> Any:
    return ctx.emit(X.bitwise_not(ctx.expr(node.input(0))))


# -- Resize / Upsample (graph op resize2d: NCHW, H and W only) ------------------------------------

_COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


def _resize_sizes(node: Any, in_shape: list, scales: "list | None", sizes: "list | None",
                  axes: "list | None") -> "list | None":
    ndim = len(in_shape)
    axes = norm_axes(axes, ndim) if axes else list(range(ndim))
    out = list(in_shape)
    if sizes:
        policy = node.attr("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            for a, s in zip(axes, sizes):
                out[a] = int(s)
        else:
            ratios = [s / in_shape[a] for a, s in zip(axes, sizes)]
            r = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                out[a] = int(np.floor(r * in_shape[a] + 0.5))
        return out
    for a, s in zip(axes, scales):
        exact = in_shape[a] * float(s)
        out[a] = int(np.floor(exact))
        # resize2d maps coordinates with in/out; ONNX with 1/scale: the same only when in*scale is whole.
        if abs(exact - round(exact)) > 1e-4 and out[a] != in_shape[a]:
            return None  # not the kernel's coordinate map (the builtin follows ONNX's)
    return out


def _resize(ctx: Any, node: Any, scales: Any, sizes: Any, mode_default: str, rounding_default: str) -> Any:
    """Resize by the ``resize2d`` kernel, or None where it does not cover the case (the caller then runs the
    ``resize`` builtin): a batch or channel axis resized, antialiased downsampling, a scale giving a
    fractional size."""
    x = node.input(0)
    in_shape = [d for d in ctx.shape(x)]
    mode = node.attr("mode", "nearest")
    coord = node.attr("coordinate_transformation_mode", mode_default)
    if len(in_shape) != 4 or not all(isinstance(d, int) for d in in_shape) or mode not in ("nearest", "linear",
                                                                                           "bilinear"):
        return None
    if coord not in _COORD_MODES:
        raise node.error(f"coordinate_transformation_mode {coord!r} is not supported (supported: {_COORD_MODES})")
    out = _resize_sizes(node, in_shape, scales, sizes, node.attr("axes"))
    if out is None or out[:2] != in_shape[:2] or (
            node.attr("antialias", 0) and (out[2] < in_shape[2] or out[3] < in_shape[3])):
        return None
    if out == in_shape and coord != "tf_crop_and_resize":
        return x
    method = "nearest_neighbor" if mode == "nearest" else "linear"
    rounding = node.attr("nearest_mode", rounding_default) if method == "nearest_neighbor" else ""
    return ctx.emit(G.op.resize2d(ctx.expr(x), (out[2], out[3]), layout="NCHW", method=method,
                                  coordinate_transformation_mode=coord, rounding_method=rounding))


def _kernel_resizes(ctx: Any, node: Any, roi: Any, scales: Any, sizes: Any) -> bool:
    """Whether the ``resize2d`` kernel may cover this Resize (`_resize` decides the rest): static 4-D input,
    scales and sizes known at import time, nearest or linear; else it runs as the ``resize`` builtin."""
    shape = ctx.shape(node.input(0))
    return (all(v is None or is_static(v) for v in (roi, scales, sizes)) and len(shape) == 4
            and all(isinstance(d, int) for d in shape)
            and node.attr("mode", "nearest") in ("nearest", "linear", "bilinear")
            and node.attr("coordinate_transformation_mode") in (None, *_COORD_MODES))


def _builtin_resize(ctx: Any, node: Any, roi: Any, scales: Any, sizes: Any, coord: str, rounding: str) -> Any:
    """Resize by the executor's ``resize`` builtin (`ingot.graph.runtime_resize`, ONNX's numpy semantics):
    run-time roi/scales/sizes, cubic, antialias, N-D. The resized axes are static when their sizes are
    known here, else fresh dims."""
    from ingot.graph.runtime_resize import resize_output_shape

    x = node.input(0)
    shape = list(ctx.shape(x))
    axes = norm_axes(node.attr("axes"), len(shape)) if node.attr("axes") else list(range(len(shape)))
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    dims: list = list(shape)
    static_scales, static_sizes = (as_array(v).reshape(-1) if v is not None and is_static(v) else None
                                   for v in (scales, sizes))
    if sizes is not None and static_sizes is not None and static_sizes.size:
        static_scales = None  # sizes win
    elif scales is None or static_scales is None or not static_scales.size:
        static_scales = static_sizes = None  # some size only the run knows
    if all(isinstance(d, int) for d in shape) and (static_scales is not None or static_sizes is not None):
        dims = resize_output_shape(shape, static_scales, static_sizes, axes, policy)[0]
    else:
        for a, name in zip(axes, ops_dynamic.fresh_dims(ctx, len(axes))):
            dims[a] = name
    empty = np.zeros(0, "float32")
    args = [x] + [v if v is not None else empty for v in (roi, scales)] + [
        sizes if sizes is not None else np.zeros(0, "int64")]
    mode = node.attr("mode", "nearest")
    for what, value, allowed in (("mode", mode, ("nearest", "linear", "bilinear", "cubic")),
                                 ("coordinate_transformation_mode", coord, _COORD_MODES + (
                                     "half_pixel_symmetric", "tf_crop_and_resize")),
                                 ("nearest_mode", node.attr("nearest_mode", rounding), (
                                     "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")),
                                 ("keep_aspect_ratio_policy", policy, ("stretch", "not_larger", "not_smaller"))):
        if value not in allowed:
            raise node.error(f"{what} {value!r} is not an ONNX Resize choice (one of {allowed})")
    params = {"mode": "linear" if mode == "bilinear" else mode, "coordinate_transformation_mode": coord,
              "nearest_mode": node.attr("nearest_mode", rounding), "cubic_coeff_a": float(node.attr("cubic_coeff_a", -0.75)),
              "exclude_outside": int(node.attr("exclude_outside", 0)),
              "extrapolation_value": float(node.attr("extrapolation_value", 0.0)),
              "antialias": int(node.attr("antialias", 0)), "keep_aspect_ratio_policy": policy,
              "axes": tuple(axes)}
    return ctx.emit(G.op.builtin("resize", *[ctx.expr(a) for a in args], params=params,
                                 outputs=((tuple(dims), ctx.dtype(x)),)))


def _floats(value: Any, node: Any, what: str) -> "list | None":
    if value is None:
        return None
    if not is_static(value):
        raise node.error(f"{what} must be known at import time (a constant or an initializer)")
    array = as_array(value).reshape(-1)
    return [float(v) for v in array] if array.size else None


@register("Resize", since=10)
def _resize10(ctx: Any, node: Any) -> Any:
    # Opset 10: (X, scales), asymmetric coordinates, nearest rounds down.
    out = None
    if _kernel_resizes(ctx, node, None, node.input(1), None):
        out = _resize(ctx, node, _floats(node.input(1), node, "scales"), None, "asymmetric", "floor")
    return out if out is not None else _builtin_resize(ctx, node, None, node.input(1), None, "asymmetric", "floor")


@register("Resize", since=11)
def _resize11(ctx: Any, node: Any) -> Any:
    roi, scales, sizes = node.input(1), node.input(2), node.input(3)
    out = None
    if node.attr("coordinate_transformation_mode") != "tf_crop_and_resize" and _kernel_resizes(
            ctx, node, None, scales, sizes):
        sizes_list = static_ints(sizes, node, "sizes") if sizes is not None else None
        out = _resize(ctx, node, _floats(scales, node, "scales"), sizes_list or None, "half_pixel",
                      "round_prefer_floor")
    if out is None:
        coord = node.attr("coordinate_transformation_mode", "half_pixel")
        out = _builtin_resize(ctx, node, roi, scales, sizes, coord, "round_prefer_floor")
    return out


@register("Upsample", since=7)
def _upsample(ctx: Any, node: Any) -> Any:
    scales = np.array(node.attr("scales"), "float32") if node.opset < 9 else node.input(1)
    out = None
    if _kernel_resizes(ctx, node, None, scales, None):
        out = _resize(ctx, node, _floats(scales, node, "scales"), None, "asymmetric", "floor")
    return out if out is not None else _builtin_resize(ctx, node, None, scales, None, "asymmetric", "floor")


# -- QuantizeLinear / DequantizeLinear (integer types; per-tensor, per-axis and blocked scales) ----

_QTYPES = ("int8", "uint8", "int16", "uint16", "int32", "int4", "uint4", "int2", "uint2")
# ranges by name: np.iinfo does not know the sub-byte types (int4/uint4 are ml_dtypes' when present)
_QRANGE = {"int2": (-2, 1), "uint2": (0, 3), "int4": (-8, 7), "uint4": (0, 15)}


def _qrange(qdt: str) -> tuple:
    return _QRANGE.get(qdt) or (np.iinfo(qdt).min, np.iinfo(qdt).max)


def _emulated(dtype: str) -> bool:
    from ingot.ir.dtype import EMULATED_FLOATS

    return dtype in EMULATED_FLOATS


def _per_axis(ctx: Any, node: Any, param: Any, x_shape: list, axis: int) -> Any:
    """``param`` (scale or zero point) shaped to broadcast against x: scalar, 1-D along ``axis``, or
    blocked (same rank as x, each entry repeated ``block_size`` times along ``axis``)."""
    pshape = list(ctx.shape(param))
    e = ctx.expr(param)
    if len(pshape) == 0 or (len(pshape) == 1 and pshape[0] == 1):
        return e
    block = int(node.attr("block_size", 0))
    if block:
        rep = G.const(np.arange(x_shape[axis], dtype="int64") // block)
        return ctx.expr(ctx.emit(G.op.take(e, rep, axis=axis)))
    if len(pshape) != 1 or pshape[0] != x_shape[axis]:
        raise node.error(f"scale/zero point of shape {pshape} does not match axis {axis} of the input "
                         f"{x_shape} (per-tensor, per-axis or blocked with block_size)")
    return ctx.expr(ctx.emit(G.op.reshape(e, [x_shape[axis] if a == axis else 1 for a in range(len(x_shape))])))


@register("DequantizeLinear", since=10)
def _dequantize(ctx: Any, node: Any) -> Any:
    x, scale, zp = node.input(0), node.input(1), node.input(2)
    xs, xdt = ctx.sinfo(x)
    if xdt not in _QTYPES and not _emulated(xdt):
        raise node.error(f"quantized type {xdt} is not supported (supported: {_QTYPES} and float8/float4)")
    fdt = ctx.dtype(scale)
    axis = norm_axes([node.attr("axis", 1)], max(len(xs), 1))[0] if xs else 0
    y = ctx.expr(ctx.emit(G.op.astype(ctx.expr(x), fdt)))   # exact decode for float8/float4
    if zp is not None:
        z = ctx.expr(ctx.emit(G.op.astype(_per_axis(ctx, node, zp, list(xs), axis), fdt)))
        y = ctx.expr(ctx.emit(G.op.subtract(y, z)))
    return ctx.emit(G.op.multiply(y, _per_axis(ctx, node, scale, list(xs), axis)))


@register("QuantizeLinear", since=10)
def _quantize(ctx: Any, node: Any) -> Any:
    from .importer import np_dtype

    x, scale, zp = node.input(0), node.input(1), node.input(2)
    xs = list(ctx.shape(x))
    if zp is not None:
        qdt = ctx.dtype(zp)
    elif node.attr("output_dtype"):
        qdt = np_dtype(int(node.attr("output_dtype")))
    else:
        qdt = "uint8"
    if qdt not in _QTYPES and not _emulated(qdt):
        raise node.error(f"quantized type {qdt} is not supported (supported: {_QTYPES} and float8/float4)")
    axis = norm_axes([node.attr("axis", 1)], max(len(xs), 1))[0] if xs else 0
    fdt = ctx.dtype(x)
    if _emulated(qdt):
        # float targets: x / scale (+ zero point, 0 in practice) rounded to nearest even by the cast itself.
        q = ctx.expr(ctx.emit(G.op.divide(ctx.expr(x), _per_axis(ctx, node, scale, xs, axis))))
        if zp is not None:
            z = ctx.expr(ctx.emit(G.op.astype(_per_axis(ctx, node, zp, xs, axis), fdt)))
            q = ctx.expr(ctx.emit(G.op.add(q, z)))
        return ctx.emit(G.op.unary.cast_emulated(q, qdt, bool(node.attr("saturate", 1))))
    # round half to even (C nearbyint / numpy round), add the zero point, saturate, convert.
    q = ctx.expr(ctx.emit(G.op.divide(ctx.expr(x), _per_axis(ctx, node, scale, xs, axis))))
    q = ctx.expr(ctx.emit(G.op.round(q)))
    if zp is not None:
        z = ctx.expr(ctx.emit(G.op.astype(_per_axis(ctx, node, zp, xs, axis), fdt)))
        q = ctx.expr(ctx.emit(G.op.add(q, z)))
    lo, hi = _qrange(qdt)
    q = ctx.expr(ctx.emit(G.op.clip(q, float(lo), float(hi))))
    return ctx.emit(G.op.astype(q, qdt))


@register("LpNormalization", since=1)
def _lp_normalization(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    axis = _axis(ctx, node, x, node.attr("axis", -1))
    p = int(node.attr("p", 2))
    e = ctx.expr(x)
    if p == 2:
        sq = ctx.expr(ctx.emit(G.op.multiply(e, e)))
        norm = ctx.emit(G.op.sqrt(ctx.expr(ctx.emit(G.op.sum(sq, axis=[axis], keepdims=True)))))
    elif p == 1:
        norm = ctx.emit(G.op.sum(ctx.expr(ctx.emit(G.op.abs(e))), axis=[axis], keepdims=True))
    else:
        raise node.error(f"p must be 1 or 2, got {p}")
    # A zero norm means a zero slice: divide it by 1 (ONNX gives 0 there, not 0/0).
    n = ctx.expr(norm)
    dt = ctx.dtype(x)
    zero = G.const(np.zeros((), dt))
    safe = ctx.emit(G.op.where(ctx.expr(ctx.emit(G.op.equal(n, zero))), G.const(np.ones((), dt)), n))
    return ctx.emit(G.op.divide(e, ctx.expr(safe)))


@register("Scatter", since=9)  # the deprecated name of ScatterElements
@register("ScatterElements", since=11)
def _scatter_elements(ctx: Any, node: Any) -> Any:
    data, idx, upd = (ctx.expr(node.input(k)) for k in range(3))
    axis = _axis(ctx, node, node.input(0), node.attr("axis", 0))
    return ctx.emit(X.scatter_elements(data, idx, upd, axis=axis, reduction=node.attr("reduction", "none")))


@register("ScatterND", since=11)
def _scatter_nd(ctx: Any, node: Any) -> Any:
    # Rows of data viewed as (prod(shape[:k]), rest): each index tuple is one row number, so
    # ScatterND is a ScatterElements on axis 0 of that view with the row numbers broadcast over `rest`.
    data, idx, upd = node.input(0), node.input(1), node.input(2)
    ds, ishape, us = list(ctx.shape(data)), list(ctx.shape(idx)), list(ctx.shape(upd))
    if not all(isinstance(d, int) for d in ds + ishape + us):
        raise node.error("ScatterND needs static shapes; fix the dims with shape_dict")
    k = ishape[-1]
    rows, rest = int(np.prod(ds[:k], dtype=np.int64)), int(np.prod(ds[k:], dtype=np.int64))
    m = int(np.prod(ishape[:-1], dtype=np.int64))
    strides = np.array([int(np.prod(ds[j + 1:k], dtype=np.int64)) for j in range(k)], dtype="int64")
    e_idx = ctx.expr(ctx.emit(G.op.astype(ctx.expr(idx), "int64")))
    # negative entries count from the end of their own axis
    dims = G.const(np.array(ds[:k], dtype="int64"))
    wrapped = ctx.expr(ctx.emit(G.op.where(ctx.expr(ctx.emit(G.op.less(e_idx, G.const(np.zeros((), "int64"))))),
                                           ctx.expr(ctx.emit(G.op.add(e_idx, dims))), e_idx)))
    lin = ctx.expr(ctx.emit(G.op.sum(ctx.expr(ctx.emit(G.op.multiply(wrapped, G.const(strides)))), axis=[-1])))
    lin = ctx.expr(ctx.emit(G.op.reshape(lin, (m, 1))))
    lin = ctx.expr(ctx.emit(G.op.broadcast_to(lin, (m, rest))))
    d2 = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(data), (rows, rest))))
    u2 = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(upd), (m, rest))))
    out = ctx.expr(ctx.emit(X.scatter_elements(d2, lin, u2, axis=0, reduction=node.attr("reduction", "none"))))
    return ctx.emit(G.op.reshape(out, tuple(ds)))


def _math(fn: str) -> Any:
    def convert(ctx: Any, node: Any) -> Any:
        return ctx.emit(X.unary_math(ctx.expr(node.input(0)), fn))

    return convert


for _op, _fn in (("Asin", "asin"), ("Acos", "acos"), ("Atan", "atan"), ("Sinh", "sinh"), ("Cosh", "cosh"),
                 ("Asinh", "asinh"), ("Acosh", "acosh"), ("Atanh", "atanh")):
    register(_op, since=7 if _fn in ("asin", "acos", "atan") else 9)(_math(_fn))


# -- GatherND, CumProd, ReverseSequence (composed of take / prod / gather_elements) -------------


def _static_axis_size(ctx: Any, node: Any, x: Any, axis: int, what: str) -> int:
    n = ctx.shape(x)[axis]
    if not isinstance(n, int):
        raise node.error(f"{what} needs a static size on axis {axis}, got {n}; fix it with shape_dict")
    return n


def _dim_scalar(ctx: Any, d: Any) -> Any:
    """A (1,) int64 tensor holding dim ``d`` (not 0-d: the run-time-shape executor stores 0-d values as
    (1,)). A symbolic dim is counted at run time: the sum of
    ``min(cumsum(ones(d)), 1)`` (the scan, an opaque op, keeps ``d`` in the shape of the reduction's
    argument, so the fused kernel knows it; a sum fused with the broadcast itself would not)."""
    if isinstance(d, int):
        return G.const(np.array([d], "int64"))
    ones = ctx.expr(ctx.emit(G.op.broadcast_to(G.const(np.ones(1, "int64")), (d,))))
    counted = ctx.expr(ctx.emit(G.op.cumsum(ones, axis=0)))
    unit = ctx.expr(ctx.emit(G.op.minimum(counted, G.const(np.ones((), "int64")))))
    return ctx.expr(ctx.emit(G.op.sum(unit, axis=[0], keepdims=True)))


def _vector(ctx: Any, scalars: list) -> Any:
    """The (1,) int64 tensors ``scalars`` as one 1-D tensor (a constant when they all are)."""
    if all(isinstance(v, G.Constant) for v in scalars):
        return G.const(np.concatenate([v.data for v in scalars]).astype("int64"))
    return ctx.expr(ctx.emit(G.op.concat(list(scalars), axis=0)))


def _mul(ctx: Any, a: Any, b: Any) -> Any:
    if isinstance(a, G.Constant) and isinstance(b, G.Constant):
        return G.const((a.data * b.data).astype("int64"))
    return ctx.expr(ctx.emit(G.op.multiply(a, b)))


def _positions(ctx: Any, d: Any) -> Any:
    """``arange(d)`` as an int64 tensor, ``d`` static or symbolic."""
    if isinstance(d, int):
        return G.const(np.arange(d, dtype="int64"))
    ones = ctx.expr(ctx.emit(G.op.broadcast_to(G.const(np.ones(1, "int64")), (d,))))
    return ctx.expr(ctx.emit(G.op.cumsum(ones, axis=0, exclusive=True)))


@register("GatherND", since=11)
def _gather_nd(ctx: Any, node: Any) -> Any:
    # Each index tuple (the last axis of `indices`) is one row number of data viewed as
    # (batch * prod(indexed dims), rest...); with batch_dims b, batch entry j adds j * rows.
    # GatherND is then one `take` on axis 0 of that view. Symbolic sizes (a dynamic batch/sequence
    # export indexing an attention mask) enter the row numbers as run-time scalars.
    data, idx = node.input(0), node.input(1)
    b = int(node.attr("batch_dims", 0))
    ds, ishape = list(ctx.shape(data)), list(ctx.shape(idx))
    k = ishape[-1] if ishape else None
    if not isinstance(k, int) or not 0 <= b <= len(ishape) - 1 or not 1 <= k <= len(ds) - b:
        raise node.error(f"indices {tuple(map(str, ishape))} with batch_dims={b} do not index data "
                         f"{tuple(map(str, ds))}: the last axis of indices must be static, between 1 and "
                         f"rank(data) - batch_dims")
    batch, indexed, rest = ds[:b], ds[b:b + k], ds[b + k:]
    lead = ishape[:-1]
    e_idx = ctx.expr(ctx.emit(G.op.astype(ctx.expr(idx), "int64")))
    # Step 1. strides of the indexed axes (row-major) and the number of rows they span.
    dims = [_dim_scalar(ctx, d) for d in indexed]
    strides, rows = [], G.const(np.array([1], "int64"))
    for dim in reversed(dims):
        strides.insert(0, rows)
        rows = _mul(ctx, rows, dim)
    # Step 2. row numbers; negative entries count from the end of their own axis.
    wrapped = ctx.expr(ctx.emit(G.op.where(
        ctx.expr(ctx.emit(G.op.less(e_idx, G.const(np.zeros((), "int64"))))),
        ctx.expr(ctx.emit(G.op.add(e_idx, _vector(ctx, dims)))), e_idx)))
    lin = ctx.expr(ctx.emit(G.op.sum(ctx.expr(ctx.emit(G.op.multiply(wrapped, _vector(ctx, strides)))), axis=[-1])))
    # Step 3. batch entry j (row-major over the batch axes) starts at row j * rows.
    if b:
        flat_b: Any = None
        for a, d in enumerate(batch):
            pos = ctx.expr(ctx.emit(G.op.reshape(_positions(ctx, d), [d if i == a else 1 for i in range(b)])))
            flat_b = pos if flat_b is None else ctx.expr(ctx.emit(G.op.add(_mul(ctx, flat_b, _dim_scalar(ctx, d)),
                                                                          pos)))
        offsets = ctx.expr(ctx.emit(G.op.multiply(flat_b, rows)))
        offsets = ctx.expr(ctx.emit(G.op.reshape(offsets, tuple(batch) + (1,) * (len(lead) - b))))
        lin = ctx.expr(ctx.emit(G.op.add(lin, offsets)))
    total: Any = 1
    for d in batch + indexed:
        total = total * d
    flat = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(data), (total,) + tuple(rest))))
    return ctx.emit(G.op.take(flat, ctx.expr(lin), axis=0))


# Up to this axis length CumProd is one masked product (sequential order, as the ONNX reference
# multiplies); longer axes use a log-depth scan instead of an n x n intermediate.
_CUMPROD_MASKED_MAX = 64


@register("CumProd", since=26)
def _cumprod(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    return _per_axis_value(ctx, node, x, node.input(1), lambda axis: _cumprod_on(ctx, node, x, axis))


def _per_axis_value(ctx: Any, node: Any, x: Any, axis_value: Any, build: Any) -> Any:
    """``build(axis)`` for the scan axis given as an input: one graph when the axis is known at import
    time; when it arrives at run time (a graph input), every axis is built and the run-time value picks
    one (a chain of ``where`` on the normalized axis; the output shape is the input's either way)."""
    ndim = len(ctx.shape(x))
    if is_static(axis_value):
        return build(_axis(ctx, node, x, static_ints(axis_value, node, "axis")[0]))
    a = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(ctx.emit(G.op.astype(ctx.expr(axis_value), "int64"))), ())))
    neg = ctx.expr(ctx.emit(G.op.less(a, G.const(np.zeros((), "int64")))))
    a = ctx.expr(ctx.emit(G.op.where(neg, ctx.expr(ctx.emit(G.op.add(a, G.const(np.array(ndim, "int64"))))), a)))
    out = ctx.expr(build(ndim - 1))
    for k in range(ndim - 2, -1, -1):
        hit = ctx.expr(ctx.emit(G.op.equal(a, G.const(np.array(k, "int64")))))
        out = ctx.expr(ctx.emit(G.op.where(hit, ctx.expr(build(k)), out)))
    return out


def _cumprod_on(ctx: Any, node: Any, x: Any, axis: int) -> Any:
    exclusive, reverse = bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0))
    n = _static_axis_size(ctx, node, x, axis, "CumProd")
    ndim = len(ctx.shape(x))
    dt = ctx.dtype(x)
    one = G.const(np.ones((), dt))
    if n <= _CUMPROD_MASKED_MAX:
        # out[i] = prod_j where(mask[i, j], x[j], 1): mask is j <= i (j < i exclusive; mirrored when reversed).
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]
        mask = (j >= i if not exclusive else j > i) if reverse else (j <= i if not exclusive else j < i)
        mask = mask.reshape((n, n) + (1,) * (ndim - axis - 1))
        xe = ctx.expr(ctx.emit(G.op.expand_dims(ctx.expr(x), axis)))
        sel = ctx.expr(ctx.emit(G.op.where(G.const(mask), xe, one)))
        return ctx.emit(G.op.prod(sel, axis=[axis + 1]))
    # Hillis-Steele scan: after the step with shift s, out[i] = prod x[i - 2s + 1 .. i].
    e = _flip(ctx, x, axis) if reverse else ctx.expr(x)
    pos = np.arange(n, dtype="int64")
    bshape = [n if a == axis else 1 for a in range(ndim)]

    def shifted(v: Any, s: int) -> Any:
        moved = ctx.expr(ctx.emit(G.op.take(v, G.const(np.maximum(pos - s, 0)), axis=axis)))
        return ctx.expr(ctx.emit(G.op.where(G.const((pos >= s).reshape(bshape)), moved, one)))

    s = 1
    while s < n:
        e = ctx.expr(ctx.emit(G.op.multiply(e, shifted(e, s))))
        s *= 2
    if exclusive:
        e = shifted(e, 1)
    return _flip(ctx, e, axis) if reverse else e


@register("ReverseSequence", since=10)
def _reverse_sequence(ctx: Any, node: Any) -> Any:
    # out[t, b] = x[lens[b] - 1 - t, b] for t < lens[b], else x[t, b]: a gather_elements along the time
    # axis whose positions fold to a constant when sequence_lens is one.
    x, lens = node.input(0), node.input(1)
    shape = list(ctx.shape(x))
    t_axis = _axis(ctx, node, x, node.attr("time_axis", 0))
    b_axis = _axis(ctx, node, x, node.attr("batch_axis", 1))
    if t_axis == b_axis:
        raise node.error(f"time_axis and batch_axis must differ, both are {t_axis}")
    t = _static_axis_size(ctx, node, x, t_axis, "ReverseSequence")
    ndim = len(shape)
    tshape = [t if a == t_axis else 1 for a in range(ndim)]
    lshape = [-1 if a == b_axis else 1 for a in range(ndim)]
    steps = G.const(np.arange(t, dtype="int64").reshape(tshape))
    n = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(ctx.emit(G.op.astype(ctx.expr(lens), "int64"))), lshape)))
    inside = ctx.expr(ctx.emit(G.op.less(steps, n)))
    back = ctx.expr(ctx.emit(G.op.subtract(ctx.expr(ctx.emit(G.op.subtract(n, G.const(np.ones((), "int64"))))),
                                           steps)))
    pos = ctx.expr(ctx.emit(G.op.where(inside, back, steps)))
    pos = ctx.expr(ctx.emit(G.op.broadcast_to(pos, shape)))
    return ctx.emit(G.op.gather_elements(ctx.expr(x), pos, axis=t_axis))


# Converters kept in their own modules register when this one loads (the importer loads this one).
from . import ops_image, ops_signal  # noqa: E402,F401 - GridSample, AffineGrid; DFT, STFT, windows, MelWeightMatrix
