"""UnswitchRuntimeGuards: hoist guards on run-time sizes out of a tile's loops and unswitch the tile.

Note: a schedule that splits a loop of run-time extent (``rows = seq * batch`` planned as 128)
guards its last tile with the split predicate, which lowering turns into an ``if`` on every
statement of the innermost loops: ``if i0 * 4 + i1 < rows`` on each vector update of a GEMM's
register tile, inside the k loop. The C compiler cannot keep a conditionally stored tile in
registers, so the dynamic kernel ran 2.4-3.3x its static twin (#17). This pass follows TVM's
LoopPartition / HoistIfThenElse idea: where a guard's condition involves a run-time size (a
variable no loop or let binds: a buffer dim or scalar parameter), it is hoisted to just inside the
innermost serial/parallel loop among its variables (the tile loop), relaxed over the loops in
between (``i1 in [0, 4)`` gives ``i0 * 4 + 3 < rows``: every row of the tile is valid), and that
loop's body is duplicated: the hoisted condition runs the body with the guards dropped (the static
micro-kernel exactly), else the original guarded body (the tail tile).

Safety: the condition is a conjunction of ``<``/``<=``/``>``/``>=`` comparisons without loads or
calls; each is relaxed to its upper bound (an `eval_int_set` interval, sound for any integer
expression), so the hoisted condition implies the guard at every iteration of the inner loops, and
the guard is replaced by its then-branch only under it. Guards without a run-time size are never
touched, so kernels of constant shapes are byte-identical. ``tir.disable_unswitch`` turns it off.

Example:
    before:  for i0 in range((n + 3) // 4):
                 for k in range(64):
                     for i1 in T.unroll(4):
                         if i0 * 4 + i1 < n: C[i0 * 4 + i1] += A[i0 * 4 + i1, k]
    after:   for i0 in range((n + 3) // 4):
                 if i0 * 4 + 3 < n:
                     for k in range(64):
                         for i1 in T.unroll(4): C[i0 * 4 + i1] += A[i0 * 4 + i1, k]
                 else:
                     (the original guarded loop nest)
"""
from __future__ import annotations

from typing import Any

from ingot.arith import Analyzer
from ingot.arith.int_set import eval_int_set, neg_inf, pos_inf
from ingot.ir.expr import GE, GT, LE, LT, And, BufferLoad, Call, Cast, Var
from ingot.ir.functor import Mutator, Visitor, collect_vars, post_order_visit
from ingot.ir import Range
from ingot.ir.structural import structural_equal

from ..function import PrimFunc
from ..stmt import Allocate, For, ForKind, IfThenElse, LetStmt
from .base import current_config, prim_func_pass

__all__ = ["UnswitchRuntimeGuards", "unswitch_runtime_guards"]

DISABLE_CONFIG = "tir.disable_unswitch"  # registered with the other tir.* keys in ingot.ir.transform

# Loops a guard may be hoisted into: a tile loop. Unrolled/vectorized loops are the tile itself.
_TILE_KINDS = (ForKind.SERIAL, ForKind.PARALLEL)


class _Bound(Visitor):
    """Variables bound inside the function (loop and let variables, allocated buffers' data)."""

    def __init__(self) -> None:
        self.loop_vars: set[int] = set()
        self.other_vars: set[int] = set()

    def visit_For(self, node: For) -> None:
        self.loop_vars.add(id(node.loop_var))
        self.visit(node.body)

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.other_vars.add(id(node.var))
        self.visit(node.body)

    def visit_Allocate(self, node: Allocate) -> None:
        self.other_vars.add(id(node.buffer.data))
        self.visit(node.body)


def _has_load_or_call(expr: Any) -> bool:
    found = []

    class _Find(Visitor):
        def visit_BufferLoad(self, node: BufferLoad) -> None:
            found.append(node)

        def visit_Call(self, node: Call) -> None:
            found.append(node)

    _Find().visit(expr)
    return bool(found)


def _upper_bound(expr: Any, dom: dict, ana: Analyzer) -> "Any | None":
    """The largest value of ``expr`` over ``dom``, or None when unbounded.

    A widening integer cast (an int32 tile index compared with an int64 run-time size) is monotone:
    its bound is the cast of the operand's bound; the interval evaluator does not look through casts.
    """
    if (isinstance(expr, Cast) and expr.dtype.is_int and expr.value.dtype.is_int
            and expr.dtype.bits >= expr.value.dtype.bits):
        inner = _upper_bound(expr.value, dom, ana)
        return None if inner is None else Cast(expr.dtype, inner)
    hi = eval_int_set(expr, dom, ana).max_value
    return None if hi is pos_inf or any(v is pos_inf or v is neg_inf for v in collect_vars(hi)) else hi


def _has_parallel_loop(stmt: Any) -> bool:
    found = []
    post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, For) and n.kind in (
        ForKind.PARALLEL, ForKind.THREAD_BINDING) else None)
    return bool(found)


