"""Shared helpers for operator registrations: struct-info checks, symbolic broadcasting, lazy
access to `ingot.ops`.

Example:
    >>> from ingot.ir import Var
    >>> n = Var("n", "int64")
    >>> broadcast_shapes("add", (n, 1), (4,))
    (n, 4)
"""
from __future__ import annotations

import importlib
from typing import Any, Sequence

from ingot.ir import PrimExpr

from ..expr import Constant, Expr
from ..op_registry import op_error
from ..struct_info import TensorStructInfo, dims_equal


def tensor_sinfo(op: str, arg: Any, index: int = 0) -> TensorStructInfo:
    """The `TensorStructInfo` of argument ``index`` (raises naming the op if it is not a tensor)."""
    sinfo = arg.struct_info
    if not isinstance(sinfo, TensorStructInfo):
        raise op_error(op, f"argument {index} (`{arg}`) must be a tensor, its struct info is {sinfo}")
    return sinfo


def known_shape(op: str, sinfo: TensorStructInfo, index: int = 0) -> tuple:
    """The shape of a tensor argument (raises when only its rank is known)."""
    if sinfo.shape is None:
        raise op_error(op, f"argument {index} has unknown shape ({sinfo}); shape inference needs its dims "
                           f"(give the variable a full TensorStructInfo)")
    return sinfo.shape


def broadcast_shapes(op: str, *shapes: Sequence[Any]) -> tuple:
    """numpy broadcasting of shapes with int and symbolic dims.

    A symbolic dim broadcasts with 1 and with itself; against a constant other than 1 the result is
    the constant (the symbolic dim is 1 or that constant at run time: the kernel reads it with
    ``select(n == 1, 0, i)``, see `ingot.ops._util.broadcast_index`); against a different symbolic
    dim the result cannot be named, so it is an error that says how to fix it.

    Example:
        >>> broadcast_shapes("add", (2, 1, 3), (4, 1))
        (2, 4, 3)
        >>> from ingot.ir import Var
        >>> broadcast_shapes("add", (Var("n", "int64"),), (5,))
        (5,)
    """
    ndim = max(len(s) for s in shapes)
    out = []
    for k in range(ndim):
        dim: Any = 1
        for s in shapes:
            j = k - (ndim - len(s))
            if j < 0:
                continue
            d = s[j]
            if isinstance(dim, int) and dim == 1:
                dim = d
            elif isinstance(d, int) and d == 1:
                continue
            elif isinstance(d, int) and not isinstance(dim, int):
                dim = d  # symbolic vs a constant: the constant
            elif isinstance(dim, int) and not isinstance(d, int):
                continue
            elif not dims_equal(dim, d):
                raise op_error(op, f"shapes {tuple(map(str, shapes[0]))} and {tuple(map(str, shapes[1]))} do not "
                                   f"broadcast: dimension {k} is {dim} vs {d}"
                                   + ("; if they are equal at run time, use the same symbolic Var for both"
                                      if isinstance(dim, PrimExpr) or isinstance(d, PrimExpr) else ""))
        out.append(dim)
    return tuple(out)


def norm_axis(op: str, axis: int, ndim: int) -> int:
    """A non-negative axis, or an error naming the op."""
    if not -ndim <= axis < max(ndim, 1):
        raise op_error(op, f"axis {axis} is out of range for a tensor of rank {ndim}")
    return axis + ndim if axis < 0 else axis


def as_expr(value: Any, like: "Expr | None" = None) -> Expr:
    """A graph expression from an expression or a Python scalar/array (scalars take ``like``'s dtype)."""
    if isinstance(value, Expr):
        return value
    import numpy as np

    dtype = None
    if like is not None and isinstance(like.struct_info, TensorStructInfo) and np.ndim(value) == 0:
        dtype = str(like.struct_info.dtype)
    return Constant(value, dtype)


def topi(family: str) -> Any:
    """``ingot.ops.<family>``, imported on first use (legalization only; keeps graph import light)."""
    return importlib.import_module(f"ingot.ops.{family}")


# Storage types too narrow to accumulate in: 11 (float16) or 8 (bfloat16) significant bits lose several
# units in the last place over a K=64 dot product or a softmax row.
HALF_FLOAT_DTYPES = ("float16", "bfloat16")


def accumulate_in_float32(legalize: Any, cast_inputs: bool = False) -> Any:
    """A legalization computing a float16/bfloat16 op in float32 and rounding once at the end.

    For any other dtype ``legalize`` is called unchanged. With a half-precision result, ``legalize``
    gets a float32 ``out`` (ops that take ``out_dtype`` from it — matmul, conv — then multiply and
    accumulate in float32; their operands are widened element by element as they are read) and, with
    ``cast_inputs``, float32 copies of its floating-point inputs (softmax, norms and reductions compute
    in their input's dtype). This is how ONNX Runtime, PyTorch and numpy's own half reductions
    compute, and what the ONNX reference results are within tolerance of.

    Example:
        >>> from ingot import te
        >>> from ingot.graph.struct_info import TensorStructInfo
        >>> mm = lambda inputs, attrs, out: topi("linalg").matmul(*inputs, out_dtype=str(out.dtype))
        >>> a, b = te.placeholder((2, 8), "float16", name="a"), te.placeholder((8, 3), "float16", name="b")
        >>> y = accumulate_in_float32(mm)([a, b], {}, TensorStructInfo((2, 3), "float16"))
        >>> str(y.dtype), str(y.op.input_tensors[0].dtype)
        ('float16', 'float32')
    """

    def wrapped(inputs: Any, attrs: Any, out: Any) -> Any:
        dtype = str(out.dtype)
        if dtype not in HALF_FLOAT_DTYPES:
            return legalize(inputs, attrs, out)
        elemwise = topi("elemwise")
        if cast_inputs:
            inputs = [elemwise.cast(t, "float32") if str(getattr(t, "dtype", "")) in HALF_FLOAT_DTYPES else t
                      for t in inputs]
        wide = legalize(inputs, attrs, TensorStructInfo(out.shape, "float32"))
        return elemwise.cast(wide, dtype)

    wrapped.__name__ = getattr(legalize, "__name__", "legalize")
    wrapped.__doc__ = legalize.__doc__
    return wrapped
