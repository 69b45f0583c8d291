"""Operators on pre-packed weights, produced by `ingot.graph.transform.PackWeights`.

Note: these are ``linear``/``conv2d`` whose constant weight was re-laid out once at compile time
into ``P``-wide panels (see `ingot.ops.packed`, which holds the layouts, the numpy packing and the
TE computes). Users normally never build them: PackWeights rewrites ``conv2d``/``linear``/
``matmul`` with a `Constant` weight into them when the shapes allow. They fuse like the originals
(out-elementwise-fusable) and have numpy references (unpack + the original op), so FoldConstant
and the tests treat them like any other op.

* ``dense_packed_weight(x, w_packed[N/P, K, P], bias?)`` = ``x @ w.T (+ bias)``
* ``conv2d_packed_weight(x, w_packed[O/P, C, KH, KW, P])`` = NCHW ``conv2d`` (groups = 1)
* ``depthwise_conv2d_packed_weight(x, w_packed[C/P, KH, KW, P])`` = NCHW ``conv2d`` (groups = C)
* ``conv2d_nhwc_packed_weight(x, w_packed[O/P, KH, KW, C, P])`` = NHWC ``conv2d`` (HWIO weight, groups = 1)

Example:
    >>> import numpy as np
    >>> from ingot import graph as G
    >>> from ingot.ops.packed import pack_dense_weight
    >>> x = G.Var("x", G.TensorStructInfo((1, 8), "float32"))
    >>> w = G.const(pack_dense_weight(np.ones((32, 8), "float32"), 16))
    >>> dense_packed_weight(x, w).struct_info.shape
    (1, 32)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error, register_op
from ..struct_info import TensorStructInfo, dims_equal
from . import _ref
from ._common import known_shape, tensor_sinfo, topi
from .nn import _window_attrs, _window_out

__all__ = ["dense_packed_weight", "conv2d_packed_weight", "depthwise_conv2d_packed_weight", "conv2d_nhwc_winograd",
           "conv2d_nhwc_packed_weight"]


def _unpack(kind: str, w: np.ndarray) -> np.ndarray:
    from ingot.ops import packed

    return getattr(packed, f"unpack_{kind}_weight")(w)


def _same_dtype(name: str, x: TensorStructInfo, w: TensorStructInfo) -> None:
    if x.dtype != w.dtype:
        raise op_error(name, f"data and packed weight dtypes differ ({x.dtype} vs {w.dtype}); cast one with G.op.cast")


# -- dense ---------------------------------------------------------------------------------------


def _infer_dense(args: Any, attrs: Any) -> TensorStructInfo:
    name = "dense_packed_weight"
    x, w = tensor_sinfo(name, args[0], 0), tensor_sinfo(name, args[1], 1)
    sx, sw = known_shape(name, x, 0), known_shape(name, w, 1)
    if len(sw) != 3 or not all(isinstance(d, int) for d in sw) or len(sx) < 1:
        raise op_error(name, f"the packed weight must be 3-D (N/P, K, P) with static dims, got {sw}; "
                             f"pack it with ingot.ops.packed.pack_dense_weight")
    if not dims_equal(sx[-1], sw[1]):
        raise op_error(name, f"reduction dimensions differ: data {sx[-1]} vs packed weight {sw[1]}")
    _same_dtype(name, x, w)
    n = sw[0] * sw[2]
    if len(args) == 3:
        sb = known_shape(name, tensor_sinfo(name, args[2], 2), 2)
        if len(sb) != 1 or not dims_equal(sb[0], n):
            raise op_error(name, f"bias must have shape ({n},), got {sb}")
    return TensorStructInfo(tuple(sx[:-1]) + (n,), attrs["out_dtype"] or x.dtype)


def _np_dense(args: Any, attrs: Any) -> np.ndarray:
    out = np.matmul(args[0], _unpack("dense", args[1]).T)
    if len(args) == 3:
        out = out + args[2]
    return out.astype(attrs["out_dtype"] or args[0].dtype)


register_op(
    "dense_packed_weight", num_inputs=None, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, attrs={"out_dtype": None},
    infer=_infer_dense, numpy=_np_dense,
    legalize=lambda inputs, attrs, out: topi("packed").dense_packed_weight(
        inputs[0], inputs[1], inputs[2] if len(inputs) == 3 else None, out_dtype=str(out.dtype)),
    doc="x @ w.T (+ bias) with w pre-packed as [N/P, K, P] panels (PackWeights).",
)


def dense_packed_weight(x: Expr, w_packed: Expr, bias: "Expr | None" = None, out_dtype: "str | None" = None) -> Call:
    """``x @ w.T (+ bias)`` with ``w`` packed as ``[N / P, K, P]`` (`ingot.ops.packed.pack_dense_weight`).

    Example:
        >>> import numpy as np
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 128, 8), "float32"))
        >>> G.op.packed.dense_packed_weight(x, G.const(np.zeros((2, 8, 32), "float32"))).struct_info.shape
        (2, 128, 64)
    """
    args = [x, w_packed] + ([bias] if bias is not None else [])
    return make_call("dense_packed_weight", args, out_dtype=out_dtype)


# -- conv2d --------------------------------------------------------------------------------------

_CONV_ATTRS = {"strides": 1, "padding": 0, "dilation": 1, "out_dtype": None}


def _norm_conv(name: str) -> Any:
    def norm(attrs: Any, args: Any) -> dict:
        out = dict(attrs)
        out.update(_window_attrs(name, attrs))
        return out

    return norm


def _infer_conv(name: str, depthwise: bool) -> Any:
    def infer(args: Any, attrs: Any) -> TensorStructInfo:
        x, w = tensor_sinfo(name, args[0], 0), tensor_sinfo(name, args[1], 1)
        sx, sw = known_shape(name, x, 0), known_shape(name, w, 1)
        rank = 4 if depthwise else 5
        if len(sx) != 4 or len(sw) != rank or not all(isinstance(d, int) for d in sw):
            layout = "(C/P, KH, KW, P)" if depthwise else "(O/P, C, KH, KW, P)"
            raise op_error(name, f"data must be 4-D NCHW and the packed weight {rank}-D {layout} with static dims, "
                                 f"got {sx} and {sw}")
        _same_dtype(name, x, w)
        n, c, h, wd = sx
        if depthwise:
            o, cw, kh, kw = sw[0] * sw[3], c, sw[1], sw[2]
        else:
            o, cw, kh, kw = sw[0] * sw[4], sw[1], sw[2], sw[3]
        if not dims_equal(c, cw) and not (isinstance(c, int) and c == cw):
            raise op_error(name, f"input channels {c} != the packed weight's {cw}")
        (sh, sw_), (dh, dw), (pt, pl, pb, pr) = attrs["strides"], attrs["dilation"], attrs["padding"]
        shape = (n, o, _window_out(h, pt, pb, kh, sh, dh), _window_out(wd, pl, pr, kw, sw_, dw))
        return TensorStructInfo(shape, attrs["out_dtype"] or x.dtype)

    return infer


def _np_conv(depthwise: bool) -> Any:
    def ref(args: Any, attrs: Any) -> np.ndarray:
        x, wp = args
        w = _unpack("depthwise" if depthwise else "conv2d", wp)
        groups = x.shape[1] if depthwise else 1
        out = _ref.conv2d_nchw(x, w, attrs["strides"], attrs["padding"], attrs["dilation"], groups)
        return out.astype(attrs["out_dtype"] or x.dtype)

    return ref


register_op(
    "conv2d_packed_weight", num_inputs=2, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, attrs=dict(_CONV_ATTRS),
    normalize_attrs=_norm_conv("conv2d_packed_weight"), infer=_infer_conv("conv2d_packed_weight", False),
    numpy=_np_conv(False),
    legalize=lambda inputs, attrs, out: topi("packed").conv2d_nchw_packed_weight(
        inputs[0], inputs[1], attrs["strides"], attrs["padding"], attrs["dilation"], out_dtype=str(out.dtype)),
    doc="NCHW conv2d (groups = 1) with the OIHW weight pre-packed as [O/P, C, KH, KW, P] (PackWeights).",
)

register_op(
    "depthwise_conv2d_packed_weight", num_inputs=2, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
    attrs=dict(_CONV_ATTRS), normalize_attrs=_norm_conv("depthwise_conv2d_packed_weight"),
    infer=_infer_conv("depthwise_conv2d_packed_weight", True), numpy=_np_conv(True),
    legalize=lambda inputs, attrs, out: topi("packed").depthwise_conv2d_nchw_packed_weight(
        inputs[0], inputs[1], attrs["strides"], attrs["padding"], attrs["dilation"], out_dtype=str(out.dtype)),
    doc="Depthwise NCHW conv2d (groups = C = O) with the weight pre-packed as [C/P, KH, KW, P] (PackWeights).",
)


def conv2d_packed_weight(x: Expr, w_packed: Expr, strides: Any = 1, padding: Any = 0, dilation: Any = 1,
                         out_dtype: "str | None" = None) -> Call:
    """NCHW ``conv2d`` (groups = 1) with the weight packed as ``[O / P, C, KH, KW, P]``
    (`ingot.ops.packed.pack_conv2d_weight`).

    Example:
        >>> import numpy as np
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((1, 3, 8, 8), "float32"))
        >>> w = G.const(np.zeros((2, 3, 3, 3, 16), "float32"))
        >>> G.op.packed.conv2d_packed_weight(x, w, padding=1).struct_info.shape
        (1, 32, 8, 8)
    """
    return make_call("conv2d_packed_weight", [x, w_packed], strides=strides, padding=padding, dilation=dilation,
                     out_dtype=out_dtype)


def depthwise_conv2d_packed_weight(x: Expr, w_packed: Expr, strides: Any = 1, padding: Any = 0, dilation: Any = 1,
                                   out_dtype: "str | None" = None) -> Call:
    """Depthwise NCHW ``conv2d`` (groups = C) with the weight packed as ``[C / P, KH, KW, P]``
    (`ingot.ops.packed.pack_depthwise_weight`).

    Example:
        >>> import numpy as np
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((1, 32, 7, 7), "float32"))
        >>> w = G.const(np.zeros((2, 3, 3, 16), "float32"))
        >>> G.op.packed.depthwise_conv2d_packed_weight(x, w, padding=1).struct_info.shape
        (1, 32, 7, 7)
    """
    return make_call("depthwise_conv2d_packed_weight", [x, w_packed], strides=strides, padding=padding,
                     dilation=dilation, out_dtype=out_dtype)


# -- conv2d, NHWC ----------------------------------------------------------------------------------


def _nhwc_operands(name: str, args: Any, weight_layout: "tuple[str, ...]", fix: str) -> tuple:
    """``(data struct info, data shape, weight shape)`` of an NHWC conv on a pre-laid-out weight, checked:
    4-D data, a static weight of the layout's rank, one dtype, the weight's ``C`` = the data's channels."""
    x, w = tensor_sinfo(name, args[0], 0), tensor_sinfo(name, args[1], 1)
    sx, sw = known_shape(name, x, 0), known_shape(name, w, 1)
    layout = ", ".join(weight_layout)
    if len(sx) != 4 or len(sw) != len(weight_layout) or not all(isinstance(d, int) for d in sw):
        raise op_error(name, f"data must be 4-D NHWC and the weight {len(weight_layout)}-D ({layout}) with static "
                             f"dims, got {sx} and {sw}; {fix}")
    _same_dtype(name, x, w)
    cw = sw[weight_layout.index("C")]
    if not dims_equal(sx[3], cw):
        raise op_error(name, f"input channels {sx[3]} != the weight's {cw}")
    return x, sx, sw


