"""CompactBufferAllocation: allocate each intermediate buffer where it is used, only as large as used.

Note: after `ConvertBlocksToLoops` every intermediate buffer (``cache_write(..., "local")``,
``cache_read``, a ``compute_at`` producer) is an `Allocate` around the whole function body at
full size. That is wrong for performance: a register tile must be a small local array inside the
outer tile loops. The pass works per `Allocate`:

* Step 1 (sink). Walk down from the allocation towards the accesses: into the one child of a
  sequence that uses the buffer, into the used branch of an ``if``, and into a loop **only when
  different iterations of the loop touch disjoint elements** of the buffer (proved with interval
  bounds: the lowest element touched by iteration ``m + 1`` is above the highest touched by
  iteration ``m``, in some dimension). That condition is what makes a per-iteration allocation
  correct: no value flows from one iteration to the next through the buffer. A reduction
  accumulator, which every step of its reduce loop reads and writes at the same place, therefore
  stays outside the reduce loop.
* Step 2 (region). At the chosen point, bound every access's indices with the loops between the
  point and the access relaxed over their ranges; the union per dimension is ``[lo, hi]``
  (``lo`` may use the outer loop variables).
* Step 3 (shrink). A dimension whose extent ``hi - lo + 1`` is a constant (or, for a constant
  dimension, has a constant upper bound) smaller than the buffer's becomes that size, and its
  accesses are shifted by ``-lo``; other dimensions keep their size (a symbolic dimension is
  never replaced by a bound derived from the value range of its type). The result is a fresh buffer of the same dtype and scope.

Parameter buffers are never allocated, so they are untouched. ``tir.disable_compact_buffer``
turns the pass off.

Example:
    before:  C_local = alloc((64, 64))                       # around everything
             for i0, j0: for k: for i1, j1: C_local[i0*4+i1, j0*8+j1] += ...
                         for i1, j1: C[i0*4+i1, j0*8+j1] = C_local[i0*4+i1, j0*8+j1]
    after:   for i0, j0:
                 C_local = alloc((4, 8))
                 for k: for i1, j1: C_local[i1, j1] += ...
                 for i1, j1: C[i0*4+i1, j0*8+j1] = C_local[i1, j1]
"""
from __future__ import annotations

from typing import Any

from ingot.ir.buffer import Buffer
from ingot.ir.expr import BufferLoad, Max, Min, PrimExpr, Range, Var, as_const_int
from ingot.ir.functor import Mutator, Visitor, collect_vars, substitute
from ingot.ir.structural import structural_equal

from ..function import PrimFunc
from ..stmt import Allocate, AssertStmt, BufferStore, For, ForKind, IfThenElse, LetStmt, SeqStmt, Stmt
from ._arith import Analyzer, const_upper_bound, expr_key, fork
from .base import current_config, prim_func_pass

__all__ = ["CompactBufferAllocation", "compact_buffer_allocation"]


class _AccessCollector(Visitor):
    """Every access to ``buffer`` under a statement, with the loops and lets between them."""

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer
        self.loops: list[tuple[Var, Range]] = []
        self.inner_vars: set = set()
        self.accesses: list[tuple[tuple[PrimExpr, ...], dict]] = []

    def visit_For(self, node: For) -> None:
        self.visit(node.min)
        self.visit(node.extent)
        self.inner_vars.add(node.loop_var)
        self.loops.append((node.loop_var, Range.from_min_extent(node.min, node.extent)))
        self.visit(node.body)
        self.loops.pop()

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.inner_vars.add(node.var)
        self.generic_visit(node)

    def _record(self, node: Any) -> None:
        if node.buffer is self.buffer:
            self.accesses.append((node.indices, dict(self.loops)))

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self._record(node)
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self._record(node)
        self.generic_visit(node)


def _uses(stmt: "Stmt | None", buffer: Buffer) -> bool:
    if stmt is None:
        return False
    collector = _AccessCollector(buffer)
    collector.visit(stmt)
    return bool(collector.accesses)


def _union(analyzer: Analyzer, values: list[PrimExpr], lower: bool) -> PrimExpr:
    result = values[0]
    for v in values[1:]:
        if structural_equal(result, v):
            continue
        if analyzer.can_prove(result <= v):
            result = result if lower else v
        elif analyzer.can_prove(v <= result):
            result = v if lower else result
        else:
            result = analyzer.simplify(Min(result, v) if lower else Max(result, v))
    return result


