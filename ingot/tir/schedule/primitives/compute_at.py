"""`compute_at` / `reverse_compute_at`: move a block under a loop of its consumer (producer).

Note: `compute_at(P, L)` moves the producer ``P`` into the body of loop ``L`` (right before the
first statement that holds a consumer) and regenerates ``P``'s loops so that, at each iteration
of ``L`` and the loops above it, ``P`` produces exactly the region its consumers under ``L``
read: each consumer's read region (in its iteration variables) is rewritten with its bindings
and relaxed over the loops *inside* ``L`` (`ingot.arith.relax_region`), and the union is taken.
``P``'s write indices must be distinct iteration variables, so the region gives each of them a
range ``[lo, lo + extent)``; iteration variables that do not index the output (reduce variables)
keep their whole domain. A range that may leave the variable's domain (a non-divisible split
above the consumer) gets a ``T.where`` guard, so the new loops never write out of bounds.

`reverse_compute_at(C, L)` mirrors it for a complete consumer ``C`` moved under the loop ``L``
of its producers: ``C``'s iteration variables cover exactly what the producers under ``L`` wrote
in that iteration (``C`` must read them at plain iteration-variable indices), and ``C`` is
placed right after the last statement holding a producer.

Preconditions (TENSORIR.md §2) are checked: block kind, all consumers (producers) under ``L``,
program order (nothing between the old and the new position writes what the block reads or
reads what it writes), and ``L`` does not enclose the block already.

Example (compute_at of B under C's loop i, before/after)::

    for i, j in T.grid(16, 12):                     for i in range(16):
        with T.block("B"): B[vi, vj] = A * 2.0         for ax0 in range(12):
    for i, j in T.grid(16, 12):                  →          with T.block("B"): vi, vj = i, ax0 ...
        with T.block("C"): C[vi, vj] = B + 1.0          for j in range(12):
                                                            with T.block("C"): ...
"""
from __future__ import annotations

from typing import Any, Optional

from ingot.ir.expr import IntImm, PrimExpr, Range, Var, as_const_int
from ingot.ir.functor import substitute
from ingot.tir.stmt import Block, BlockRealize, For, ForKind, SeqStmt, Stmt

from ..analysis import (
    block_kind, child_block_realizes, enclosing_loops, is_ancestor, loop_domains, scope_block, writer_counts,
)
from ..instruction import BlockRV, InstructionKind, LoopRV
from ..state import StmtSRef, _Replacer
from .compute_inline import check_in_scope_body, nest_top
from .decompose_reduction import join_conjuncts

COMPUTE_AT = InstructionKind("compute_at", inputs=("block", "loop"), attrs=("preserve_unit_loops",))
REVERSE_COMPUTE_AT = InstructionKind("reverse_compute_at", inputs=("block", "loop"), attrs=("preserve_unit_loops",))


def _analyzer(loops: list[StmtSRef]):
    from ingot.arith import Analyzer

    ana = Analyzer()
    for s in loops:
        ana.bind(s.stmt.loop_var, Range.from_min_extent(s.stmt.min, s.stmt.extent), allow_override=True)
    return ana


def _relaxed_region(sch: Any, realize: BlockRealize, region: Any, lsref: StmtSRef) -> list[Range]:
    """``region`` (in ``realize``'s iteration variables) as loop expressions, relaxed over the loops
    strictly inside ``lsref`` that enclose ``realize``."""
    from ingot.arith import relax_region

    bsref = sch.state.sref_of(lsref.func_name, realize.block)
    loops = enclosing_loops(bsref)
    inner = loops[[id(x) for x in loops].index(id(lsref)) + 1:]
    vmap = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
    ranges = [Range.from_min_extent(substitute(r.min, vmap), substitute(r.extent, vmap)) for r in region]
    ana = _analyzer(loops[: len(loops) - len(inner)])
    return relax_region(ranges, loop_domains(inner), ana)


def _union(ana: Any, a: Optional[Range], b: Range) -> Range:
    if a is None:
        return b
    from ingot.arith import IntSet

    s = IntSet.from_range(a).union(IntSet.from_range(b), ana)
    return Range.from_min_extent(s.min_value, ana.simplify(s.max_value - s.min_value + 1))


def _point_var(rng: Range, block: Block) -> Optional[Var]:
    if as_const_int(rng.extent) == 1 and isinstance(rng.min, Var) and any(rng.min is iv.var for iv in block.iter_vars):
        return rng.min
    return None


