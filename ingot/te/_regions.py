"""Read/write regions of a block, in terms of its iteration variables (te's own fallback).

Note: the shared analysis is ``ingot.tir.analysis.infer_block_access_regions``; `create_prim_func`
uses it when it exists and this module otherwise. The rules follow TVM's block access detector as
far as TE-generated blocks need them: every access is a point in the block's own variables; several
accesses of one buffer are joined per dimension (an exact ``[base + lo, base + hi]`` box when the
indices differ by constants, else a ``min``/``max`` hull); a reduction block (one with ``init``)
does not list its outputs among its reads.

Example:
    >>> from ingot.ir import Var, decl_buffer
    >>> from ingot.tir import Block, BufferStore
    >>> A, B = decl_buffer((8,), "float32", "A"), decl_buffer((8,), "float32", "B")
    >>> i = Var("i")
    >>> reads, writes = block_access_regions(Block([], [], [], "b", BufferStore(B, A[i] + A[i + 1], [i])))
    >>> str(reads[0]), str(writes[0])
    ('A[i:i + 2]', 'B[i]')
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.ir.buffer import Buffer, BufferRegion
from ingot.ir.expr import Add, IntImm, Mul, PrimExpr, Range, Sub, Var, _arith, Max, Min
from ingot.ir.functor import Visitor
from ingot.ir.structural import structural_equal

__all__ = ["block_access_regions"]


class _Accesses(Visitor):
    """Indices of every load and store, per buffer, in order of first access."""

    def __init__(self):
        self.reads: dict[int, tuple[Buffer, list[tuple[PrimExpr, ...]]]] = {}
        self.writes: dict[int, tuple[Buffer, list[tuple[PrimExpr, ...]]]] = {}

    @staticmethod
    def _add(table: dict, buffer: Buffer, indices: tuple[PrimExpr, ...]) -> None:
        table.setdefault(id(buffer), (buffer, []))[1].append(indices)

    def visit_BufferLoad(self, node) -> None:
        self._add(self.reads, node.buffer, node.indices)
        self.visit(node.indices)

    def visit_BufferStore(self, node) -> None:
        self.visit(node.value)
        self.visit(node.indices)
        self._add(self.writes, node.buffer, node.indices)


def block_access_regions(block) -> tuple[list[BufferRegion], list[BufferRegion]]:
    """``(reads, writes)`` of ``block`` computed from its init and body.

    Example: see the module docstring.
    """
    acc = _Accesses()
    if block.init is not None:
        acc.visit(block.init)
    acc.visit(block.body)
    excluded = set(acc.writes) if block.init is not None else set()
    reads = [_region(buf, idx) for key, (buf, idx) in acc.reads.items() if key not in excluded]
    writes = [_region(buf, idx) for buf, idx in acc.writes.values()]
    return reads, writes


def _region(buffer: Buffer, accesses: Sequence[tuple[PrimExpr, ...]]) -> BufferRegion:
    ranges = []
    for dim in range(buffer.ndim):
        distinct: list[PrimExpr] = []
        for indices in accesses:
            if not any(structural_equal(indices[dim], d) for d in distinct):
                distinct.append(indices[dim])
        ranges.append(_join(distinct))
    return BufferRegion(buffer, ranges)


def _join(indices: list[PrimExpr]) -> Range:
    """The smallest box (as a Range) holding all ``indices``."""
    first = indices[0]
    one = IntImm(first.dtype, 1)
    if len(indices) == 1:
        return Range.from_min_extent(first, one)
    # Step 1. Indices that differ from the first by constants: an exact interval.
    offsets = [_const_difference(i, first) for i in indices]
    if all(o is not None for o in offsets):
        lo, hi = min(offsets), max(offsets)
        base = indices[offsets.index(lo)]
        return Range.from_min_extent(base, IntImm(first.dtype, hi - lo + 1))
    # Step 2. Otherwise the min/max hull.
    lo_e, hi_e = indices[0], indices[0]
    for i in indices[1:]:
        lo_e, hi_e = _arith(Min, lo_e, i), _arith(Max, hi_e, i)
    return Range.from_min_extent(lo_e, hi_e - lo_e + 1)


def _const_difference(a: PrimExpr, b: PrimExpr) -> "int | None":
    """``a - b`` when it is a constant (both affine in the same variables), else None."""
    la, lb = _linear(a), _linear(b)
    if la is None or lb is None:
        return None
    (ta, ca), (tb, cb) = la, lb
    if {k: v for k, v in ta.items() if v[1]} != {k: v for k, v in tb.items() if v[1]}:
        return None
    return ca - cb


def _linear(e: Any) -> "tuple[dict[int, tuple[Var, int]], int] | None":
    """``e`` as (terms {id(var): (var, coeff)}, constant), or None when not affine."""
    if isinstance(e, IntImm):
        return {}, e.value
    if isinstance(e, Var):
        return {id(e): (e, 1)}, 0
    if isinstance(e, (Add, Sub)):
        la, lb = _linear(e.a), _linear(e.b)
        if la is None or lb is None:
            return None
        sign = 1 if isinstance(e, Add) else -1
        terms = dict(la[0])
        for key, (var, coeff) in lb[0].items():
            old = terms.get(key, (var, 0))[1]
            terms[key] = (var, old + sign * coeff)
        return terms, la[1] + sign * lb[1]
    if isinstance(e, Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, IntImm):
                lx = _linear(x)
                if lx is None:
                    return None
                return {k: (v, c * y.value) for k, (v, c) in lx[0].items()}, lx[1] * y.value
    return None