def _infer_conv_nhwc(args: Any, attrs: Any) -> TensorStructInfo:
    x, (n, h, wd, _), (oo, kh, kw, _, p) = _nhwc_operands(
        "conv2d_nhwc_packed_weight", args, ("O/P", "KH", "KW", "C", "P"),
        "pack an HWIO weight with ingot.ops.packed.pack_conv2d_nhwc_weight")
    (sh, sw_), (dh, dw), (pt, pl, pb, pr) = attrs["strides"], attrs["dilation"], attrs["padding"]
    shape = (n, _window_out(h, pt, pb, kh, sh, dh), _window_out(wd, pl, pr, kw, sw_, dw), oo * p)
    return TensorStructInfo(shape, attrs["out_dtype"] or x.dtype)


def _np_conv_nhwc(args: Any, attrs: Any) -> np.ndarray:
    x, wp = args
    w = _unpack("conv2d_nhwc", wp)  # HWIO
    out = _ref.conv2d_nchw(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), attrs["strides"], attrs["padding"],
                           attrs["dilation"], 1)
    return out.transpose(0, 2, 3, 1).astype(attrs["out_dtype"] or x.dtype)


register_op(
    "conv2d_nhwc_packed_weight", num_inputs=2, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, attrs=dict(_CONV_ATTRS),
    normalize_attrs=_norm_conv("conv2d_nhwc_packed_weight"), infer=_infer_conv_nhwc, numpy=_np_conv_nhwc,
    legalize=lambda inputs, attrs, out: topi("packed").conv2d_nhwc_packed_weight(
        inputs[0], inputs[1], attrs["strides"], attrs["padding"], attrs["dilation"], out_dtype=str(out.dtype)),
    doc="NHWC conv2d (groups = 1) with the HWIO weight pre-packed as [O/P, KH, KW, C, P] (PackWeights).",
)


