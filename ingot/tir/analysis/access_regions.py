"""Block read/write regions inferred from the accesses in a block's body.

Note: a block's read and write regions are boxes of its buffers written in terms of the block's
own iteration variables. They are computed by walking the block's ``init`` and ``body``:

* every `BufferLoad` contributes to the reads, every `BufferStore` to the writes;
* loop variables of loops *inside* the block are relaxed over their ranges (an access
  ``A[vi, k]`` under ``for k in range(16)`` covers ``A[vi, 0:16]``);
* iteration variables of nested blocks are replaced by their bindings, then relaxed the same way;
* buffers allocated by the block itself or by nested blocks are local and not reported;
  accesses through a nested block's ``match_buffer`` are reported on the source region.

Per dimension, the region is the hull [min, max] of all accessed indices. Indices are compared in
a small linear form (sum of ``coefficient * variable`` plus a constant): when two indices differ
only by a constant the hull is exact; otherwise (non-linear or incomparable indices) the whole
dimension ``0:shape`` is used, which is always a safe over-approximation. An index that uses no
relaxed variable is kept exactly as written, so ``A[vi, vk]`` gives the region ``A[vi, vk]``.

Example:
    >>> from ingot.ir import Var, IterVar, Range, decl_buffer
    >>> from ingot.tir import Block, BufferStore
    >>> A = decl_buffer((8,), "float32", "A"); B = decl_buffer((8,), "float32", "B")
    >>> vi = Var("vi")
    >>> blk = Block([IterVar(Range(0, 8), vi, "S")], [], [], "B", BufferStore(B, A[vi] * 2.0, [vi]))
    >>> reads, writes = infer_block_access_regions(blk)
    >>> str(reads[0]), str(writes[0])
    ('A[vi]', 'B[vi]')
"""
from __future__ import annotations

from typing import Optional

from ingot.arith.canonical import expr_key
from ingot.ir.buffer import Buffer, BufferRegion
from ingot.ir.expr import (
    Add, BufferLoad, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Range, Sub, Var,
)
from ingot.ir.functor import Visitor, collect_vars, substitute

from ..stmt import Allocate, Block, BlockRealize, BufferStore, For, LetStmt

# A linear form: ({id(var): (var, coeff)}, const)
_Linear = tuple[dict, int]


def _linear(expr: PrimExpr, opaque: bool = False) -> Optional[_Linear]:
    """``expr`` as a linear form over its variables, or None when it is not linear. With ``opaque``
    (for indices that use no relaxed variable, so every sub-expression is one fixed value), a
    non-linear integer sub-expression such as ``t // 2 % 2`` is an atom, keyed by its structure:
    ``(t // 2 % 2) * 4 + a`` for the constants a = 0..5 then has the exact hull of extent 6."""
    if isinstance(expr, IntImm):
        return {}, expr.value
    if isinstance(expr, Var):
        return {id(expr): (expr, 1)}, 0
    if isinstance(expr, (Add, Sub)):
        a, b = _linear(expr.a, opaque), _linear(expr.b, opaque)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(expr, Add) else -1
        terms = dict(a[0])
        for key, (var, coeff) in b[0].items():
            old = terms.get(key, (var, 0))[1]
            terms[key] = (var, old + sign * coeff)
        return {k: v for k, v in terms.items() if v[1] != 0}, a[1] + sign * b[1]
    if isinstance(expr, Mul):
        a, b = _linear(expr.a, opaque), _linear(expr.b, opaque)
        if a is None or b is None:
            return None
        if not a[0]:
            a, b = b, a
        if b[0]:
            return None  # product of two variable terms
        c = b[1]
        return {k: (v, coeff * c) for k, (v, coeff) in a[0].items() if coeff * c != 0}, a[1] * c
    if opaque and expr.dtype.is_integer and expr.dtype.is_scalar:
        return {("atom", expr_key(expr)): (expr, 1)}, 0
    return None


def _from_linear(form: _Linear, dtype) -> PrimExpr:
    """Rebuild an expression from a linear form (terms in their recorded order)."""
    result: Optional[PrimExpr] = None
    for var, coeff in form[0].values():
        term = var if coeff == 1 else var * IntImm(var.dtype, coeff)
        result = term if result is None else result + term
    if result is None:
        return IntImm(dtype, form[1])
    if form[1] > 0:
        return result + IntImm(result.dtype, form[1])
    if form[1] < 0:
        return result - IntImm(result.dtype, -form[1])
    return result