def _regenerate(sch: Any, block: Block, ranges: dict, lsref: StmtSRef, preserve_unit_loops: bool,
                primitive: str) -> Stmt:
    """New loops (``ax0, ax1, ...``) and realize for ``block`` covering ``ranges`` (iter var id →
    Range of loop expressions) inside loop ``lsref``; other iteration variables get their domain."""
    outer = enclosing_loops(lsref) + [lsref]
    ana = _analyzer(outer)
    loops: list[tuple[Var, PrimExpr]] = []
    values: list[PrimExpr] = []
    guards: list[PrimExpr] = []
    for iv in block.iter_vars:
        rng = ranges.get(id(iv.var), iv.dom)
        lo, extent = ana.simplify(rng.min), ana.simplify(rng.extent)
        bounded_extent = extent
        if as_const_int(extent) is None:
            bound = ana.const_int_bound(extent).max_value
            if bound >= 2**31:
                sch._raise(f"{primitive}: the region of {iv.var.name!r} in block {block.name_hint!r} has the "
                           f"unbounded extent {extent}", "compute at a loop whose region is bounded",
                           lsref.func_name, [block])
            bounded_extent = IntImm(iv.var.dtype, bound)
        if as_const_int(bounded_extent) == 1 and not preserve_unit_loops:
            value = lo
        else:
            ax = Var(f"ax{len(loops)}", iv.var.dtype)
            loops.append((ax, bounded_extent))
            ana.bind(ax, Range.from_min_extent(IntImm(ax.dtype, 0), bounded_extent))
            value = ana.simplify(lo + ax)
            if bounded_extent is not extent:
                guards.append(ax < extent)
        # Step: guard values that may leave the iteration variable's domain.
        d_lo, d_hi = iv.dom.min, iv.dom.min + iv.dom.extent
        if not ana.can_prove(value >= d_lo):
            guards.append(value >= d_lo)
        if not ana.can_prove(value < d_hi):
            guards.append(value < d_hi)
        values.append(value)
    stmt: Stmt = BlockRealize(values, join_conjuncts(guards), block)
    for ax, extent in reversed(loops):
        stmt = For(ax, 0, extent, ForKind.SERIAL, stmt)
    return stmt


def _check_movable(sch: Any, sref: StmtSRef, lsref: StmtSRef, primitive: str, complete_only: bool) -> None:
    blk = sref.stmt
    check_in_scope_body(sch, sref, primitive)
    kind = block_kind(blk, writer_counts(scope_block(sref)))
    if kind is None or (complete_only and kind != "complete"):
        need = "a complete block" if complete_only else "a complete or reduction block"
        sch._raise(f"{primitive}: block {blk.name_hint!r} is not {need}",
                   "only such blocks can be regenerated under another loop (after decompose_reduction a block "
                   "is neither: move it before decomposing)", sref.func_name, [blk])
    if is_ancestor(lsref, sref):
        sch._raise(f"{primitive}: loop {lsref.stmt.loop_var.name!r} already encloses block {blk.name_hint!r}",
                   "pick a loop of another block's nest", sref.func_name, [lsref.stmt, blk])
    if scope_block(sref) is not scope_block(lsref):
        sch._raise(f"{primitive}: block {blk.name_hint!r} and loop {lsref.stmt.loop_var.name!r} are in different "
                   "scopes", "the loop must be in the block's scope (the same enclosing block)", sref.func_name,
                   [lsref.stmt, blk])


def _finish(sch: Any, sref: StmtSRef, lsref: StmtSRef, nest: Stmt, position: int) -> None:
    items = list(lsref.stmt.body.seq) if isinstance(lsref.stmt.body, SeqStmt) else [lsref.stmt.body]
    items.insert(position, nest)
    new_loop = lsref.stmt.replace(body=SeqStmt(items))
    scope = scope_block(sref)
    body = _Replacer({id(nest_top(sref)): None, id(lsref.stmt): new_loop}).visit(scope.stmt.body)
    sch.state.replace(sref.func_name, scope.stmt, scope.stmt.replace(body=body))


def _loop_items(lsref: StmtSRef) -> list[Stmt]:
    body = lsref.stmt.body
    return list(body.seq) if isinstance(body, SeqStmt) else [body]