def conv2d_nhwc_packed_weight(x: Expr, w_packed: Expr, strides: Any = 1, padding: Any = 0, dilation: Any = 1,
                              out_dtype: "str | None" = None) -> Call:
    """NHWC ``conv2d`` (groups = 1) with the HWIO weight packed as ``[O / P, KH, KW, C, P]``
    (`ingot.ops.packed.pack_conv2d_nhwc_weight`); output ``(N, OH, OW, O)``.

    Example:
        >>> import numpy as np
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((1, 8, 8, 3), "float32"))
        >>> w = G.const(np.zeros((2, 3, 3, 3, 16), "float32"))
        >>> G.op.packed.conv2d_nhwc_packed_weight(x, w, padding=1).struct_info.shape
        (1, 8, 8, 32)
    """
    return make_call("conv2d_nhwc_packed_weight", [x, w_packed], strides=strides, padding=padding,
                     dilation=dilation, out_dtype=out_dtype)


# -- conv2d, NHWC, Winograd ------------------------------------------------------------------------

_WINOGRAD_ATTRS = {"padding": 1, "out_dtype": None}


def _norm_winograd(attrs: Any, args: Any) -> dict:
    out = dict(attrs)
    out["padding"] = _window_attrs("conv2d_nhwc_winograd", {**attrs, "strides": 1, "dilation": 1})["padding"]
    return out


