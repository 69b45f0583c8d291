"""`ingot.te`: the tensor expression language (TVM's ``tvm.te``).

Describe a computation elementwise with `placeholder` and `compute` (reductions with
`reduce_axis` and `sum`/`max`/`min`/`comm_reducer`), then turn it into a TensorIR function with
`create_prim_func`. The math intrinsics of `ingot.tir` are re-exported (``te.exp``, ``te.sqrt``...).

Example:
    >>> from ingot import te
    >>> m, n = te.var("m"), te.var("n")
    >>> A = te.placeholder((m, n), name="A")
    >>> k = te.reduce_axis((0, n), name="k")
    >>> S = te.compute((m,), lambda i: te.sum(A[i, k], axis=k), name="S")
    >>> f = te.create_prim_func([A, S])
    >>> [str(d) for d in f.params[1].shape]
    ['m']
"""
from ingot.ir.expr import IterVar, PrimExpr, Range, SizeVar, Var, const, max_value, min_value
from ingot.tir.op import (
    abs, acos, acosh, all, any, asin, asinh, atan, atan2, atanh, ceil, copysign, cos, cosh, div, erf, exp, exp2,
    exp10, expm1, floor, floordiv, floormod, fmod, hypot, if_then_else, isfinite, isinf, isnan, log, log1p, log2,
    log10, nearbyint, pow, power, reinterpret, round, rsqrt, select, sigmoid, sin, sinh, sqrt, tan, tanh, trunc,
    truncdiv, truncmod,
)
from ingot.tir.op import call_extern

from .create_prim_func import create_prim_func
from .reduce import CommReducer, Reduce, comm_reducer, max, min, sum
from .tensor import (
    ComputeOp, Operation, PlaceholderOp, Tensor, TensorSlice, compute, placeholder, reduce_axis, size_var, var,
)

__all__ = [
    "placeholder", "compute", "var", "size_var", "reduce_axis", "create_prim_func",
    "sum", "max", "min", "comm_reducer", "CommReducer", "Reduce",
    "Tensor", "TensorSlice", "Operation", "PlaceholderOp", "ComputeOp",
    "IterVar", "PrimExpr", "Range", "SizeVar", "Var", "const", "max_value", "min_value",
    "abs", "acos", "acosh", "all", "any", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "copysign", "cos",
    "cosh", "div", "erf", "exp", "exp2", "exp10", "expm1", "floor", "floordiv", "floormod", "fmod", "hypot",
    "if_then_else", "isfinite", "isinf", "isnan", "log", "log1p", "log2", "log10", "nearbyint", "pow", "power",
    "reinterpret", "round", "rsqrt", "select", "sigmoid", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
    "truncdiv", "truncmod", "call_extern", "RemovedSpellingError",
]


class RemovedSpellingError(AttributeError):
    """A TVM name that Ingot's `ingot.te` does not have, with the Ingot way in the message.

    Example:
        >>> from ingot import te
        >>> te.create_schedule  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ingot.te.RemovedSpellingError: ingot.te has no create_schedule (TVM's old te schedules): ...
    """


#: TVM's te names → the Ingot way (TVM itself moved to these; its te schedules are gone).
_TVM_SPELLINGS = {
    "create_schedule": "make a TensorIR function with te.create_prim_func([A, B, C]) and schedule it with "
                       "ingot.tir.Schedule(func) (sch.split / sch.reorder / sch.parallel ...), then ingot.build(sch.mod)",
}


def __getattr__(name: str):
    if name in _TVM_SPELLINGS:
        raise RemovedSpellingError(f"ingot.te has no {name} (TVM's old te schedules): {_TVM_SPELLINGS[name]}")
    raise AttributeError(f"module 'ingot.te' has no attribute {name!r}")