def _region(analyzer: Analyzer, buffer: Buffer, stmt: Stmt) -> "list[tuple[PrimExpr, PrimExpr]] | None":
    """Per dimension ``(lo, hi)`` (inclusive) of the elements ``stmt`` touches; None if unknown."""
    collector = _AccessCollector(buffer)
    collector.visit(stmt)
    if not collector.accesses:
        return None
    per_dim: list[tuple[list, list]] = [([], []) for _ in range(buffer.ndim)]
    # Identical (index, loop ranges) pairs recur — a reduction loads and stores one element, an
    # unrolled micro-kernel repeats its indices (two thirds of ResNet-50's accesses): bound each once.
    memo: dict = {}
    for indices, relax in collector.accesses:
        for d, index in enumerate(indices):
            key = _access_key(index, relax)
            bounds = memo[key] if key in memo else memo.setdefault(key, analyzer.bounds(index, relax))
            if bounds is None:
                return None
            lo, hi = bounds
            if any(v in collector.inner_vars for v in collect_vars(lo) + collect_vars(hi)):
                return None
            per_dim[d][0].append(lo)
            per_dim[d][1].append(hi)
    return [(_union(analyzer, los, True), _union(analyzer, his, False)) for los, his in per_dim]


def _access_key(index: PrimExpr, relax: dict) -> tuple:
    """A key equal for two accesses exactly when `Analyzer.bounds` sees the same question: the
    index (`expr_key`: structure over the same variable and buffer objects) and the relaxed loops
    (variable, min, extent)."""
    loops = tuple((id(v), _value_key(r.min), _value_key(r.extent)) for v, r in relax.items())
    return _index_key(index), loops


# id -> (index, its expr_key). `_region` runs once per loop level a buffer sinks through and once
# where it is placed, over the same access objects each time: their keys (a structural hash and a
# walk of the leaves) are computed once. Entries hold their index, so ids stay unique.
_INDEX_KEYS: "dict[int, tuple[PrimExpr, Any]]" = {}
_INDEX_KEYS_LIMIT = 100_000


def _index_key(index: PrimExpr) -> Any:
    hit = _INDEX_KEYS.get(id(index))
    if hit is not None and hit[0] is index:
        return hit[1]
    key = expr_key(index)[0]
    if len(_INDEX_KEYS) > _INDEX_KEYS_LIMIT:
        _INDEX_KEYS.clear()
    _INDEX_KEYS[id(index)] = (index, key)
    return key


def _value_key(e: PrimExpr) -> Any:
    c = as_const_int(e)
    return ("const", c) if c is not None else ("expr", expr_key(e)[0])


def _iterations_disjoint(analyzer: Analyzer, buffer: Buffer, loop: For) -> bool:
    """Whether different iterations of ``loop`` touch disjoint elements of ``buffer``."""
    if as_const_int(loop.extent) == 1:
        return True
    hypo = fork(analyzer)
    # Iterations m and m + 1 both exist: m in [min, min + extent - 1).
    hypo.bind(loop.loop_var, Range.from_min_extent(loop.min, loop.extent - 1))
    region = _region(hypo, buffer, loop.body)
    if region is None:
        return False
    m = loop.loop_var
    for lo, hi in region:
        if m not in collect_vars(lo):
            continue
        next_lo = substitute(lo, {m: m + 1})
        next_hi = substitute(hi, {m: m + 1})
        if hypo.can_prove(next_lo > hi) or hypo.can_prove(next_hi < lo):
            return True
    return False


class _StoreCollector(_AccessCollector):
    """The stores to ``buffer`` only."""

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.generic_visit(node)


