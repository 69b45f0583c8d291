"""Graph operators ``deform_conv2d`` (ONNX DeformConv), ``roi_align`` (ONNX RoiAlign) and
``tensor_scatter`` (ONNX TensorScatter); TE computes (roi_align: a TensorIR kernel, its sample loops
run each ROI's run-time grid) and numpy references in `ingot.ops.deform_roi` and `ingot.ops.kv_cache`.

Note: registered when this module is imported (the ONNX frontend's ``ops_vision`` imports it), with
the idempotent registration of `onnx_extra`. ``deform_conv2d``'s optional bias and mask are extra
arguments flagged by the ``with_bias``/``with_mask`` attributes (the op has 3 to 5 arguments).

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 4, 8, 8), "float32"))
    >>> w = G.Var("w", G.TensorStructInfo((6, 4, 3, 3), "float32"))
    >>> off = G.Var("off", G.TensorStructInfo((1, 18, 6, 6), "float32"))
    >>> str(deform_conv2d(x, w, off).struct_info)
    'R.Tensor((1, 6, 6, 6), dtype="float32")'
"""
from __future__ import annotations

from typing import Any, Sequence

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error
from ..struct_info import TensorStructInfo
from ._common import known_shape, tensor_sinfo, topi
from .onnx_extra import _register

_DEFORM_ATTRS = ("strides", "pads", "dilations", "group", "offset_group")


def _norm_deform(attrs: Any, args: Any) -> dict:
    out = {"strides": tuple(int(v) for v in (attrs["strides"] or (1, 1))),
           "pads": tuple(int(v) for v in (attrs["pads"] or (0, 0, 0, 0))),
           "dilations": tuple(int(v) for v in (attrs["dilations"] or (1, 1))),
           "group": int(attrs["group"]), "offset_group": int(attrs["offset_group"]),
           "with_bias": bool(attrs["with_bias"]), "with_mask": bool(attrs["with_mask"])}
    if len(out["strides"]) != 2 or len(out["dilations"]) != 2 or len(out["pads"]) != 4:
        raise op_error("deform_conv2d", f"strides and dilations need 2 entries and pads 4 (2-D only), got {out}")
    if len(args) != 3 + out["with_bias"] + out["with_mask"]:
        raise op_error("deform_conv2d", f"takes (x, w, offset[, bias][, mask]) as with_bias/with_mask say, got "
                                        f"{len(args)} arguments")
    return out


def _infer_deform(args: Any, attrs: Any) -> TensorStructInfo:
    op = "deform_conv2d"
    shapes = [known_shape(op, tensor_sinfo(op, a, i), i) for i, a in enumerate(args)]
    x, w, off = shapes[:3]
    dtype = tensor_sinfo(op, args[0]).dtype
    if len(x) != 4 or len(w) != 4 or len(off) != 4:
        raise op_error(op, f"x, w and offset must be 4-D (N, C, H, W), got {tuple(x)}, {tuple(w)}, {tuple(off)}")
    if not all(isinstance(d, int) for d in (*x[1:], *w, *off[1:])):
        raise op_error(op, f"needs static channel, spatial and kernel sizes (only the batch may be symbolic), got "
                           f"x {tuple(x)}, w {tuple(w)}, offset {tuple(off)}")
    if not dtype.is_float:
        raise op_error(op, f"needs a floating-point input, got {dtype}")
    g, og = attrs["group"], attrs["offset_group"]
    oc, cpg, kh, kw = w
    if x[1] != cpg * g or oc % g or x[1] % og:
        raise op_error(op, f"channels {x[1]}, weight {tuple(w)}, group {g} and offset_group {og} disagree: x needs "
                           f"group * w.shape[1] channels, divisible by offset_group, and OC divisible by group")
    from ingot.ops.deform_roi import deform_output_size

    s, p, d = attrs["strides"], attrs["pads"], attrs["dilations"]
    oh = deform_output_size(x[2], kh, s[0], d[0], p[0], p[2])
    ow = deform_output_size(x[3], kw, s[1], d[1], p[1], p[3])
    if tuple(off[1:]) != (og * kh * kw * 2, oh, ow):
        raise op_error(op, f"offset must be (N, {og * kh * kw * 2}, {oh}, {ow}) for offset_group {og}, kernel "
                           f"{kh}x{kw} and output {oh}x{ow}, got {tuple(off)}")
    extra = list(shapes[3:])
    if attrs["with_bias"] and tuple(extra.pop(0)) != (oc,):
        raise op_error(op, f"bias must be ({oc},)")
    if attrs["with_mask"] and tuple(extra.pop(0)[1:]) != (og * kh * kw, oh, ow):
        raise op_error(op, f"mask must be (N, {og * kh * kw}, {oh}, {ow})")
    return TensorStructInfo([x[0], oc, oh, ow], dtype)