def compute_at(sch: Any, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False) -> None:
    """Move the producer ``block`` under ``loop``, computing only what the consumers there need.

    Example:
        >>> # sch.compute_at(sch.get_block("B"), i)
        >>> # trace: sch.compute_at(block=b0, loop=l2, preserve_unit_loops=False)
    """
    # Step 1. Checks on the block, the loop, and the consumers.
    sref = sch._block(block, "compute_at")
    lsref = sch._loop(loop, "compute_at")
    _check_movable(sch, sref, lsref, "compute_at", complete_only=False)
    blk: Block = sref.stmt
    scope = scope_block(sref)
    order = child_block_realizes(scope.stmt.body)
    pos = {id(r): k for k, r in enumerate(order)}
    me = pos[id(sref.realize)]
    outputs = {id(w.buffer) for w in blk.writes}
    inputs = {id(r.buffer) for r in blk.reads} - outputs
    consumers = [r for r in order if r.block is not blk and any(id(x.buffer) in outputs for x in r.block.reads)]
    if not consumers:
        sch._raise(f"compute_at: block {blk.name_hint!r} has no consumer", "nothing tells which region to compute",
                   sref.func_name, [blk])
    under = {id(r) for r in child_block_realizes(lsref.stmt)}
    outside = [r for r in consumers if id(r) not in under]
    if outside:
        sch._raise(f"compute_at: consumer(s) {[r.block.name_hint for r in outside]} of block {blk.name_hint!r} are "
                   f"not under loop {lsref.stmt.loop_var.name!r}",
                   "all consumers must be under the loop, or they would read an incomplete buffer",
                   sref.func_name, [lsref.stmt] + outside)
    if any(pos[id(r)] < me for r in consumers):
        sch._raise(f"compute_at: a consumer of block {blk.name_hint!r} runs before it",
                   "the program reads the buffer before it is produced; fix the order first", sref.func_name, [blk])
    items = _loop_items(lsref)
    position = next(k for k, item in enumerate(items)
                    if any(id(r) in {id(c) for c in consumers} for r in child_block_realizes(item)))
    first = min(pos[id(r)] for r in child_block_realizes(items[position]))
    between = [r for r in order[me + 1:first]]
    for r in between + [r for r in order if id(r) in under]:
        if r.block is not blk and any(id(w.buffer) in inputs for w in r.block.writes):
            sch._raise(f"compute_at: block {r.block.name_hint!r} writes a buffer that block {blk.name_hint!r} reads, "
                       "between the old and the new position (or under the loop)",
                       "moving the block would make it read different values", sref.func_name, [blk, r])

    # Step 2. The region the consumers under the loop read, per iteration variable of the block.
    ana = _analyzer(enclosing_loops(lsref) + [lsref])
    need: dict[int, Range] = {}
    for w in blk.writes:
        dims = [_point_var(r, blk) for r in w.region]
        if any(d is None for d in dims) or len({id(d) for d in dims}) != len(dims):
            sch._raise(f"compute_at: block {blk.name_hint!r} writes {w.buffer.name} at indices that are not distinct "
                       "iteration variables", "compute_at needs a block whose output indices are its iteration "
                       "variables", sref.func_name, [blk])
        for r in consumers:
            for region in r.block.reads:
                if region.buffer is w.buffer:
                    relaxed = _relaxed_region(sch, r, region.region, lsref)
                    for var, rng in zip(dims, relaxed):
                        need[id(var)] = _union(ana, need.get(id(var)), rng)

    # Step 3. Regenerate the block's loops there; remove the old nest.
    nest = _regenerate(sch, blk, need, lsref, preserve_unit_loops, "compute_at")
    _finish(sch, sref, lsref, nest, position)
    sch._record(COMPUTE_AT, [block, loop], [bool(preserve_unit_loops)], [])


