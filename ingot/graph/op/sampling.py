"""Graph operators that sample images at computed coordinates: ``grid_sample``, ``affine_grid``
(TE computes and numpy references in `ingot.ops.grid_sample`).

Note: registered when this module is imported (the ONNX frontend's ``ops_image`` imports it), with
the idempotent registration of `onnx_extra`: a name a core family registers first wins.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 3, 8, 8), "float32"))
    >>> g = G.Var("g", G.TensorStructInfo((1, 4, 5, 2), "float32"))
    >>> str(grid_sample(x, g).struct_info)
    'R.Tensor((1, 3, 4, 5), dtype="float32")'
"""
from __future__ import annotations

from typing import Any, Sequence

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error
from ..struct_info import TensorStructInfo
from ._common import known_shape, tensor_sinfo, topi
from .onnx_extra import _register


def _norm_grid_sample(attrs: Any, args: Any) -> dict:
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(attrs["method"], attrs["method"])
    if mode not in ("nearest", "linear", "cubic"):
        raise op_error("grid_sample", f"method must be nearest, linear (bilinear) or cubic (bicubic), got "
                                      f"{attrs['method']!r}")
    if attrs["padding_mode"] not in ("zeros", "border", "reflection"):
        raise op_error("grid_sample", f"padding_mode must be zeros, border or reflection, got "
                                      f"{attrs['padding_mode']!r}")
    return {"method": mode, "padding_mode": str(attrs["padding_mode"]), "align_corners": bool(attrs["align_corners"])}


def _infer_grid_sample(args: Any, attrs: Any) -> TensorStructInfo:
    x, g = tensor_sinfo("grid_sample", args[0], 0), tensor_sinfo("grid_sample", args[1], 1)
    xs, gs = known_shape("grid_sample", x, 0), known_shape("grid_sample", g, 1)
    spatial = len(xs) - 2
    if not 1 <= spatial <= 3 or len(gs) != len(xs) or gs[-1] != spatial:
        raise op_error("grid_sample", f"data (N, C, *in) with 1-3 spatial axes and grid (N, *out, {spatial}) "
                                      f"are needed, got {tuple(xs)} and {tuple(gs)}")
    if not x.dtype.is_float:
        raise op_error("grid_sample", f"needs a floating-point input, got {x.dtype}; cast it first")
    if attrs["method"] == "cubic" and spatial != 2:
        raise op_error("grid_sample", "cubic sampling is defined for 2 spatial axes only (ONNX GridSample)")
    return TensorStructInfo([xs[0], xs[1], *gs[1:-1]], x.dtype)


_register(
    "grid_sample", num_inputs=2, pattern=OpPattern.INJECTIVE,
    attrs={"method": "linear", "padding_mode": "zeros", "align_corners": False},
    normalize_attrs=_norm_grid_sample, infer=_infer_grid_sample,
    legalize=lambda inputs, attrs, out: topi("grid_sample").grid_sample(
        inputs[0], inputs[1], attrs["method"], attrs["padding_mode"], attrs["align_corners"]),
    numpy=lambda args, attrs: topi("grid_sample").grid_sample_numpy(
        args[0], args[1], attrs["method"], attrs["padding_mode"], attrs["align_corners"]),
)


def grid_sample(data: Expr, grid: Expr, method: str = "linear", padding_mode: str = "zeros",
                align_corners: bool = False) -> Call:
    """``data`` (N, C, *in) sampled at the normalized coordinates ``grid`` (N, *out, D) (ONNX
    GridSample / ``torch.nn.functional.grid_sample``; the grid's last axis is x, y, z).

    Example: see the module docstring.
    """
    return make_call("grid_sample", [data, grid], method=method, padding_mode=padding_mode,
                     align_corners=align_corners)


def _infer_affine_grid(args: Any, attrs: Any) -> TensorStructInfo:
    t = tensor_sinfo("affine_grid", args[0])
    ts = known_shape("affine_grid", t)
    size = attrs["size"]
    dims = len(size) - 2
    if dims not in (2, 3) or len(ts) != 3 or ts[1] != dims or ts[2] != dims + 1:
        raise op_error("affine_grid", f"theta must be (N, {dims}, {dims + 1}) for size {tuple(size)}, got {tuple(ts)}")
    return TensorStructInfo([ts[0], *size[2:], dims], t.dtype)


_register(
    "affine_grid", num_inputs=1, pattern=OpPattern.INJECTIVE, attrs={"size": None, "align_corners": False},
    normalize_attrs=lambda attrs, args: {"size": tuple(int(d) for d in attrs["size"]),
                                         "align_corners": bool(attrs["align_corners"])},
    infer=_infer_affine_grid,
    legalize=lambda inputs, attrs, out: topi("grid_sample").affine_grid(inputs[0], attrs["size"],
                                                                       attrs["align_corners"]),
    numpy=lambda args, attrs: topi("grid_sample").affine_grid_numpy(args[0], attrs["size"], attrs["align_corners"]),
)


def affine_grid(theta: Expr, size: Sequence[int], align_corners: bool = False) -> Call:
    """The sampling grid (N, *size[2:], D) of the affine maps ``theta`` (N, D, D+1) (ONNX AffineGrid).

    Example:
        >>> from ingot import graph as G
        >>> t = G.Var("t", G.TensorStructInfo((2, 2, 3), "float32"))
        >>> str(affine_grid(t, (2, 3, 4, 5)).struct_info)
        'R.Tensor((2, 4, 5, 2), dtype="float32")'
    """
    return make_call("affine_grid", [theta], size=tuple(size), align_corners=align_corners)