def _deform_call(fn: Any, args: Any, attrs: Any) -> Any:
    rest = list(args[3:])
    bias = rest.pop(0) if attrs["with_bias"] else None
    mask = rest.pop(0) if attrs["with_mask"] else None
    return fn(args[0], args[1], args[2], bias, mask, *[attrs[a] for a in _DEFORM_ATTRS])


_register(
    "deform_conv2d", num_inputs=None, pattern=OpPattern.OPAQUE,
    attrs={"strides": None, "pads": None, "dilations": None, "group": 1, "offset_group": 1, "with_bias": False,
           "with_mask": False},
    normalize_attrs=_norm_deform, infer=_infer_deform,
    legalize=lambda inputs, attrs, out: _deform_call(topi("deform_roi").deform_conv2d, inputs, attrs),
    numpy=lambda args, attrs: _deform_call(topi("deform_roi").deform_conv2d_numpy, args, attrs),
)


def deform_conv2d(x: Expr, w: Expr, offset: Expr, bias: "Expr | None" = None, mask: "Expr | None" = None,
                  strides: Sequence[int] = (1, 1), pads: Sequence[int] = (0, 0, 0, 0),
                  dilations: Sequence[int] = (1, 1), group: int = 1, offset_group: int = 1) -> Call:
    """Deformable 2-D convolution (ONNX DeformConv): each kernel tap samples ``x`` bilinearly at its
    position plus ``offset`` (dy, dx per offset group and tap), scaled by ``mask`` when given.

    Example: see the module docstring.
    """
    args = [x, w, offset] + [a for a in (bias, mask) if a is not None]
    return make_call("deform_conv2d", args, strides=tuple(strides), pads=tuple(pads), dilations=tuple(dilations),
                     group=group, offset_group=offset_group, with_bias=bias is not None, with_mask=mask is not None)


_ROI_ATTRS = ("mode", "output_height", "output_width", "sampling_ratio", "spatial_scale",
              "coordinate_transformation_mode")


def _infer_roi(args: Any, attrs: Any) -> TensorStructInfo:
    op = "roi_align"
    x, rois, idx = (tensor_sinfo(op, a, i) for i, a in enumerate(args))
    xs, rs, bs = (known_shape(op, s, i) for i, s in enumerate((x, rois, idx)))
    if len(xs) != 4 or not all(isinstance(d, int) for d in xs[1:]):
        raise op_error(op, f"x must be (N, C, H, W) with static C, H, W, got {tuple(xs)}")
    if len(rs) != 2 or rs[1] != 4 or len(bs) != 1:
        raise op_error(op, f"rois must be (R, 4) and batch_indices (R,), got {tuple(rs)} and {tuple(bs)}")
    if not x.dtype.is_float or not idx.dtype.is_integer:
        raise op_error(op, f"needs float x and integer batch_indices, got {x.dtype} and {idx.dtype}")
    return TensorStructInfo([rs[0], xs[1], attrs["output_height"], attrs["output_width"]], x.dtype)


def _norm_roi(attrs: Any, args: Any) -> dict:
    out = {"mode": str(attrs["mode"]).lower(), "output_height": int(attrs["output_height"]),
           "output_width": int(attrs["output_width"]), "sampling_ratio": int(attrs["sampling_ratio"]),
           "spatial_scale": float(attrs["spatial_scale"]),
           "coordinate_transformation_mode": str(attrs["coordinate_transformation_mode"]).lower()}
    if out["mode"] not in ("avg", "max") or out["coordinate_transformation_mode"] not in ("half_pixel",
                                                                                          "output_half_pixel"):
        raise op_error("roi_align", f"mode must be avg/max and coordinate_transformation_mode half_pixel/"
                                    f"output_half_pixel, got {out['mode']!r}, {out['coordinate_transformation_mode']!r}")
    if out["output_height"] < 1 or out["output_width"] < 1 or out["sampling_ratio"] < 0:
        raise op_error("roi_align", f"output sizes must be positive and sampling_ratio non-negative, got {out}")
    return out


