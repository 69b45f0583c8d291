"""Neural-network operators: conv2d, conv2d_transpose, pooling (ceil mode), softmax, normalizations.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 3, 32, 32), "float32"))
    >>> w = G.Var("w", G.TensorStructInfo((8, 3, 3, 3), "float32"))
    >>> conv2d(x, w, strides=2, padding=1).struct_info.shape
    (1, 8, 16, 16)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ingot.ops._window import conv_window, out_extent, pair

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error, register_op
from ..struct_info import TensorStructInfo, dims_equal, normalize_dim
from . import _ref
from ._common import HALF_FLOAT_DTYPES, accumulate_in_float32, known_shape, norm_axis, tensor_sinfo, topi


def _pair(name: str, key: str, value: Any, minimum: int = 1) -> tuple:
    return pair(name, key, value, minimum, error=op_error)


def _window_attrs(name: str, attrs: Any) -> dict:
    """strides, dilation and padding of a window operator's attributes, normalized and checked."""
    win = conv_window(name, None, attrs["strides"], attrs["padding"], attrs["dilation"], error=op_error)
    return {"strides": win.strides, "dilation": win.dilation, "padding": win.padding}


def _window_out(size: Any, lo: int, hi: int, k: Any, s: int, d: int) -> Any:
    if isinstance(size, int) and isinstance(k, int):
        return (size + lo + hi - ((k - 1) * d + 1)) // s + 1
    return normalize_dim(out_extent(size, lo + hi, k, s, d))


# -- conv2d --------------------------------------------------------------------------------------


def _norm_conv_attrs(attrs: Any, args: Any) -> dict:
    out = dict(attrs)
    out.update(_window_attrs("conv2d", attrs))
    out["groups"] = int(attrs["groups"])
    if attrs["data_layout"] not in ("NCHW", "NHWC"):
        raise op_error("conv2d", f"data_layout must be 'NCHW' or 'NHWC', got {attrs['data_layout']!r}")
    out["kernel_layout"] = attrs["kernel_layout"] or ("OIHW" if attrs["data_layout"] == "NCHW" else "HWIO")
    expected = "OIHW" if attrs["data_layout"] == "NCHW" else "HWIO"
    if out["kernel_layout"] != expected:
        raise op_error("conv2d", f"kernel_layout {out['kernel_layout']!r} with data_layout {attrs['data_layout']!r} "
                                 f"is not supported; use {expected!r} (transpose the weight)")
    return out


def _infer_conv2d(args: Any, attrs: Any) -> TensorStructInfo:
    x, w = tensor_sinfo("conv2d", args[0], 0), tensor_sinfo("conv2d", args[1], 1)
    sx, sw = known_shape("conv2d", x, 0), known_shape("conv2d", w, 1)
    if len(sx) != 4 or len(sw) != 4:
        raise op_error("conv2d", f"data and weight must be 4-D, got {sx} and {sw}")
    if x.dtype != w.dtype:
        raise op_error("conv2d", f"data and weight dtypes differ ({x.dtype} vs {w.dtype}); cast one with G.op.cast")
    nchw = attrs["data_layout"] == "NCHW"
    n, c, h, wd = sx if nchw else (sx[0], sx[3], sx[1], sx[2])
    o, cg, kh, kw = sw if nchw else (sw[3], sw[2], sw[0], sw[1])
    g = attrs["groups"]
    if isinstance(c, int) and isinstance(cg, int) and c != cg * g:
        raise op_error("conv2d", f"input channels {c} != weight in-channels {cg} x groups {g}")
    if isinstance(o, int) and o % g:
        raise op_error("conv2d", f"output channels {o} are not divisible by groups {g}")
    (sh, sw_), (dh, dw), (pt, pl, pb, pr) = attrs["strides"], attrs["dilation"], attrs["padding"]
    oh = _window_out(h, pt, pb, kh, sh, dh)
    ow = _window_out(wd, pl, pr, kw, sw_, dw)
    shape = (n, o, oh, ow) if nchw else (n, oh, ow, o)
    return TensorStructInfo(shape, attrs["out_dtype"] or x.dtype)