def _infer_winograd(args: Any, attrs: Any) -> TensorStructInfo:
    from ingot.ops.winograd import WINOGRAD_TILES

    name = "conv2d_nhwc_winograd"
    x, (n, h, wd, _), (aa, oo, _, p) = _nhwc_operands(
        name, args, ("α²", "O/P", "C", "P"), "transform a 3x3 HWIO weight with ingot.ops.winograd.transform_weight")
    alpha = int(round(aa ** 0.5))
    if alpha * alpha != aa or alpha - 2 not in WINOGRAD_TILES:
        raise op_error(name, f"the weight's first dimension {aa} is not (m + 2)² for an output tile m in "
                             f"{WINOGRAD_TILES}")
    pt, pl, pb, pr = attrs["padding"]
    shape = (n, _window_out(h, pt, pb, 3, 1, 1), _window_out(wd, pl, pr, 3, 1, 1), oo * p)
    return TensorStructInfo(shape, attrs["out_dtype"] or x.dtype)


def _np_winograd(args: Any, attrs: Any) -> np.ndarray:
    from ingot.ops.winograd import untransform_weight

    x, w = args[0], untransform_weight(args[1])  # HWIO
    out = _ref.conv2d_nchw(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (1, 1), attrs["padding"], (1, 1), 1)
    return out.transpose(0, 2, 3, 1).astype(attrs["out_dtype"] or x.dtype)


register_op(
    "conv2d_nhwc_winograd", num_inputs=2, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, attrs=dict(_WINOGRAD_ATTRS),
    normalize_attrs=_norm_winograd, infer=_infer_winograd, numpy=_np_winograd,
    legalize=lambda inputs, attrs, out: topi("winograd").conv2d_nhwc_winograd(
        inputs[0], inputs[1], attrs["padding"], out_dtype=str(out.dtype)),
    doc="NHWC 3x3 conv2d (stride 1, groups 1) by Winograd F(m, 3), the weight transformed and packed as "
        "[α², O/P, C, P] (PackWeights).",
)


def conv2d_nhwc_winograd(x: Expr, u_packed: Expr, padding: Any = 1, out_dtype: "str | None" = None) -> Call:
    """NHWC 3×3 ``conv2d`` (stride 1, dilation 1, groups 1) by Winograd F(m×m, 3×3), with the weight
    in the Winograd domain as ``[α², O / P, C, P]`` (`ingot.ops.winograd.transform_weight`, α = m + 2).

    Example:
        >>> import numpy as np
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((1, 8, 8, 4), "float32"))
        >>> u = G.const(np.zeros((36, 1, 4, 16), "float32"))
        >>> G.op.packed.conv2d_nhwc_winograd(x, u, padding=1).struct_info.shape
        (1, 8, 8, 16)
    """
    return make_call("conv2d_nhwc_winograd", [x, u_packed], padding=padding, out_dtype=out_dtype)