def _conjuncts(cond: Any) -> list:
    if isinstance(cond, And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


class _Unswitcher(Mutator):
    def __init__(self, bound: _Bound):
        self.bound = bound
        self.stack: list[For] = []  # enclosing loops, outermost first
        self.current: "For | None" = None  # the loop being unswitched (popped from the stack)

    def visit_For(self, node: For) -> Any:
        self.stack.append(node)
        try:
            body = self.visit(node.body)
        finally:
            self.stack.pop()
        if node.kind in _TILE_KINDS:
            body = self._unswitch(node, body)
        return node if body is node.body else node.replace(body=body)

    # -- the guards hoistable to ``loop`` ------------------------------------------------------------
    def _target(self, cond_vars: list[Var], inner: list[For]) -> "For | None":
        """The innermost tile-kind loop (enclosing, or ``loop`` itself) among the condition's variables."""
        ids = {id(v) for v in cond_vars}
        for loop in reversed(self.stack + [self.current] + inner):
            if id(loop.loop_var) in ids and loop.kind in _TILE_KINDS:
                return loop
        return None

    def _relax(self, loop: For, guard: IfThenElse, inner: list[For], ana: Analyzer) -> "Any | None":
        """The condition, invariant in ``inner``, under which ``guard`` holds at every inner iteration."""
        cond = guard.condition
        if _has_load_or_call(cond):
            return None
        cond_vars = collect_vars(cond)
        if any(id(v) in self.bound.other_vars for v in cond_vars):
            return None  # a let variable or buffer handle: not a run-time size we can reason about
        if not any(id(v) not in self.bound.loop_vars for v in cond_vars):
            return None  # no run-time size: a constant-shape guard stays where the schedule put it
        if self._target(cond_vars, inner) is not loop:
            return None
        inner_ids = {id(f.loop_var) for f in inner}
        dom = {f.loop_var: Range.from_min_extent(f.min, f.extent) for f in inner}
        parts = []
        for c in _conjuncts(cond):
            c_vars = collect_vars(c)
            if not any(id(v) in inner_ids for v in c_vars):
                parts.append(c)
                continue
            if isinstance(c, (GT, GE)):
                lhs, rhs, strict = c.b, c.a, isinstance(c, GT)
            elif isinstance(c, (LT, LE)):
                lhs, rhs, strict = c.a, c.b, isinstance(c, LT)
            else:
                return None
            if any(id(v) in inner_ids for v in collect_vars(rhs)):
                lhs, rhs = lhs - rhs, 0 * rhs
            hi = _upper_bound(lhs, dom, ana)
            if hi is None or any(id(v) in inner_ids for v in collect_vars(hi)):
                return None
            parts.append(hi < rhs if strict else hi <= rhs)
        out = parts[0]
        for p in parts[1:]:
            out = And(out, p)
        return out

    def _collect(self, loop: For, stmt: Any, inner: list[For], ana: Analyzer, found: list) -> None:
        if isinstance(stmt, For):
            self._collect(loop, stmt.body, inner + [stmt], ana, found)
        elif isinstance(stmt, IfThenElse):
            if inner:  # a guard right in the tile body has no loop to leave: nothing to gain
                hoisted = self._relax(loop, stmt, inner, ana)
                if hoisted is not None:
                    found.append((stmt, hoisted))
                    return
            self._collect(loop, stmt.then_case, inner, ana, found)
            if stmt.else_case is not None:
                self._collect(loop, stmt.else_case, inner, ana, found)
        elif isinstance(stmt, (LetStmt, Allocate)):
            self._collect(loop, stmt.body, inner, ana, found)
        else:
            for child in getattr(stmt, "seq", ()):
                self._collect(loop, child, inner, ana, found)

    def _unswitch(self, loop: For, body: Any) -> Any:
        if _has_parallel_loop(body):
            return body  # a parallel region is outlined once per copy: not duplicated (the tile is inside it)
        ana = Analyzer()
        for f in self.stack + [loop]:
            ana.bind(f.loop_var, Range.from_min_extent(f.min, f.extent), allow_override=True)
        found: list = []
        self.current = loop
        self._collect(loop, body, [], ana, found)
        if not found:
            return body
        conds: list = []
        for _, c in found:
            if not any(structural_equal(c, d) for d in conds):
                conds.append(c)
        hoisted = conds[0]
        for c in conds[1:]:
            hoisted = And(hoisted, c)
        guards = {id(g): g for g, _ in found}
        fast = _DropGuards(guards).visit(body)
        return IfThenElse(hoisted, fast, body)


class _DropGuards(Mutator):
    def __init__(self, guards: dict):
        self.guards = guards

    def visit_IfThenElse(self, node: IfThenElse) -> Any:
        if id(node) in self.guards:
            return self.visit(node.then_case)
        return self.generic_visit(node)


def unswitch_runtime_guards(func: PrimFunc) -> PrimFunc:
    """Hoist guards on run-time sizes out of the loops of a tile and duplicate the tile under them.

    Example:
        >>> from ingot.ir import Var, decl_buffer
        >>> from ingot.tir import PrimFunc, For, ForKind, BufferStore, IfThenElse
        >>> n = Var("n"); A = decl_buffer((n,), "float32", "A"); i0, i1 = Var("i0"), Var("i1")
        >>> store = IfThenElse(i0 * 4 + i1 < n, BufferStore(A, 0.0, [i0 * 4 + i1]))
        >>> f = PrimFunc([A], For(i0, 0, (n + 3) // 4, ForKind.SERIAL, For(i1, 0, 4, ForKind.UNROLLED, store)))
        >>> str(unswitch_runtime_guards(f).body.body.condition)
        'i0 * 4 + 3 < n'
    """
    bound = _Bound()
    bound.visit(func.body)
    body = _Unswitcher(bound).visit(func.body)
    return func if body is func.body else func.replace(body=body)


def UnswitchRuntimeGuards():  # noqa: N802 - TVM's pass-factory spelling
    """The pass: `unswitch_runtime_guards` on every PrimFunc, unless ``tir.disable_unswitch`` is set.

    Example:
        >>> UnswitchRuntimeGuards().name
        'UnswitchRuntimeGuards'
    """

    def transform(func: PrimFunc, mod, ctx) -> PrimFunc:
        if current_config(DISABLE_CONFIG, False):
            return func
        return unswitch_runtime_guards(func)

    return prim_func_pass(transform, opt_level=0, name="UnswitchRuntimeGuards")