def _legalize_conv2d(inputs: Any, attrs: Any, out: Any) -> Any:
    fn = topi("nn").conv2d_nchw if attrs["data_layout"] == "NCHW" else topi("nn").conv2d_nhwc
    return fn(inputs[0], inputs[1], attrs["strides"], attrs["padding"], attrs["dilation"], attrs["groups"],
              out_dtype=str(out.dtype))


def _np_conv2d(args: Any, attrs: Any) -> np.ndarray:
    x, w = args
    if attrs["data_layout"] == "NHWC":
        y = _ref.conv2d_nchw(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), attrs["strides"], attrs["padding"],
                             attrs["dilation"], attrs["groups"])
        return y.transpose(0, 2, 3, 1)
    return _ref.conv2d_nchw(x, w, attrs["strides"], attrs["padding"], attrs["dilation"], attrs["groups"])


register_op(
    "conv2d", num_inputs=2, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, infer=_infer_conv2d,
    legalize=accumulate_in_float32(_legalize_conv2d),
    attrs={"strides": 1, "padding": 0, "dilation": 1, "groups": 1, "data_layout": "NCHW", "kernel_layout": None,
           "out_dtype": None},
    normalize_attrs=_norm_conv_attrs, numpy=_np_conv2d,
)


def conv2d(x: Expr, weight: Expr, strides: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
           data_layout: str = "NCHW", kernel_layout: "str | None" = None, out_dtype: "str | None" = None) -> Call:
    """2-D convolution (NCHW/OIHW or NHWC/HWIO); ``padding`` is int, (h, w) or (top, left, bottom, right).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((1, 8, 16, 16), "float32"))
        >>> w = G.Var("w", G.TensorStructInfo((8, 1, 3, 3), "float32"))
        >>> G.op.conv2d(x, w, padding=1, groups=8).struct_info.shape
        (1, 8, 16, 16)
    """
    return make_call("conv2d", [x, weight], strides=strides, padding=padding, dilation=dilation, groups=groups,
                     data_layout=data_layout, kernel_layout=kernel_layout, out_dtype=out_dtype)


# -- pooling -------------------------------------------------------------------------------------


def _norm_pool_attrs(attrs: Any, args: Any) -> dict:
    out = dict(attrs)
    out["ceil_mode"] = bool(attrs["ceil_mode"])
    out["pool_size"] = _pair("pool2d", "pool_size", attrs["pool_size"])
    out.update(_window_attrs("pool2d", {**attrs, "strides": attrs["strides"] if attrs["strides"] is not None
                                        else out["pool_size"]}))
    if attrs["layout"] not in ("NCHW", "NHWC"):
        raise op_error("pool2d", f"layout must be 'NCHW' or 'NHWC', got {attrs['layout']!r}")
    return out


def _infer_pool(name: str) -> Any:
    def infer(args: Any, attrs: Any) -> TensorStructInfo:
        x = tensor_sinfo(name, args[0])
        s = list(known_shape(name, x))
        if len(s) != 4:
            raise op_error(name, f"input must be 4-D, got shape {tuple(s)}")
        hi, wi = attrs["layout"].index("H"), attrs["layout"].index("W")
        (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr) = (attrs["pool_size"], attrs["strides"], attrs["dilation"],
                                                           attrs["padding"])
        if attrs["ceil_mode"]:
            if not (isinstance(s[hi], int) and isinstance(s[wi], int)):
                raise op_error(name, f"ceil_mode=True needs static H and W, got {s[hi]} x {s[wi]} (the number of "
                                     f"windows depends on them); use ceil_mode=False with explicit end padding")
            s[hi] = _ref._ceil_out(s[hi], pt, pb, kh, sh, dh)[0]
            s[wi] = _ref._ceil_out(s[wi], pl, pr, kw, sw, dw)[0]
            return TensorStructInfo(s, x.dtype)
        s[hi] = _window_out(s[hi], pt, pb, kh, sh, dh)
        s[wi] = _window_out(s[wi], pl, pr, kw, sw, dw)
        return TensorStructInfo(s, x.dtype)

    return infer


def _np_pool(kind: str) -> Any:
    def ref(args: Any, attrs: Any) -> np.ndarray:
        x = args[0]
        nhwc = attrs["layout"] == "NHWC"
        if nhwc:
            x = x.transpose(0, 3, 1, 2)
        y = _ref.pool2d_nchw(x, kind, attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"],
                             attrs.get("count_include_pad", False), attrs["ceil_mode"])
        return y.transpose(0, 2, 3, 1) if nhwc else y

    return ref


