"""`prim_func_pass` and small helpers shared by the lowering passes.

Note: a TensorIR pass is a function ``fn(func, mod, ctx) -> func`` applied to every `PrimFunc` of
the module (other functions, such as graph functions, pass through untouched); `prim_func_pass`
wraps it into an `ingot.transform.Pass`.

Example:
    >>> from ingot.ir import IRModule
    >>> @prim_func_pass(opt_level=0)
    ... def tag(func, mod, ctx):
    ...     return func.with_attr("tagged", True)
    >>> tag.info.name
    'tag'
"""
from __future__ import annotations

from typing import Any, Callable

from ingot.ir.expr import IntImm, PrimExpr
from ingot.ir.transform import PassContext, function_pass

from ..function import PrimFunc
from ..stmt import Evaluate, Stmt

__all__ = ["prim_func_pass", "is_no_op", "no_op"]


def prim_func_pass(fn: "Callable | type | None" = None, opt_level: int = 0, name: "str | None" = None,
                   required: Any = None) -> Any:
    """Build a pass applying ``fn(func, mod, ctx) -> func`` to every `PrimFunc` (TVM's spelling).

    Example:
        >>> from ingot.ir import IRModule, decl_buffer
        >>> from ingot.tir import PrimFunc, Evaluate
        >>> p = prim_func_pass(lambda f, m, c: f.with_attr("x", 1), name="SetX")
        >>> mod = IRModule({"main": PrimFunc([decl_buffer((4,))], Evaluate(0))})
        >>> p(mod)["main"].attrs["x"]
        1
    """
    return function_pass(fn, opt_level=opt_level, func_type=PrimFunc, name=name, required=required)


def no_op() -> Stmt:
    """The statement that does nothing (``Evaluate(0)``)."""
    return Evaluate(IntImm("int32", 0))


def is_no_op(stmt: "Stmt | None") -> bool:
    """Whether ``stmt`` does nothing (None or ``Evaluate`` of a constant).

    Example:
        >>> is_no_op(no_op())
        True
    """
    if stmt is None:
        return True
    return isinstance(stmt, Evaluate) and isinstance(stmt.value, PrimExpr) and isinstance(stmt.value, IntImm)


def current_config(key: str, default: Any = None) -> Any:
    """The value of a registered config key in the current `PassContext`."""
    return PassContext.current().get_config(key, default)
