"""Image operators: ``resize2d`` (nearest and linear/bilinear; TVM's attribute names and
coordinate transformation modes, see `ingot.ops.image`).

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 3, 8, 8), "float32"))
    >>> resize2d(x, (16, 16)).struct_info.shape
    (1, 3, 16, 16)
"""
from __future__ import annotations

from typing import Any, Sequence

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error, register_op
from ..struct_info import TensorStructInfo
from ._common import known_shape, tensor_sinfo, topi


def _norm_resize(attrs: Any, args: Any) -> dict:
    from ingot.ops.image import check_resize_attrs

    out = dict(attrs)
    size = attrs["size"]
    size = (size, size) if isinstance(size, int) else tuple(size)
    if len(size) != 2 or not all(isinstance(d, int) and d > 0 for d in size):
        raise op_error("resize2d", f"size must be (out_h, out_w) of positive ints, got {attrs['size']!r}")
    out["size"] = size
    method = {"nearest": "nearest_neighbor", "bilinear": "linear"}.get(attrs["method"], attrs["method"])
    out["method"] = method
    if attrs["layout"] not in ("NCHW", "NHWC"):
        raise op_error("resize2d", f"layout must be 'NCHW' or 'NHWC', got {attrs['layout']!r}")
    try:
        check_resize_attrs(method, attrs["coordinate_transformation_mode"], attrs["rounding_method"])
    except ValueError as err:
        raise op_error("resize2d", str(err).split(": ", 1)[1]) from None
    return out


def _infer_resize(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("resize2d", args[0])
    s = list(known_shape("resize2d", x))
    if len(s) != 4:
        raise op_error("resize2d", f"input must be 4-D ({attrs['layout']}), got shape {tuple(s)}")
    if not x.dtype.is_float:
        raise op_error("resize2d", f"needs a floating-point input, got {x.dtype}; cast it first with G.op.cast")
    s[attrs["layout"].index("H")], s[attrs["layout"].index("W")] = attrs["size"]
    return TensorStructInfo(s, x.dtype)


def _np_resize(args: Any, attrs: Any) -> Any:
    from ingot.ops.image import resize2d_numpy

    return resize2d_numpy(args[0], attrs["size"], attrs["layout"], attrs["method"],
                          attrs["coordinate_transformation_mode"], attrs["rounding_method"])


register_op(
    "resize2d", num_inputs=1, pattern=OpPattern.INJECTIVE,
    attrs={"size": None, "layout": "NCHW", "method": "linear", "coordinate_transformation_mode": "half_pixel",
           "rounding_method": ""},
    normalize_attrs=_norm_resize, infer=_infer_resize, numpy=_np_resize,
    legalize=lambda inputs, attrs, out: topi("image").resize2d(
        inputs[0], attrs["size"], attrs["layout"], attrs["method"], attrs["coordinate_transformation_mode"],
        attrs["rounding_method"]),
    doc="Resize H and W (nearest or bilinear).",
)


def resize2d(x: Expr, size: "int | Sequence[int]", layout: str = "NCHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "") -> Call:
    """``x`` resized to ``size = (out_h, out_w)``. ``method``: ``"nearest_neighbor"`` (or
    ``"nearest"``) / ``"linear"`` (or ``"bilinear"``); ``coordinate_transformation_mode``:
    ``half_pixel``, ``pytorch_half_pixel``, ``align_corners``, ``asymmetric``; ``rounding_method``
    (nearest): ``floor``, ``ceil``, ``round``, ``round_prefer_floor``, ``round_prefer_ceil``.
    PyTorch ``interpolate(mode="nearest")`` is nearest + asymmetric + floor; ``bilinear`` is linear +
    half_pixel (``align_corners=True``: align_corners).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 4, 4, 3), "float32"))
        >>> G.op.resize2d(x, (8, 6), layout="NHWC", method="nearest").struct_info.shape
        (2, 8, 6, 3)
    """
    return make_call("resize2d", [x], size=size, layout=layout, method=method,
                     coordinate_transformation_mode=coordinate_transformation_mode, rounding_method=rounding_method)
