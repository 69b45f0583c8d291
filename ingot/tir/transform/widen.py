"""Widening integer casts pushed to the leaves of index expressions (issue #17).

Note: a kernel compiled for a run-time batch has an int64 batch variable (the graph's symbolic dims
are int64) beside the int32 tile loops, and flattening writes indices such as
``(int64)(x // 3) * 3 + (int64)(x % 3)`` or ``(int64)(i + 8) + batch_offset``. Terms hidden under a
cast are atoms for the simplifier (it cannot see that the first is ``(int64)x``) and the vectorizer
sees no constant stride of a loop variable under a cast, so every vector loop of such a kernel
stayed a scalar ``omp simd`` loop and its stores scattered. With the casts pushed down to the
variables, both see the affine form they see in the static twin.

Pushing a widening cast through ``+ - * // % min max`` is exact: signed overflow of the narrow
arithmetic is undefined in the generated C, so wherever the narrow expression is defined its widened
twin has the same value.

Example:
    >>> from ingot.ir import Var
    >>> i = Var("i", "int32")
    >>> str(widen_index(E.Cast("int64", i * 7 + 1)))
    'T.Cast("int64", i) * T.int64(7) + T.int64(1)'
"""
from __future__ import annotations

from ingot.ir import expr as E
from ingot.ir.expr import PrimExpr
from ingot.ir.functor import Mutator

__all__ = ["widen_index", "widen_casts"]

# Integer operations a widening cast distributes over exactly.
_WIDEN_THROUGH = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max)


def _widening(e: E.Cast) -> bool:
    src, dst = e.value.dtype, e.dtype
    return dst.is_int and src.is_int and dst.lanes == 1 and src.lanes == 1 and dst.bits >= src.bits


def widen_index(e: PrimExpr) -> PrimExpr:
    """``e`` with its top widening signed-integer casts (``int32`` to ``int64``) pushed through
    ``+ - * // % min max`` down to the leaves (see the module note); other expressions unchanged.

    Example:
        >>> from ingot.ir import Var
        >>> i, j = Var("i", "int32"), Var("j", "int32")
        >>> str(widen_index(E.Cast("int64", (i * 8 + j) // 3)))
        '(T.Cast("int64", i) * T.int64(8) + T.Cast("int64", j)) // T.int64(3)'
    """
    if isinstance(e, E.Cast):
        if not _widening(e):
            return e
        inner, dst = e.value, e.dtype
        if inner.dtype.bits == dst.bits:
            return widen_index(inner)
        if isinstance(inner, _WIDEN_THROUGH):
            return type(inner)(widen_index(E.Cast(dst, inner.a)), widen_index(E.Cast(dst, inner.b)))
        if isinstance(inner, E.IntImm):
            return E.IntImm(dst, inner.value)
        if isinstance(inner, E.Cast) and _widening(inner):  # (int64)(int32)(int16)x: one cast
            return widen_index(E.Cast(dst, inner.value))
        return e
    if isinstance(e, _WIDEN_THROUGH) and e.dtype.is_int:
        a, b = widen_index(e.a), widen_index(e.b)
        return e if a is e.a and b is e.b else type(e)(a, b)
    return e


class _CastWidener(Mutator):
    def visit_Cast(self, node: E.Cast) -> PrimExpr:
        value = self.visit(node.value)
        return widen_index(node if value is node.value else E.Cast(node.dtype, value))


def widen_casts(expr: PrimExpr) -> PrimExpr:
    """``expr`` with `widen_index` applied at every cast in it (inside conditions and loads too).

    Example:
        >>> from ingot.ir import Var
        >>> i, n = Var("i", "int32"), Var("n", "int64")
        >>> str(widen_casts(E.Cast("int64", i + 1) < n))
        'T.Cast("int64", i) + T.int64(1) < n'
    """
    return _CastWidener().visit(expr)
