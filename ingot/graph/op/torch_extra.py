"""Graph operators the PyTorch importer needs that the core families lack: ``broadcast_to``
(``Tensor.expand``) and ``pad`` (``F.pad`` / ``constant_pad_nd``), with TVM Relax's names and
semantics. Importing this module registers them (once; if the core families register an operator
of the same name later, theirs is kept).

Note: ``broadcast_to`` has no numpy reference on purpose: its target shape may be symbolic
(``cls_token.expand(batch, -1, -1)``), which `FoldConstant` could not evaluate; the importer
evaluates static expands itself with PyTorch.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 1, 8), "float32"))
    >>> broadcast_to(x, (4, 3, 8)).struct_info.shape
    (4, 3, 8)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ingot.ir.error import IRError

from ..expr import Call, Expr
from ..op_registry import OpPattern, get_op_def, make_call, op_error, register_op
from ..struct_info import TensorStructInfo, dims_equal, normalize_dim
from ._common import broadcast_shapes, known_shape, tensor_sinfo, topi


def _registered(name: str) -> bool:
    try:
        get_op_def(name)
        return True
    except IRError:
        return False


def _infer_broadcast_to(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("broadcast_to", args[0])
    src = known_shape("broadcast_to", x)
    shape = attrs["shape"]
    if len(src) > len(shape):
        raise op_error("broadcast_to", f"cannot broadcast shape {tuple(map(str, src))} to the lower rank "
                                       f"{tuple(map(str, shape))}")
    out = broadcast_shapes("broadcast_to", src, shape)
    if not all(dims_equal(a, b) for a, b in zip(out, shape)):
        raise op_error("broadcast_to", f"shape {tuple(map(str, src))} does not broadcast to {tuple(map(str, shape))}")
    return TensorStructInfo(shape, x.dtype)


def _infer_pad(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("pad", args[0])
    src = known_shape("pad", x)
    width = attrs["pad_width"]
    if len(width) != 2 * len(src):
        raise op_error("pad", f"pad_width needs 2 entries (before, after) per axis, i.e. {2 * len(src)}, "
                              f"got {len(width)}")
    out = [d + width[2 * i] + width[2 * i + 1] if isinstance(d, int) else normalize_dim(d + (width[2 * i] +
                                                                                              width[2 * i + 1]))
           for i, d in enumerate(src)]
    return TensorStructInfo(out, x.dtype)


def _np_pad(args: Any, attrs: Any) -> np.ndarray:
    w = attrs["pad_width"]
    pairs = [(w[2 * i], w[2 * i + 1]) for i in range(args[0].ndim)]
    return np.pad(args[0], pairs, constant_values=attrs["pad_value"]).astype(args[0].dtype)


if not _registered("broadcast_to"):
    register_op(
        "broadcast_to", num_inputs=1, pattern=OpPattern.BROADCAST, attrs={"shape": None},
        normalize_attrs=lambda attrs, args: {"shape": tuple(normalize_dim(d) for d in attrs["shape"])},
        infer=_infer_broadcast_to,
        legalize=lambda inputs, attrs, out: topi("torch_extra").broadcast_to(inputs[0], out.shape),
        doc="numpy.broadcast_to, materialized (TVM Relax's broadcast_to).",
    )

if not _registered("pad"):
    register_op(
        "pad", num_inputs=1, pattern=OpPattern.INJECTIVE, attrs={"pad_width": None, "pad_value": 0.0},
        normalize_attrs=lambda attrs, args: {"pad_width": tuple(int(p) for p in attrs["pad_width"]),
                                             "pad_value": float(attrs["pad_value"])},
        infer=_infer_pad, numpy=_np_pad,
        legalize=lambda inputs, attrs, out: topi("nn").pad(
            inputs[0], attrs["pad_width"][0::2], attrs["pad_width"][1::2], attrs["pad_value"]),
        doc="Constant padding; pad_width is (before_0, after_0, before_1, after_1, ...).",
    )


def broadcast_to(x: Expr, shape: Sequence[Any]) -> Call:
    """``x`` broadcast to ``shape`` (numpy rules; dims may be symbolic).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((3,), "float32"))
        >>> broadcast_to(x, (2, 3)).struct_info.shape
        (2, 3)
    """
    return make_call("broadcast_to", [x], shape=tuple(shape))


def pad(x: Expr, pad_width: Sequence[int], pad_value: float = 0.0) -> Call:
    """``x`` padded with ``pad_value``: ``pad_width = (before_0, after_0, before_1, after_1, ...)``.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
        >>> pad(x, (0, 0, 1, 2)).struct_info.shape
        (2, 6)
    """
    return make_call("pad", [x], pad_width=tuple(pad_width), pad_value=pad_value)