_POOL_ATTRS = {"pool_size": (1, 1), "strides": None, "padding": 0, "dilation": 1, "layout": "NCHW",
               "ceil_mode": False}
register_op(
    "max_pool2d", num_inputs=1, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, attrs=_POOL_ATTRS,
    infer=_infer_pool("max_pool2d"), normalize_attrs=_norm_pool_attrs, numpy=_np_pool("max"),
    legalize=lambda inputs, attrs, out: topi("nn").pool2d(inputs[0], "max", attrs["pool_size"], attrs["strides"],
                                                          attrs["padding"], attrs["dilation"], attrs["layout"],
                                                          ceil_mode=attrs["ceil_mode"]),
)
register_op(
    "avg_pool2d", num_inputs=1, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
    attrs={**_POOL_ATTRS, "count_include_pad": False},
    infer=_infer_pool("avg_pool2d"), normalize_attrs=_norm_pool_attrs, numpy=_np_pool("avg"),
    legalize=lambda inputs, attrs, out: topi("nn").pool2d(inputs[0], "avg", attrs["pool_size"], attrs["strides"],
                                                          attrs["padding"], attrs["dilation"], attrs["layout"],
                                                          count_include_pad=attrs["count_include_pad"],
                                                          ceil_mode=attrs["ceil_mode"]),
)


def max_pool2d(x: Expr, pool_size: Any = (1, 1), strides: Any = None, padding: Any = 0, dilation: Any = 1,
               layout: str = "NCHW", ceil_mode: bool = False) -> Call:
    """Max pooling (``strides`` default to ``pool_size``; ``ceil_mode`` as PyTorch, static H/W).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((1, 8, 16, 16), "float32"))
        >>> G.op.max_pool2d(x, 3, 2, 1).struct_info.shape
        (1, 8, 8, 8)
        >>> G.op.max_pool2d(x, 3, 2, ceil_mode=True).struct_info.shape
        (1, 8, 8, 8)
    """
    return make_call("max_pool2d", [x], pool_size=pool_size, strides=strides, padding=padding, dilation=dilation,
                     layout=layout, ceil_mode=ceil_mode)


def avg_pool2d(x: Expr, pool_size: Any = (1, 1), strides: Any = None, padding: Any = 0, dilation: Any = 1,
               layout: str = "NCHW", count_include_pad: bool = False, ceil_mode: bool = False) -> Call:
    """Average pooling (padding excluded from the count unless ``count_include_pad``; the extra
    windows of ``ceil_mode`` never count positions past the input and its padding, as PyTorch).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((1, 8, 16, 16), "float32"))
        >>> G.op.avg_pool2d(x, 2).struct_info.shape
        (1, 8, 8, 8)
    """
    return make_call("avg_pool2d", [x], pool_size=pool_size, strides=strides, padding=padding, dilation=dilation,
                     layout=layout, count_include_pad=count_include_pad, ceil_mode=ceil_mode)


# -- conv2d_transpose ----------------------------------------------------------------------------


def _norm_conv_transpose_attrs(attrs: Any, args: Any) -> dict:
    out = dict(attrs)
    out.update(_window_attrs("conv2d_transpose", attrs))
    out["output_padding"] = _pair("conv2d_transpose", "output_padding", attrs["output_padding"], minimum=0)
    out["groups"] = int(attrs["groups"])
    if attrs["data_layout"] != "NCHW" or attrs["kernel_layout"] not in (None, "IOHW"):
        raise op_error("conv2d_transpose", f"only data_layout 'NCHW' with kernel_layout 'IOHW' is supported, got "
                                           f"{attrs['data_layout']!r}/{attrs['kernel_layout']!r} (transpose the "
                                           f"tensors with G.op.permute_dims)")
    out["kernel_layout"] = "IOHW"
    for (sv, op_), axis in zip(zip(out["strides"], out["output_padding"]), "HW"):
        if op_ >= sv and op_ >= out["dilation"]["HW".index(axis)]:
            raise op_error("conv2d_transpose", f"output_padding {op_} on {axis} must be smaller than the stride "
                                               f"({sv}) or the dilation")
    return out


