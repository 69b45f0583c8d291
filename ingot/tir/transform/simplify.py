"""Simplify: canonicalize every expression with loop variables bound to their ranges.

Note: schedules leave index chains such as ``(i0 * 16 + i1) // 16 * 16 + (i0 * 16 + i1) % 16``;
knowing ``0 <= i1 < 16`` the analyzer (`ingot.arith`) turns them back into ``i0 * 16 + i1``, so
indices reach code generation as clean affine forms. Besides expressions the pass

* drops an ``if`` whose condition is provably true (keeps the then-branch) or false (keeps the else),
* replaces a loop of extent 1 by its body with the loop variable set to the loop's minimum
  (thread-bound loops are kept: they name a hardware axis),
* removes a loop whose extent is provably <= 0.

In a function with run-time (symbolic) buffer dims, widening integer casts are first pushed to the
leaves of each expression (`widen.widen_casts`): the int64 batch mixes with the int32 tile loops,
and ``(int64)(x // 3) * 3 + (int64)(x % 3)`` only simplifies to ``(int64)x`` with the casts on the
variables (issue #17). Functions with constant shapes have no such mix and are left as they were.

Example:
    before:  for i0, i1 in T.grid(4, 16): B[(i0 * 16 + i1) // 16, (i0 * 16 + i1) % 16] = 0.0
    after:   for i0, i1 in T.grid(4, 16): B[i0, i1] = 0.0
"""
from __future__ import annotations

from typing import Any

from ingot.ir import expr as E
from ingot.ir.expr import IntImm, PrimExpr, Range, Select, Var, as_const_int
from ingot.ir.functor import Mutator, substitute

from ..function import PrimFunc
from ..stmt import For, ForKind, IfThenElse, LetStmt, Stmt
from ._arith import Analyzer
from .base import current_config, no_op, prim_func_pass
from .widen import widen_casts

__all__ = ["Simplify", "simplify_stmt"]


class _Simplifier(Mutator):
    def __init__(self, analyzer: Analyzer, widen: bool = False) -> None:
        self.analyzer = analyzer
        self.widen = widen
        # loop variable -> its loop's end (min + extent), for the loops with a run-time extent
        self.loop_end: dict = {}

    def _simplify(self, e: PrimExpr) -> PrimExpr:
        return self.analyzer.simplify(widen_casts(e) if self.widen else e)

    # Expressions: simplify each maximal integer/bool expression once (the analyzer recurses into
    # it); float expressions are walked so the indices of their loads are simplified.
    def generic_visit(self, node: Any) -> Any:
        if isinstance(node, PrimExpr) and (node.dtype.is_integer or node.dtype.is_bool):
            return self._simplify(node)
        return super().generic_visit(node)

    def visit_Var(self, node: Any) -> Any:
        return node

    def visit_Select(self, node: Any) -> Any:
        # A float Select whose condition folds (an unrolled copy of a table lookup, e.g. the
        # Winograd transforms) becomes its chosen branch: exact, and the rest is never visited.
        if node.dtype.is_integer or node.dtype.is_bool:
            return self._simplify(node)
        cond = self.visit(node.condition)
        if _const_bool(cond) is not None:
            return self.visit(node.true_value if _const_bool(cond) else node.false_value)
        return Select(cond, self.visit(node.true_value), self.visit(node.false_value))

    def visit_For(self, node: For) -> Stmt:
        lo = self._simplify(node.min)
        extent = self._simplify(node.extent)
        if node.kind != ForKind.THREAD_BINDING:
            if as_const_int(extent) == 1:
                return self.visit(substitute(node.body, {node.loop_var: lo}))
            if self.analyzer.can_prove(extent <= 0):
                return no_op()
        self.analyzer.bind(node.loop_var, Range.from_min_extent(lo, extent))
        if self.widen and as_const_int(extent) is None:
            self.loop_end[node.loop_var] = self._simplify(lo + extent)
        body = self.visit(node.body)
        self.loop_end.pop(node.loop_var, None)
        return node.replace(min=lo, extent=extent, body=body)

    def _below_loop_end(self, cond: PrimExpr) -> bool:
        """Whether ``cond`` is ``v < e`` (or a conjunction of such) with ``v`` a loop variable whose
        run-time loop end is provably <= ``e``: the guard ``n < batch`` a schedule's
        ``reverse_compute_at`` puts on the epilogue of a run-time batch loop over ``n``, which the
        analyzer does not prove (it bounds variables by constants)."""
        if isinstance(cond, E.And):
            return self._below_loop_end(cond.a) and self._below_loop_end(cond.b)
        if isinstance(cond, E.LT) and isinstance(cond.a, Var) and cond.a in self.loop_end:
            return self.analyzer.can_prove(self.loop_end[cond.a] <= cond.b)
        return False

    def visit_IfThenElse(self, node: IfThenElse) -> Stmt:
        cond = self._simplify(node.condition)
        if _const_bool(cond) is True or self.analyzer.can_prove(cond) or (self.loop_end and self._below_loop_end(cond)):
            return self.visit(node.then_case)
        if _const_bool(cond) is False or self.analyzer.can_prove(~cond):
            return self.visit(node.else_case) if node.else_case is not None else no_op()
        then_case = self.visit(node.then_case)
        else_case = self.visit(node.else_case) if node.else_case is not None else None
        return node.replace(condition=cond, then_case=then_case, else_case=else_case)

    def visit_LetStmt(self, node: LetStmt) -> Stmt:
        return node.replace(value=self._simplify(node.value), body=self.visit(node.body))


def _const_bool(e: PrimExpr) -> "bool | None":
    if isinstance(e, IntImm):
        return bool(e.value)
    return None


def simplify_stmt(stmt: Stmt, analyzer: "Analyzer | None" = None, widen: bool = False) -> Stmt:
    """``stmt`` with every expression simplified under the enclosing loops' ranges; ``widen`` first
    pushes widening integer casts to the leaves (`widen.widen_casts`, see the module note).

    Example:
        >>> from ingot.ir import Var, decl_buffer
        >>> from ingot.tir import For, ForKind, BufferStore
        >>> B = decl_buffer((16,), "float32", "B"); i = Var("i")
        >>> s = simplify_stmt(For(i, 0, 16, ForKind.SERIAL, BufferStore(B, 0.0, [i * 2 - i])))
        >>> str(s.body.indices[0])
        'i'
    """
    return _Simplifier(analyzer or Analyzer(), widen).visit(stmt)


def _has_runtime_dims(func: PrimFunc) -> bool:
    """Whether a parameter buffer of ``func`` has a symbolic (run-time) dim."""
    return any(not isinstance(d, (int, IntImm)) for buf in func.buffer_params for d in buf.shape)


def Simplify():  # noqa: N802
    """The pass simplifying every PrimFunc (see module docstring).

    Example:
        >>> Simplify().info.name
        'Simplify'
    """

    def transform(func: PrimFunc, mod, ctx) -> PrimFunc:
        analyzer = Analyzer()
        # Shape variables are non-negative: a symbolic extent is a size.
        widen = bool(current_config("tir.widen_index_casts", True)) and _has_runtime_dims(func)
        return func.with_body(simplify_stmt(func.body, analyzer, widen))

    return prim_func_pass(transform, opt_level=0, name="Simplify")