_register(
    "roi_align", num_inputs=3, pattern=OpPattern.OPAQUE,
    attrs={"mode": "avg", "output_height": 1, "output_width": 1, "sampling_ratio": 0, "spatial_scale": 1.0,
           "coordinate_transformation_mode": "half_pixel"},
    normalize_attrs=_norm_roi, infer=_infer_roi,
    legalize=lambda inputs, attrs, out: topi("deform_roi").roi_align(*inputs, *[attrs[a] for a in _ROI_ATTRS]),
    numpy=lambda args, attrs: topi("deform_roi").roi_align_numpy(*args, *[attrs[a] for a in _ROI_ATTRS]),
)


def roi_align(x: Expr, rois: Expr, batch_indices: Expr, mode: str = "avg", output_height: int = 1,
              output_width: int = 1, sampling_ratio: int = 0, spatial_scale: float = 1.0,
              coordinate_transformation_mode: str = "half_pixel") -> Call:
    """Bilinear ROI pooling (ONNX RoiAlign): ``rois`` (R, 4) as (x1, y1, x2, y2) in ``x``'s
    coordinates times ``spatial_scale``, each pooled to ``output_height`` x ``output_width`` bins.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((1, 3, 10, 10), "float32"))
        >>> r = G.Var("r", G.TensorStructInfo((5, 4), "float32"))
        >>> b = G.Var("b", G.TensorStructInfo((5,), "int64"))
        >>> str(roi_align(x, r, b, output_height=2, output_width=2).struct_info)
        'R.Tensor((5, 3, 2, 2), dtype="float32")'
    """
    return make_call("roi_align", [x, rois, batch_indices], mode=mode, output_height=output_height,
                     output_width=output_width, sampling_ratio=sampling_ratio, spatial_scale=spatial_scale,
                     coordinate_transformation_mode=coordinate_transformation_mode)


def _infer_scatter(args: Any, attrs: Any) -> TensorStructInfo:
    op = "tensor_scatter"
    past, upd = tensor_sinfo(op, args[0], 0), tensor_sinfo(op, args[1], 1)
    ps, us = known_shape(op, past, 0), known_shape(op, upd, 1)
    axis = attrs["axis"] + len(ps) if attrs["axis"] < 0 else attrs["axis"]
    if len(ps) != len(us) or not 0 < axis < len(ps) or past.dtype != upd.dtype:
        raise op_error(op, f"past_cache {tuple(ps)} and update {tuple(us)} need the same rank and dtype and a "
                           f"sequence axis other than the batch axis 0, got axis {attrs['axis']}")
    if len(args) == 3:
        ws = known_shape(op, tensor_sinfo(op, args[2], 2), 2)
        if len(ws) != 1:
            raise op_error(op, f"write_indices must be 1-D (one start per batch), got {tuple(ws)}")
    return TensorStructInfo(list(ps), past.dtype)


def _scatter_call(fn: Any, args: Any, attrs: Any) -> Any:
    return fn(args[0], args[1], args[2] if len(args) == 3 else None, attrs["mode"], attrs["axis"])


_register(
    "tensor_scatter", num_inputs=None, pattern=OpPattern.INJECTIVE, attrs={"mode": "linear", "axis": -2},
    normalize_attrs=lambda attrs, args: {"mode": str(attrs["mode"]), "axis": int(attrs["axis"])},
    infer=_infer_scatter,
    legalize=lambda inputs, attrs, out: _scatter_call(topi("kv_cache").tensor_scatter, inputs, attrs),
    numpy=lambda args, attrs: _scatter_call(topi("kv_cache").tensor_scatter_numpy, args, attrs),
)


def tensor_scatter(past: Expr, update: Expr, write_indices: "Expr | None" = None, mode: str = "linear",
                   axis: int = -2) -> Call:
    """``past`` with ``update`` written at ``write_indices[b]`` along ``axis`` per batch ``b`` (ONNX
    TensorScatter, a KV-cache update); ``circular`` wraps around the cache length.

    Example:
        >>> from ingot import graph as G
        >>> c = G.Var("c", G.TensorStructInfo((2, 8, 4), "float32"))
        >>> u = G.Var("u", G.TensorStructInfo((2, 1, 4), "float32"))
        >>> str(tensor_scatter(c, u).struct_info)
        'R.Tensor((2, 8, 4), dtype="float32")'
    """
    args = [past, update] + ([write_indices] if write_indices is not None else [])
    return make_call("tensor_scatter", args, mode=mode, axis=axis)