def _infer_conv_transpose(args: Any, attrs: Any) -> TensorStructInfo:
    name = "conv2d_transpose"
    x, w = tensor_sinfo(name, args[0], 0), tensor_sinfo(name, args[1], 1)
    sx, sw = known_shape(name, x, 0), known_shape(name, w, 1)
    if len(sx) != 4 or len(sw) != 4:
        raise op_error(name, f"data and weight must be 4-D, got {sx} and {sw}")
    if x.dtype != w.dtype:
        raise op_error(name, f"data and weight dtypes differ ({x.dtype} vs {w.dtype}); cast one with G.op.cast")
    n, c, h, wd = sx
    ci, og, kh, kw = sw
    g = attrs["groups"]
    if not dims_equal(c, ci):
        raise op_error(name, f"input channels {c} != weight dim 0 ({ci}); the weight is (in, out/groups, kh, kw)")
    if isinstance(c, int) and c % g:
        raise op_error(name, f"input channels {c} are not divisible by groups {g}")
    if not (isinstance(kh, int) and isinstance(kw, int)):
        raise op_error(name, f"the kernel's spatial size must be static, got {kh} x {kw}")
    (sh, sw_), (dh, dw), (pt, pl, pb, pr), (oph, opw) = (attrs["strides"], attrs["dilation"], attrs["padding"],
                                                         attrs["output_padding"])

    def out_size(size: Any, s: int, lo: int, hi: int, d: int, k: int, op_: int) -> Any:
        extra = -lo - hi + d * (k - 1) + op_ + 1
        return (size - 1) * s + extra if isinstance(size, int) else normalize_dim((size - 1) * s + extra)

    oc = og * g if isinstance(og, int) else normalize_dim(og * g)
    return TensorStructInfo((n, oc, out_size(h, sh, pt, pb, dh, kh, oph), out_size(wd, sw_, pl, pr, dw, kw, opw)),
                            attrs["out_dtype"] or x.dtype)


register_op(
    "conv2d_transpose", num_inputs=2, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, infer=_infer_conv_transpose,
    attrs={"strides": 1, "padding": 0, "output_padding": 0, "dilation": 1, "groups": 1, "data_layout": "NCHW",
           "kernel_layout": None, "out_dtype": None},
    normalize_attrs=_norm_conv_transpose_attrs,
    legalize=accumulate_in_float32(lambda inputs, attrs, out: topi("nn").conv2d_transpose_nchw(
        inputs[0], inputs[1], attrs["strides"], attrs["padding"], attrs["output_padding"], attrs["dilation"],
        attrs["groups"], out_dtype=str(out.dtype))),
    numpy=lambda args, attrs: _ref.conv2d_transpose_nchw(args[0], args[1], attrs["strides"], attrs["padding"],
                                                         attrs["output_padding"], attrs["dilation"], attrs["groups"]),
    doc="Transposed 2-D convolution (PyTorch ConvTranspose2d; weight (in, out/groups, kh, kw)).",
)


def conv2d_transpose(x: Expr, weight: Expr, strides: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     dilation: Any = 1, groups: int = 1, data_layout: str = "NCHW", kernel_layout: "str | None" = None,
                     out_dtype: "str | None" = None) -> Call:
    """Transposed 2-D convolution, NCHW data and IOHW weight ``(in, out/groups, kh, kw)`` as PyTorch's
    ``ConvTranspose2d``/ONNX ``ConvTranspose``; ``padding`` is int, (h, w) or (top, left, bottom, right).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((1, 8, 7, 7), "float32"))
        >>> w = G.Var("w", G.TensorStructInfo((8, 4, 3, 3), "float32"))
        >>> G.op.conv2d_transpose(x, w, strides=2, padding=1, output_padding=1).struct_info.shape
        (1, 4, 14, 14)
    """
    return make_call("conv2d_transpose", [x, weight], strides=strides, padding=padding, output_padding=output_padding,
                     dilation=dilation, groups=groups, data_layout=data_layout, kernel_layout=kernel_layout,
                     out_dtype=out_dtype)


conv_transpose2d = conv2d_transpose