def _relax(expr: PrimExpr, dom: dict) -> Optional[tuple[_Linear, _Linear]]:
    """Bounds (lower, upper) as linear forms of ``expr`` with the variables in ``dom`` relaxed.

    ``dom`` maps id(var) -> (lower linear form, upper linear form) of that variable.
    """
    if isinstance(expr, (FloorDiv, FloorMod)) and isinstance(expr.b, IntImm) and expr.b.value > 0:
        inner = _relax(expr.a, dom)
        if inner is None:
            return None
        lo, hi = inner
        c = expr.b.value
        if lo[0] or hi[0]:
            return None
        if isinstance(expr, FloorDiv):
            return ({}, lo[1] // c), ({}, hi[1] // c)
        if hi[1] // c == lo[1] // c:
            return ({}, lo[1] % c), ({}, hi[1] % c)
        return ({}, 0), ({}, c - 1)
    form = _linear(expr)
    if form is None:
        return None
    lo: _Linear = ({}, form[1])
    hi: _Linear = ({}, form[1])
    for key, (var, coeff) in form[0].items():
        if key in dom:
            if dom[key] is None:
                return None  # a loop whose bounds are not linear
            vlo, vhi = dom[key]
            lo = _add_scaled(lo, vlo if coeff > 0 else vhi, coeff)
            hi = _add_scaled(hi, vhi if coeff > 0 else vlo, coeff)
        else:
            lo = _add_scaled(lo, ({key: (var, 1)}, 0), coeff)
            hi = _add_scaled(hi, ({key: (var, 1)}, 0), coeff)
    return lo, hi


def _add_scaled(acc: _Linear, form: _Linear, scale: int) -> _Linear:
    terms = dict(acc[0])
    for key, (var, coeff) in form[0].items():
        old = terms.get(key, (var, 0))[1]
        terms[key] = (var, old + coeff * scale)
    return {k: v for k, v in terms.items() if v[1] != 0}, acc[1] + form[1] * scale


def _const_diff(a: _Linear, b: _Linear) -> Optional[int]:
    """``a - b`` when it is a constant, else None."""
    diff = _add_scaled(a, b, -1)
    return None if diff[0] else diff[1]


class _DimHull:
    """Hull of the indices accessed along one buffer dimension."""

    def __init__(self) -> None:
        self.exact: Optional[PrimExpr] = None  # a single index used as written
        self.lo: Optional[_Linear] = None
        self.hi: Optional[_Linear] = None
        self.full = False
        self.dtype = None

    def add_exact(self, index: PrimExpr) -> None:
        from ingot.ir.structural import structural_equal

        if self.lo is None and (self.exact is None or structural_equal(self.exact, index)):
            self.exact = index
            self.dtype = index.dtype
            return
        form = _linear(index, opaque=True)
        if form is None:
            self.full = True
            return
        self.add_bounds(form, form, index.dtype)

    def add_bounds(self, lo: _Linear, hi: _Linear, dtype) -> None:
        if self.exact is not None:
            form = _linear(self.exact, opaque=True)
            self.exact = None
            if form is None:
                self.full = True
                return
            self.lo, self.hi = form, form
        self.dtype = self.dtype or dtype
        if self.lo is None:
            self.lo, self.hi = lo, hi
            return
        d_lo, d_hi = _const_diff(lo, self.lo), _const_diff(hi, self.hi)
        if d_lo is None or d_hi is None:
            self.full = True
            return
        if d_lo < 0:
            self.lo = lo
        if d_hi > 0:
            self.hi = hi

    def range(self, extent_of_dim: PrimExpr) -> Range:
        if self.full or (self.exact is None and self.lo is None):
            return Range.from_min_extent(IntImm(extent_of_dim.dtype, 0), extent_of_dim)
        if self.exact is not None:
            return Range.from_min_extent(self.exact, IntImm(self.exact.dtype, 1))
        width = _const_diff(self.hi, self.lo)
        if width is None:
            return Range.from_min_extent(IntImm(extent_of_dim.dtype, 0), extent_of_dim)
        start = _from_linear(self.lo, self.dtype)
        return Range.from_min_extent(start, IntImm(start.dtype, width + 1))


class _AccessCollector(Visitor):
    def __init__(self, block: Block):
        self.dom: dict = {}
        self.bindings: dict = {}
        self.local: set = {id(b) for b in block.alloc_buffers}
        self.matched: dict = {id(m.buffer): m.source for m in block.match_buffers}
        self.order: list[Buffer] = []
        self.reads: dict = {}
        self.writes: dict = {}

    # -- recording -------------------------------------------------------------------------------
    def _record(self, table: dict, buffer: Buffer, indices) -> None:
        if id(buffer) in self.local:
            return
        if id(buffer) in self.matched:
            source = self.matched[id(buffer)]
            self._record_range(table, source.buffer, source.region)
            return
        hulls = self._hulls(table, buffer)
        for hull, index in zip(hulls, indices):
            index = substitute(index, self.bindings) if self.bindings else index
            if not any(id(v) in self.dom for v in collect_vars(index)):
                hull.add_exact(index)
                continue
            bounds = _relax(index, self.dom)
            if bounds is None:
                hull.full = True
            else:
                hull.add_bounds(bounds[0], bounds[1], index.dtype)

    def _record_range(self, table: dict, buffer: Buffer, region) -> None:
        hulls = self._hulls(table, buffer)
        for hull, r in zip(hulls, region):
            lo, ext = _linear(r.min), _linear(r.extent)
            if lo is None or ext is None or ext[0]:
                hull.full = True
            else:
                hull.add_bounds(lo, (lo[0], lo[1] + ext[1] - 1), r.min.dtype)

    def _hulls(self, table: dict, buffer: Buffer) -> list:
        if id(buffer) not in table:
            table[id(buffer)] = (buffer, [_DimHull() for _ in buffer.shape])
            if all(b is not buffer for b in self.order):
                self.order.append(buffer)
        return table[id(buffer)][1]

    # -- traversal -------------------------------------------------------------------------------
    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self._record(self.reads, node.buffer, node.indices)
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self._record(self.writes, node.buffer, node.indices)
        self.visit(node.value)
        self.visit(node.indices)

    def visit_For(self, node: For) -> None:
        lo = _relax(node.min, self.dom)
        hi = _relax(node.min + node.extent - 1, self.dom)
        if lo is not None and hi is not None:
            self.dom[id(node.loop_var)] = (lo[0], hi[1])
        else:
            self.dom[id(node.loop_var)] = None
        self.visit(node.body)

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.visit(node.value)
        self.bindings[node.var] = node.value
        self.visit(node.body)

    def visit_Allocate(self, node: Allocate) -> None:
        self.local.add(id(node.buffer))
        self.visit(node.body)

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        self.visit(node.iter_values)
        self.visit(node.predicate)
        inner = node.block
        for iv, value in zip(inner.iter_vars, node.iter_values):
            self.bindings[iv.var] = substitute(value, self.bindings) if self.bindings else value
        for buf in inner.alloc_buffers:
            self.local.add(id(buf))
        for m in inner.match_buffers:
            self.matched[id(m.buffer)] = m.source
        if inner.init is not None:
            self.visit(inner.init)
        self.visit(inner.body)

    def result(self, table: dict) -> list[BufferRegion]:
        regions = []
        for buffer in self.order:
            if id(buffer) not in table:
                continue
            _, hulls = table[id(buffer)]
            regions.append(BufferRegion(buffer, [h.range(d) for h, d in zip(hulls, buffer.shape)]))
        return regions


def infer_block_access_regions(block: Block) -> tuple[list[BufferRegion], list[BufferRegion]]:
    """The (reads, writes) regions of ``block``, in terms of its own iteration variables.

    Buffers are listed in order of first access. A loop inside the block whose bounds are not
    linear makes the dimensions its variable touches cover the whole buffer.

    Example:
        >>> from ingot.ir import Var, IterVar, Range, decl_buffer
        >>> from ingot.tir import Block, BufferStore, For, ForKind
        >>> A = decl_buffer((4, 16), "float32", "A"); B = decl_buffer((4,), "float32", "B")
        >>> vi, k = Var("vi"), Var("k")
        >>> body = For(k, 0, 16, ForKind.SERIAL, BufferStore(B, B[vi] + A[vi, k], [vi]))
        >>> blk = Block([IterVar(Range(0, 4), vi, "S")], [], [], "B", body)
        >>> [str(r) for r in infer_block_access_regions(blk)[0]]
        ['B[vi]', 'A[vi, 0:16]']
    """
    collector = _AccessCollector(block)
    if block.init is not None:
        collector.visit(block.init)
    collector.visit(block.body)
    return collector.result(collector.reads), collector.result(collector.writes)


__all__ = ["infer_block_access_regions"]