def _dense_box_store(analyzer: Analyzer, buffer: Buffer, stmt: Stmt) -> bool:
    """Whether ``stmt`` is a loop nest whose one statement stores ``buffer`` at ``loop var + offset``
    in every dimension (each loop in one dimension, 0-based): it writes every element of the box it
    touches, and reads nothing of ``buffer``. A `compute_at` producer has this shape."""
    loops = []
    while isinstance(stmt, For):
        if as_const_int(stmt.min) != 0:
            return False
        loops.append(stmt.loop_var)
        stmt = stmt.body
    if not isinstance(stmt, BufferStore) or stmt.buffer is not buffer or _uses(stmt.value, buffer):
        return False
    used = []
    for index in stmt.indices:
        in_nest = [v for v in collect_vars(index) if any(v is lv for lv in loops)]
        if len(in_nest) > 1:
            return False
        if in_nest:
            offset = analyzer.simplify(index - in_nest[0])
            if any(any(v is lv for lv in loops) for v in collect_vars(offset)):
                return False
            used.append(in_nest[0])
    return len(used) == len(loops) and all(any(u is lv for u in used) for lv in loops)


def _written_before_read(analyzer: Analyzer, buffer: Buffer, loop: For) -> bool:
    """Whether each iteration of ``loop`` first writes a whole box of ``buffer`` and then only
    reads inside that box: then no value flows between iterations, even when the boxes of
    neighbouring iterations overlap (a `compute_at` producer whose consumer's windows overlap:
    a convolution's halo, a Winograd tile). The check looks through the loops nested directly in
    ``loop``: if every iteration of the innermost one is self-contained, so is every iteration of
    the loops around it."""
    body = loop.body
    if isinstance(body, For):
        analyzer = fork(analyzer)
        while isinstance(body, For):
            analyzer.bind(body.loop_var, Range.from_min_extent(body.min, body.extent))
            body = body.body
    while isinstance(body, Allocate):  # another buffer already sunk here (a compute_at stage's tile)
        body = body.body
    if not isinstance(body, SeqStmt):
        return False
    seq = [s for s in body.seq if _uses(s, buffer)]
    if len(seq) < 2 or not _dense_box_store(analyzer, buffer, seq[0]):
        return False
    rest = SeqStmt(seq[1:])
    stores = _StoreCollector(buffer)
    stores.visit(rest)
    if stores.accesses:
        return False
    written, read = _region(analyzer, buffer, seq[0]), _region(analyzer, buffer, rest)
    if written is None or read is None:
        return False
    return all(analyzer.can_prove(w_lo <= r_lo) and analyzer.can_prove(r_hi <= w_hi)
               for (w_lo, w_hi), (r_lo, r_hi) in zip(written, read))


class _Rewriter(Mutator):
    def __init__(self, old: Buffer, new: Buffer, offsets: list) -> None:
        self.old, self.new, self.offsets = old, new, offsets

    def _shift(self, indices: tuple) -> tuple:
        return tuple(i if off is None else i - off for i, off in zip(indices, self.offsets))

    def visit_BufferLoad(self, node: BufferLoad) -> Any:
        node = self.generic_visit(node)
        if node.buffer is not self.old:
            return node
        return BufferLoad(self.new, self._shift(node.indices))

    def visit_BufferStore(self, node: BufferStore) -> Any:
        node = self.generic_visit(node)
        if node.buffer is not self.old:
            return node
        return BufferStore(self.new, node.value, self._shift(node.indices))


