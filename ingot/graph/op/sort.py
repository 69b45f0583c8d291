"""Graph operators that order elements: ``topk`` (values and indices; TE compute in `ingot.ops.sort`).

Note: ``topk`` follows Relax's ``R.topk`` (``k``, ``axis``, ``ret_type``, ``largest``, ``dtype``) plus ONNX's
``sorted`` flag. Ties keep index order (the smaller index first), as ONNX specifies and ONNX Runtime does;
the output is always sorted, which also satisfies ``sorted=False`` (any order allowed then).

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2, 10), "float32"))
    >>> str(topk(x, 3).struct_info)
    'R.Tuple(R.Tensor((2, 3), dtype="float32"), R.Tensor((2, 3), dtype="int64"))'
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error, register_op
from ..struct_info import TensorStructInfo, TupleStructInfo
from ._common import known_shape, norm_axis, tensor_sinfo, topi

__all__ = ["topk"]

_RET_TYPES = ("both", "values", "indices")


def _norm_topk(attrs: Any, args: Any) -> dict:
    ret_type = str(attrs["ret_type"])
    if ret_type not in _RET_TYPES:
        raise op_error("topk", f"ret_type={ret_type!r}; use one of {', '.join(_RET_TYPES)}")
    dtype = str(attrs["dtype"])
    if dtype not in ("int32", "int64"):
        raise op_error("topk", f"dtype={dtype!r} for the indices; use 'int32' or 'int64'")
    return {"k": int(attrs["k"]), "axis": int(attrs["axis"]), "ret_type": ret_type,
            "largest": bool(attrs["largest"]), "sorted": bool(attrs["sorted"]), "dtype": dtype}


def _infer_topk(args: Any, attrs: Any) -> Any:
    x = tensor_sinfo("topk", args[0])
    shape = list(known_shape("topk", x))
    axis = norm_axis("topk", attrs["axis"], len(shape))
    k = attrs["k"]
    if k < 0 or (isinstance(shape[axis], int) and k > shape[axis]):
        raise op_error("topk", f"k={k} must be between 0 and the length {shape[axis]} of axis {axis}; "
                               f"pass a smaller k")
    shape[axis] = k
    values, indices = TensorStructInfo(shape, x.dtype), TensorStructInfo(shape, attrs["dtype"])
    if attrs["ret_type"] == "values":
        return values
    if attrs["ret_type"] == "indices":
        return indices
    return TupleStructInfo([values, indices])


def _np_topk(args: Any, attrs: Any) -> Any:
    x = args[0]
    axis = attrs["axis"] % x.ndim
    # A stable sort keeps ties in index order. Descending order is the stable ascending sort of the
    # flipped array, read backwards (no negation: unsigned dtypes and -0.0 stay intact).
    if attrs["largest"]:
        n = x.shape[axis]
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    indices = np.take(order, np.arange(attrs["k"]), axis=axis)
    values = np.take_along_axis(x, indices, axis=axis)
    indices = indices.astype(attrs["dtype"])
    return {"values": values, "indices": indices, "both": (values, indices)}[attrs["ret_type"]]


register_op(
    "topk", num_inputs=1, pattern=OpPattern.OPAQUE,
    attrs={"k": 1, "axis": -1, "ret_type": "both", "largest": True, "sorted": True, "dtype": "int64"},
    normalize_attrs=_norm_topk, infer=_infer_topk,
    legalize=lambda inputs, attrs, out: topi("sort").topk(inputs[0], attrs["k"], attrs["axis"], attrs["ret_type"],
                                                          attrs["largest"], attrs["dtype"]),
    numpy=_np_topk,
    doc="The k largest/smallest elements along an axis and their indices (ties: smaller index first).",
)


def topk(x: Expr, k: int = 1, axis: int = -1, ret_type: str = "both", largest: bool = True,
         dtype: str = "int64", sorted: bool = True) -> Call:  # noqa: A002 - ONNX's attribute name
    """The ``k`` largest (``largest=True``) or smallest elements of ``x`` along ``axis`` and their indices,
    in order, ties broken by the smaller index. ``ret_type="both"`` gives a tuple ``(values, indices)``;
    ``"values"`` / ``"indices"`` one tensor.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4, 8), "float32"))
        >>> str(topk(x, 2, axis=0, ret_type="indices").struct_info)
        'R.Tensor((2, 8), dtype="int64")'
    """
    return make_call("topk", [x], k=k, axis=axis, ret_type=ret_type, largest=largest, sorted=sorted, dtype=dtype)