def _infer_global_pool(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("global_avg_pool2d", args[0])
    s = list(known_shape("global_avg_pool2d", x))
    if len(s) != 4:
        raise op_error("global_avg_pool2d", f"input must be 4-D, got shape {tuple(s)}")
    s[attrs["layout"].index("H")] = s[attrs["layout"].index("W")] = 1
    return TensorStructInfo(s, x.dtype)


register_op(
    "global_avg_pool2d", num_inputs=1, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, attrs={"layout": "NCHW"},
    infer=_infer_global_pool,
    legalize=lambda inputs, attrs, out: topi("nn").global_avg_pool2d(inputs[0], attrs["layout"]),
    numpy=lambda args, attrs: args[0].mean(axis=(attrs["layout"].index("H"), attrs["layout"].index("W")),
                                           keepdims=True).astype(args[0].dtype),
)


def global_avg_pool2d(x: Expr, layout: str = "NCHW") -> Call:
    """Mean over H and W, kept as size-1 axes.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 8, 7, 7), "float32"))
        >>> G.op.global_avg_pool2d(x).struct_info.shape
        (2, 8, 1, 1)
    """
    return make_call("global_avg_pool2d", [x], layout=layout)


# -- softmax and normalizations ------------------------------------------------------------------


def _infer_same_float(name: str) -> Any:
    def infer(args: Any, attrs: Any) -> TensorStructInfo:
        x = tensor_sinfo(name, args[0])
        if not x.dtype.is_float:
            raise op_error(name, f"needs a floating-point input, got {x.dtype}")
        if "axis" in attrs:
            norm_axis(name, attrs["axis"], x.ndim)
        return x

    return infer


def _legalize_softmax(inputs: Any, attrs: Any, out: Any) -> Any:
    x, dtype = inputs[0], str(out.dtype)
    if dtype not in HALF_FLOAT_DTYPES:
        return topi("nn").softmax(x, attrs["axis"])
    # float16/bfloat16: computed in float32 with each step rounded back as numpy does (see ops.nn.softmax):
    # the sum gets float32 accumulation, and the result the ONNX reference's rounding.
    elemwise = topi("elemwise")
    y = topi("nn").softmax(elemwise.cast(x, "float32"), attrs["axis"], round_steps_to=dtype)
    return elemwise.cast(y, dtype)


register_op(
    "softmax", num_inputs=1, pattern=OpPattern.OPAQUE, attrs={"axis": -1}, infer=_infer_same_float("softmax"),
    legalize=_legalize_softmax,
    numpy=lambda args, attrs: _ref.softmax(args[0], attrs["axis"]),
)
register_op(
    "log_softmax", num_inputs=1, pattern=OpPattern.OPAQUE, attrs={"axis": -1}, infer=_infer_same_float("log_softmax"),
    legalize=accumulate_in_float32(lambda inputs, attrs, out: topi("nn").log_softmax(inputs[0], attrs["axis"]),
                                   cast_inputs=True),
    numpy=lambda args, attrs: _ref.log_softmax(args[0], attrs["axis"]),
)


def softmax(x: Expr, axis: int = -1) -> Call:
    """Softmax along ``axis``.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 10), "float32"))
        >>> str(G.op.softmax(x))
        'R.softmax(x, axis=-1)'
    """
    return make_call("softmax", [x], axis=int(axis))


def log_softmax(x: Expr, axis: int = -1) -> Call:
    """Log-softmax along ``axis``.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 10), "float32"))
        >>> G.op.log_softmax(x).struct_info.shape
        (2, 10)
    """
    return make_call("log_softmax", [x], axis=int(axis))


def _infer_layer_norm(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("layer_norm", args[0], 0)
    sx = known_shape("layer_norm", x)
    axes = [norm_axis("layer_norm", a, len(sx)) for a in attrs["axes"]]
    expected = tuple(sx[a] for a in sorted(axes))
    for i in (1, 2):
        s = known_shape("layer_norm", tensor_sinfo("layer_norm", args[i], i), i)
        if len(s) != len(expected) or not all(dims_equal(a, b) for a, b in zip(s, expected)):
            raise op_error("layer_norm", f"{'gamma' if i == 1 else 'beta'} must have shape {expected}, got {s}")
    return x


register_op(
    "layer_norm", num_inputs=3, pattern=OpPattern.OPAQUE, attrs={"axes": (-1,), "epsilon": 1e-5},
    infer=_infer_layer_norm,
    normalize_attrs=lambda attrs, args: {"axes": tuple((attrs["axes"],) if isinstance(attrs["axes"], int)
                                                       else attrs["axes"]), "epsilon": float(attrs["epsilon"])},
    legalize=accumulate_in_float32(lambda inputs, attrs, out: topi("nn").layer_norm(
        *inputs, axes=attrs["axes"], epsilon=attrs["epsilon"]), cast_inputs=True),
    numpy=lambda args, attrs: _ref.layer_norm(*args, attrs["axes"], attrs["epsilon"]),
)


def layer_norm(x: Expr, gamma: Expr, beta: Expr, axes: "int | Sequence[int]" = -1, epsilon: float = 1e-5) -> Call:
    """Layer normalization over ``axes``, scaled by ``gamma`` and shifted by ``beta``.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 16, 64), "float32"))
        >>> g = G.Var("g", G.TensorStructInfo((64,), "float32"))
        >>> G.op.layer_norm(x, g, g).struct_info.shape
        (2, 16, 64)
    """
    return make_call("layer_norm", [x, gamma, beta], axes=axes, epsilon=epsilon)


def _infer_group_norm(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("group_norm", args[0], 0)
    sx = known_shape("group_norm", x)
    if isinstance(sx[1], int) and sx[1] % attrs["num_groups"]:
        raise op_error("group_norm", f"channels {sx[1]} are not divisible by num_groups {attrs['num_groups']}")
    return x


register_op(
    "group_norm", num_inputs=3, pattern=OpPattern.OPAQUE, attrs={"num_groups": None, "epsilon": 1e-5},
    infer=_infer_group_norm,
    legalize=accumulate_in_float32(lambda inputs, attrs, out: topi("nn").group_norm(
        *inputs, attrs["num_groups"], attrs["epsilon"]), cast_inputs=True),
    numpy=lambda args, attrs: _ref.group_norm(*args, attrs["num_groups"], attrs["epsilon"]),
)


def group_norm(x: Expr, gamma: Expr, beta: Expr, num_groups: int, epsilon: float = 1e-5) -> Call:
    """Group normalization of ``(N, C, ...)`` with ``num_groups`` channel groups.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((1, 8, 4, 4), "float32"))
        >>> g = G.Var("g", G.TensorStructInfo((8,), "float32"))
        >>> G.op.group_norm(x, g, g, 2).struct_info.shape
        (1, 8, 4, 4)
    """
    return make_call("group_norm", [x, gamma, beta], num_groups=int(num_groups), epsilon=float(epsilon))


def _infer_batch_norm(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("batch_norm", args[0], 0)
    sx = known_shape("batch_norm", x)
    axis = norm_axis("batch_norm", attrs["axis"], len(sx))
    for i, what in enumerate(("gamma", "beta", "moving_mean", "moving_var"), start=1):
        s = known_shape("batch_norm", tensor_sinfo("batch_norm", args[i], i), i)
        if len(s) != 1 or not dims_equal(s[0], sx[axis]):
            raise op_error("batch_norm", f"{what} must have shape ({sx[axis]},), got {s}")
    return x


register_op(
    "batch_norm", num_inputs=5, pattern=OpPattern.BROADCAST, attrs={"axis": 1, "epsilon": 1e-5},
    infer=_infer_batch_norm,
    legalize=lambda inputs, attrs, out: topi("nn").batch_norm_inference(*inputs, axis=attrs["axis"],
                                                                        epsilon=attrs["epsilon"]),
    numpy=lambda args, attrs: _ref.batch_norm(*args, attrs["axis"] % args[0].ndim, attrs["epsilon"]),
    doc="Inference-mode batch normalization (uses the moving statistics); returns the normalized tensor.",
)


def batch_norm(x: Expr, gamma: Expr, beta: Expr, moving_mean: Expr, moving_var: Expr, axis: int = 1,
               epsilon: float = 1e-5) -> Call:
    """Inference batch normalization along channel ``axis``; returns only the normalized tensor
    (Relax returns a tuple with the unchanged statistics; inference graphs use only field 0).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((1, 4, 8, 8), "float32"))
        >>> c = G.Var("c", G.TensorStructInfo((4,), "float32"))
        >>> G.op.batch_norm(x, c, c, c, c).struct_info.shape
        (1, 4, 8, 8)
    """
    return make_call("batch_norm", [x, gamma, beta, moving_mean, moving_var], axis=int(axis), epsilon=float(epsilon))