class _Compactor(Mutator):
    def __init__(self) -> None:
        self.analyzer = Analyzer()

    def visit_For(self, node: For) -> Stmt:
        self.analyzer.bind(node.loop_var, Range.from_min_extent(node.min, node.extent))
        return self.generic_visit(node)

    def visit_Allocate(self, node: Allocate) -> Stmt:
        body = self.visit(node.body)  # inner allocations first
        if not _uses(body, node.buffer):
            return body
        return self._sink(node.buffer, body)

    # Step 1. Sink the allocation towards its accesses.
    def _sink(self, buffer: Buffer, stmt: Stmt) -> Stmt:
        if isinstance(stmt, SeqStmt):
            users = [k for k, s in enumerate(stmt.seq) if _uses(s, buffer)]
            if len(users) == 1:
                seq = list(stmt.seq)
                seq[users[0]] = self._sink(buffer, seq[users[0]])
                return SeqStmt(seq)
        elif isinstance(stmt, For):
            sinkable = stmt.kind != ForKind.THREAD_BINDING or buffer.scope == "local"
            self.analyzer.bind(stmt.loop_var, Range.from_min_extent(stmt.min, stmt.extent))
            if sinkable and (_iterations_disjoint(self.analyzer, buffer, stmt)
                             or _written_before_read(self.analyzer, buffer, stmt)
                             or self._private_inside(buffer, stmt.body)):
                return stmt.replace(body=self._sink(buffer, stmt.body))
        elif isinstance(stmt, (LetStmt, Allocate, AssertStmt)):
            return stmt.replace(body=self._sink(buffer, stmt.body))
        elif isinstance(stmt, IfThenElse):
            in_then, in_else = _uses(stmt.then_case, buffer), _uses(stmt.else_case, buffer)
            if in_then and not in_else:
                return stmt.replace(then_case=self._sink(buffer, stmt.then_case))
            if in_else and not in_then:
                return stmt.replace(else_case=self._sink(buffer, stmt.else_case))
        return self._place(buffer, stmt)

    def _private_inside(self, buffer: Buffer, stmt: Stmt) -> bool:
        """Whether every use of ``buffer`` in ``stmt`` lies in one inner loop each of whose
        iterations writes the buffer before reading it (`_written_before_read`): then no value
        flows between iterations of the loops around it either, and the allocation may sink through
        them (a `compute_at` producer under a loop nested below a parallel block loop). Disjoint
        iterations of the inner loop are not enough: an outer loop could carry values in them."""
        while True:
            if isinstance(stmt, SeqStmt):
                users = [s for s in stmt.seq if _uses(s, buffer)]
                if len(users) != 1:
                    return False
                stmt = users[0]
            elif isinstance(stmt, (LetStmt, Allocate, AssertStmt)):
                stmt = stmt.body
            elif isinstance(stmt, For):
                if stmt.kind == ForKind.THREAD_BINDING and buffer.scope != "local":
                    return False
                self.analyzer.bind(stmt.loop_var, Range.from_min_extent(stmt.min, stmt.extent))
                if _written_before_read(self.analyzer, buffer, stmt):
                    return True
                stmt = stmt.body
            else:
                return False

    # Steps 2 and 3. Bound the touched region at this point and allocate only that.
    def _place(self, buffer: Buffer, stmt: Stmt) -> Stmt:
        region = _region(self.analyzer, buffer, stmt)
        if region is None:
            return Allocate(buffer, stmt)
        shape, offsets = [], []
        for (lo, hi), dim in zip(region, buffer.shape):
            extent = self.analyzer.simplify(hi - lo + 1)
            full = as_const_int(dim)
            bound = as_const_int(extent)
            if bound is None and full is not None:
                # e.g. min(4, n - i0 * 4) at a boundary tile: its constant bound is the tile size.
                bound = const_upper_bound(self.analyzer, extent)
            if bound is None or bound <= 0 or (full is not None and bound >= full):
                shape.append(dim)
                offsets.append(None)
            else:
                shape.append(bound)
                offsets.append(lo)
        if all(off is None for off in offsets):
            return Allocate(buffer, stmt)
        new_buffer = Buffer(Var(buffer.name, "handle"), buffer.dtype, shape, (), 0, buffer.name, buffer.scope)
        return Allocate(new_buffer, _Rewriter(buffer, new_buffer, offsets).visit(stmt))


def compact_buffer_allocation(func: PrimFunc) -> PrimFunc:
    """``func`` with every `Allocate` sunk to where its buffer is used and shrunk to the touched region.

    Example:
        >>> from ingot.ir import decl_buffer
        >>> from ingot.tir import PrimFunc, Evaluate
        >>> f = PrimFunc([decl_buffer((4,))], Evaluate(0))
        >>> compact_buffer_allocation(f) is not None
        True
    """
    return func.with_body(_Compactor().visit(func.body))


def CompactBufferAllocation():  # noqa: N802
    """The pass compacting intermediate allocations in every PrimFunc (see module docstring).

    Example:
        >>> CompactBufferAllocation().info.name
        'CompactBufferAllocation'
    """

    def transform(func: PrimFunc, mod, ctx) -> PrimFunc:
        if current_config("tir.disable_compact_buffer", False):
            return func
        return compact_buffer_allocation(func)

    return prim_func_pass(transform, opt_level=0, name="CompactBufferAllocation")
