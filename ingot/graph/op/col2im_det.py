"""Graph operators ``col2im`` (ONNX Col2Im) and ``det`` (ONNX Det); TE computes and numpy references
in `ingot.ops.col2im_det`.

Note: registered when this module is imported (the ONNX frontend's ``ops_image`` imports it), with
the idempotent registration of `onnx_extra`.

Example:
    >>> from ingot import graph as G
    >>> c = G.Var("c", G.TensorStructInfo((1, 8, 9), "float32"))
    >>> str(col2im(c, (4, 4), (2, 2)).struct_info)
    'R.Tensor((1, 2, 4, 4), dtype="float32")'
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error
from ..struct_info import TensorStructInfo
from ._common import known_shape, tensor_sinfo, topi
from .onnx_extra import _register

_COL2IM_ATTRS = ("image_shape", "block_shape", "dilations", "pads", "strides")


def _norm_col2im(attrs: Any, args: Any) -> dict:
    d = len(attrs["image_shape"])
    out = {"image_shape": tuple(int(v) for v in attrs["image_shape"]),
           "block_shape": tuple(int(v) for v in attrs["block_shape"]),
           "dilations": tuple(int(v) for v in (attrs["dilations"] or [1] * d)),
           "pads": tuple(int(v) for v in (attrs["pads"] or [0] * (2 * d))),
           "strides": tuple(int(v) for v in (attrs["strides"] or [1] * d))}
    if not (len(out["block_shape"]) == len(out["dilations"]) == len(out["strides"]) == d and len(out["pads"]) == 2 * d):
        raise op_error("col2im", f"image_shape, block_shape, dilations, strides (one per spatial axis) and pads "
                                 f"(two per axis) disagree: {out}")
    return out


def _infer_col2im(args: Any, attrs: Any) -> TensorStructInfo:
    from ingot.ops.col2im_det import _blocks_per_axis

    s = tensor_sinfo("col2im", args[0])
    shape = known_shape("col2im", s)
    k = math.prod(attrs["block_shape"])
    blocks = math.prod(_blocks_per_axis(attrs["image_shape"], attrs["block_shape"], attrs["dilations"],
                                        attrs["pads"], attrs["strides"]))
    if len(shape) != 3 or not isinstance(shape[1], int) or shape[1] % k or shape[2] != blocks:
        raise op_error("col2im", f"input must be (N, C * {k}, {blocks}) for image {attrs['image_shape']} and block "
                                 f"{attrs['block_shape']}, got {tuple(shape)}")
    return TensorStructInfo([shape[0], shape[1] // k, *attrs["image_shape"]], s.dtype)


_register(
    "col2im", num_inputs=1, pattern=OpPattern.OPAQUE,
    attrs={"image_shape": None, "block_shape": None, "dilations": None, "pads": None, "strides": None},
    normalize_attrs=_norm_col2im, infer=_infer_col2im,
    legalize=lambda inputs, attrs, out: topi("col2im_det").col2im(inputs[0], *[attrs[a] for a in _COL2IM_ATTRS]),
    numpy=lambda args, attrs: topi("col2im_det").col2im_numpy(args[0], *[attrs[a] for a in _COL2IM_ATTRS]),
)


def col2im(cols: Expr, image_shape: Sequence[int], block_shape: Sequence[int], dilations: Any = None,
           pads: Any = None, strides: Any = None) -> Call:
    """Sliding blocks ``cols`` (N, C * prod(block_shape), L) summed back into images (N, C, *image_shape)
    (ONNX Col2Im, PyTorch ``fold``).

    Example: see the module docstring.
    """
    return make_call("col2im", [cols], image_shape=tuple(image_shape), block_shape=tuple(block_shape),
                     dilations=dilations, pads=pads, strides=strides)


def _infer_det(args: Any, attrs: Any) -> TensorStructInfo:
    s = tensor_sinfo("det", args[0])
    shape = known_shape("det", s)
    if len(shape) < 2 or shape[-1] != shape[-2] or not isinstance(shape[-1], int) or shape[-1] > 4:
        raise op_error("det", f"needs square matrices of static size at most 4 in the last two axes, got "
                              f"{tuple(shape)}")
    if not s.dtype.is_float:
        raise op_error("det", f"needs a floating-point input, got {s.dtype}")
    return TensorStructInfo(list(shape[:-2]), s.dtype)


_register(
    "det", num_inputs=1, pattern=OpPattern.INJECTIVE, infer=_infer_det,
    legalize=lambda inputs, attrs, out: topi("col2im_det").det(inputs[0]),
    numpy=lambda args, attrs: topi("col2im_det").det_numpy(args[0]),
)


def det(x: Expr) -> Call:
    """Determinants of the square matrices in the last two axes of ``x`` (ONNX Det; size <= 4).

    Example:
        >>> from ingot import graph as G
        >>> m = G.Var("m", G.TensorStructInfo((5, 3, 3), "float32"))
        >>> str(det(m).struct_info)
        'R.Tensor((5,), dtype="float32")'
    """
    return make_call("det", [x])
