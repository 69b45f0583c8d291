"""Tensor creation and shape-changing operators: full/zeros/ones/arange, pad, broadcast_to
(expand), unsqueeze, cumsum.

Creation ops take no tensor argument, so `FoldConstant` turns them into constants before
anything is compiled (their TE computes still exist for graphs that keep them).

Example:
    >>> from ingot import graph as G
    >>> zeros((2, 3)).struct_info.shape
    (2, 3)
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error, register_op
from ..struct_info import TensorStructInfo
from ._common import known_shape, norm_axis, tensor_sinfo, topi
from .manip import expand_dims

# -- full / zeros / ones / arange -----------------------------------------------------------------

register_op(
    "full", num_inputs=0, pattern=OpPattern.ELEMWISE, attrs={"shape": None, "fill_value": 0.0, "dtype": "float32"},
    normalize_attrs=lambda attrs, args: {"shape": tuple(int(d) for d in attrs["shape"]),
                                         "fill_value": float(attrs["fill_value"]), "dtype": str(attrs["dtype"])},
    infer=lambda args, attrs: TensorStructInfo(attrs["shape"], attrs["dtype"]),
    legalize=lambda inputs, attrs, out: topi("transform").full(attrs["shape"], attrs["fill_value"], attrs["dtype"]),
    numpy=lambda args, attrs: np.full(attrs["shape"], attrs["fill_value"], dtype=attrs["dtype"]),
)


def full(shape: Sequence[int], fill_value: float, dtype: str = "float32") -> Call:
    """A tensor of ``shape`` filled with ``fill_value``.

    Example:
        >>> from ingot import graph as G
        >>> str(G.op.full((2,), 1.5).struct_info)
        'R.Tensor((2,), dtype="float32")'
    """
    return make_call("full", [], shape=tuple(shape), fill_value=fill_value, dtype=dtype)


def zeros(shape: Sequence[int], dtype: str = "float32") -> Call:
    """``full(shape, 0)``.

    Example:
        >>> from ingot import graph as G
        >>> G.op.zeros((2, 2)).attrs["fill_value"]
        0.0
    """
    return full(shape, 0.0, dtype)


def ones(shape: Sequence[int], dtype: str = "float32") -> Call:
    """``full(shape, 1)``.

    Example:
        >>> from ingot import graph as G
        >>> G.op.ones((2, 2)).attrs["fill_value"]
        1.0
    """
    return full(shape, 1.0, dtype)


def _arange_len(attrs: Any) -> int:
    if attrs["step"] == 0:
        raise op_error("arange", "step must not be 0")
    return max(0, int(math.ceil((attrs["stop"] - attrs["start"]) / attrs["step"])))


register_op(
    "arange", num_inputs=0, pattern=OpPattern.ELEMWISE,
    attrs={"start": 0, "stop": None, "step": 1, "dtype": "int64"},
    infer=lambda args, attrs: TensorStructInfo((_arange_len(attrs),), attrs["dtype"]),
    legalize=lambda inputs, attrs, out: topi("transform").arange(attrs["start"], attrs["stop"], attrs["step"],
                                                                 attrs["dtype"]),
    numpy=lambda args, attrs: np.arange(attrs["start"], attrs["stop"], attrs["step"]).astype(attrs["dtype"]),
)


def arange(start: float, stop: "float | None" = None, step: float = 1, dtype: str = "int64") -> Call:
    """``numpy.arange`` with constant bounds (``arange(n)`` counts from 0).

    Example:
        >>> from ingot import graph as G
        >>> G.op.arange(0, 10, 3).struct_info.shape
        (4,)
    """
    if stop is None:
        start, stop = 0, start
    return make_call("arange", [], start=start, stop=stop, step=step, dtype=dtype)


# -- pad ---------------------------------------------------------------------------------------------


def _norm_pad(attrs: Any, args: Any) -> dict:
    ndim = tensor_sinfo("pad", args[0]).ndim
    width = [tuple(int(v) for v in p) for p in attrs["pad_width"]]
    if len(width) != ndim or any(len(p) != 2 or min(p) < 0 for p in width):
        raise op_error("pad", f"pad_width must be {ndim} pairs (before, after) of non-negative ints, got "
                              f"{attrs['pad_width']}")
    return {"pad_width": tuple(width), "pad_value": float(attrs["pad_value"]), "pad_mode": attrs["pad_mode"]}


def _infer_pad(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("pad", args[0])
    if attrs["pad_mode"] != "constant":
        raise op_error("pad", f"pad_mode {attrs['pad_mode']!r} is not implemented; only 'constant'")
    shape = known_shape("pad", x)
    return TensorStructInfo([d + b + a for d, (b, a) in zip(shape, attrs["pad_width"])], x.dtype)


register_op(
    "pad", num_inputs=1, pattern=OpPattern.INJECTIVE,
    attrs={"pad_width": None, "pad_value": 0.0, "pad_mode": "constant"}, normalize_attrs=_norm_pad, infer=_infer_pad,
    legalize=lambda inputs, attrs, out: topi("nn").pad(inputs[0], [p[0] for p in attrs["pad_width"]],
                                                       [p[1] for p in attrs["pad_width"]], attrs["pad_value"]),
    numpy=lambda args, attrs: np.pad(args[0], attrs["pad_width"], constant_values=attrs["pad_value"]),
)


def pad(x: Expr, pad_width: Sequence[Sequence[int]], pad_value: float = 0.0, pad_mode: str = "constant") -> Call:
    """``numpy.pad(x, pad_width, constant_values=pad_value)``.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
        >>> G.op.pad(x, [(1, 1), (0, 2)]).struct_info.shape
        (4, 5)
    """
    return make_call("pad", [x], pad_width=tuple(tuple(p) for p in pad_width), pad_value=pad_value,
                     pad_mode=pad_mode)


# -- broadcast_to / unsqueeze ----------------------------------------------------------------------


def _infer_broadcast_to(args: Any, attrs: Any) -> TensorStructInfo:
    # The target is the result. A symbolic input dim may meet any target dim (a run-time 1 broadcasts:
    # the kernel reads it at select(n == 1, 0, i)); whoever makes the target checks the pair at run
    # time (ONNX Expand: the expand_shape builtin). A constant input dim must be 1 or the target's.
    x = tensor_sinfo("broadcast_to", args[0])
    target = tuple(attrs["shape"])
    src = known_shape("broadcast_to", x)
    offset = len(target) - len(src)
    if offset < 0 or any(isinstance(d, int) and d != 1 and not (isinstance(t, int) and t == d)
                         for d, t in zip(src, target[offset:] if offset >= 0 else ())):
        raise op_error("broadcast_to", f"cannot broadcast {tuple(map(str, x.shape))} to {tuple(map(str, target))}: "
                                       "each input dim must be 1 or the target's (right-aligned)")
    return TensorStructInfo(target, x.dtype)


register_op(
    "broadcast_to", num_inputs=1, pattern=OpPattern.BROADCAST, attrs={"shape": None},
    infer=_infer_broadcast_to,
    legalize=lambda inputs, attrs, out: topi("transform").broadcast_to(inputs[0], out.shape),
    numpy=lambda args, attrs: np.array(np.broadcast_to(args[0], attrs["shape"])),
)


def broadcast_to(x: Expr, shape: Sequence[Any]) -> Call:
    """``x`` broadcast to ``shape`` (numpy rules; ONNX ``Expand`` with a full target shape).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((3, 1), "float32"))
        >>> G.op.broadcast_to(x, (2, 3, 4)).struct_info.shape
        (2, 3, 4)
    """
    return make_call("broadcast_to", [x], shape=tuple(shape))


expand = broadcast_to


def unsqueeze(x: Expr, axis: int) -> Call:
    """PyTorch/ONNX name of `expand_dims` (one new size-1 axis at ``axis``).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
        >>> G.op.unsqueeze(x, 0).struct_info.shape
        (1, 2, 3)
    """
    return expand_dims(x, axis)


# -- cumsum ------------------------------------------------------------------------------------------


def _infer_cumsum(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("cumsum", args[0])
    norm_axis("cumsum", attrs["axis"], x.ndim)
    return x


def _np_cumsum(args: Any, attrs: Any) -> np.ndarray:
    out = np.cumsum(args[0], axis=attrs["axis"]).astype(args[0].dtype)
    return out - args[0] if attrs["exclusive"] else out


register_op(
    "cumsum", num_inputs=1, pattern=OpPattern.OPAQUE, attrs={"axis": 0, "exclusive": False},
    normalize_attrs=lambda attrs, args: {"axis": int(attrs["axis"]), "exclusive": bool(attrs["exclusive"])},
    infer=_infer_cumsum,
    legalize=lambda inputs, attrs, out: topi("transform").cumsum(inputs[0], attrs["axis"], attrs["exclusive"]),
    numpy=_np_cumsum,
)


def cumsum(x: Expr, axis: int = 0, exclusive: bool = False) -> Call:
    """Cumulative sum along ``axis`` (``exclusive``: without the element itself).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 5), "float32"))
        >>> G.op.cumsum(x, axis=1).struct_info.shape
        (2, 5)
    """
    return make_call("cumsum", [x], axis=axis, exclusive=exclusive)