def reverse_compute_at(sch: Any, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False) -> None:
    """Move the consumer ``block`` under ``loop`` of its producers, consuming what they just produced.

    Example:
        >>> # sch.reverse_compute_at(sch.get_block("C"), i)
        >>> # trace: sch.reverse_compute_at(block=b1, loop=l2, preserve_unit_loops=False)
    """
    # Step 1. Checks on the block, the loop, and the producers.
    sref = sch._block(block, "reverse_compute_at")
    lsref = sch._loop(loop, "reverse_compute_at")
    _check_movable(sch, sref, lsref, "reverse_compute_at", complete_only=True)
    blk: Block = sref.stmt
    scope = scope_block(sref)
    order = child_block_realizes(scope.stmt.body)
    pos = {id(r): k for k, r in enumerate(order)}
    me = pos[id(sref.realize)]
    reads = {id(r.buffer) for r in blk.reads}
    outputs = {id(w.buffer) for w in blk.writes}
    producers = [r for r in order if r.block is not blk and any(id(w.buffer) in reads for w in r.block.writes)]
    if not producers:
        sch._raise(f"reverse_compute_at: block {blk.name_hint!r} has no producer",
                   "nothing tells which region to compute", sref.func_name, [blk])
    under = {id(r) for r in child_block_realizes(lsref.stmt)}
    outside = [r for r in producers if id(r) not in under]
    if outside:
        sch._raise(f"reverse_compute_at: producer(s) {[r.block.name_hint for r in outside]} of block "
                   f"{blk.name_hint!r} are not under loop {lsref.stmt.loop_var.name!r}",
                   "all producers must be under the loop", sref.func_name, [lsref.stmt] + outside)
    if any(pos[id(r)] > me for r in producers):
        sch._raise(f"reverse_compute_at: a producer of block {blk.name_hint!r} runs after it",
                   "fix the order first", sref.func_name, [blk])
    for r in order:
        if r.block is not blk and id(r) in under and any(id(x.buffer) in outputs for x in r.block.reads):
            sch._raise(f"reverse_compute_at: block {r.block.name_hint!r} under the loop reads what block "
                       f"{blk.name_hint!r} writes", "it would see a partial result", sref.func_name, [blk, r])
    items = _loop_items(lsref)
    position = max(k for k, item in enumerate(items)
                   if any(id(r) in {id(p) for p in producers} for r in child_block_realizes(item))) + 1
    last_moved = max(pos[id(r)] for r in child_block_realizes(lsref.stmt))
    for r in order[last_moved + 1: me]:
        if any(id(w.buffer) in reads | outputs for w in r.block.writes) or \
                any(id(x.buffer) in outputs for x in r.block.reads):
            sch._raise(f"reverse_compute_at: block {r.block.name_hint!r} between the loop and block "
                       f"{blk.name_hint!r} touches its buffers", "moving the block would change what it reads",
                       sref.func_name, [blk, r])

    # Step 2. The region the producers wrote in one iteration, per iteration variable of the block.
    ana = _analyzer(enclosing_loops(lsref) + [lsref])
    produced: dict[int, list[Range]] = {}
    for p in producers:
        for w in p.block.writes:
            if id(w.buffer) in reads:
                relaxed = _relaxed_region(sch, p, w.region, lsref)
                old = produced.get(id(w.buffer))
                produced[id(w.buffer)] = relaxed if old is None else [_union(ana, a, b) for a, b in zip(old, relaxed)]
    need: dict[int, Range] = {}
    for region in blk.reads:
        if id(region.buffer) not in produced:
            continue
        for dim, (r, got) in enumerate(zip(region.region, produced[id(region.buffer)])):
            var = _point_var(r, blk)
            if var is None:
                full = ana.can_prove(got.min <= 0) and ana.can_prove(got.min + got.extent >= region.buffer.shape[dim])
                if not full:
                    sch._raise(f"reverse_compute_at: block {blk.name_hint!r} reads {region.buffer.name} at "
                               f"{r.min} (dim {dim}), not at a plain iteration variable",
                               "the consumed region must follow the produced one index by index", sref.func_name,
                               [blk])
                continue
            if id(var) in need and not (ana.can_prove_equal(need[id(var)].min, got.min)
                                        and ana.can_prove_equal(need[id(var)].extent, got.extent)):
                sch._raise(f"reverse_compute_at: iteration variable {var.name!r} of block {blk.name_hint!r} is "
                           "constrained differently by two produced buffers", "not supported", sref.func_name, [blk])
            need[id(var)] = got

    # Step 3. Regenerate the block's loops there; remove the old nest.
    nest = _regenerate(sch, blk, need, lsref, preserve_unit_loops, "reverse_compute_at")
    _finish(sch, sref, lsref, nest, position)
    sch._record(REVERSE_COMPUTE_AT, [block, loop], [bool(preserve_unit_loops)], [])
