"""Constant integer bounds of expressions (TVM's ``ConstIntBound``).

Note: interval arithmetic over Python ints, with ``POS_INF``/``NEG_INF`` sentinels that absorb
every operation (``inf + 1`` stays ``inf``). Variables get their bounds from the analyzer
(``bind``, constraints) or, failing that, from their dtype. The analyzer also records bounds of
whole sub-expressions learnt from constraints (``i*4 + j < 10``), which are intersected in at every
node, so a block predicate bounds the fused index it talks about.

Example:
    >>> from ingot.ir import Var, Range
    >>> from ingot.arith import Analyzer
    >>> ana = Analyzer(); i = Var("i"); ana.bind(i, Range(0, 8))
    >>> b = ana.const_int_bound(i * 4 + 3)
    >>> (b.min_value, b.max_value)
    (3, 31)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ingot.ir import expr as E
from ingot.ir.dtype import DataType

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer

POS_INF = 2**63 - 1
NEG_INF = -POS_INF


class ConstIntBound:
    """The closed interval ``[min_value, max_value]`` of Python ints (sentinels for infinity).

    Example:
        >>> b = ConstIntBound(0, 15)
        >>> b.min_value, b.max_value, ConstIntBound.POS_INF > 2**62
        (0, 15, True)
    """

    __slots__ = ("min_value", "max_value")
    POS_INF = POS_INF
    NEG_INF = NEG_INF

    def __init__(self, min_value: int, max_value: int):
        object.__setattr__(self, "min_value", int(min_value))
        object.__setattr__(self, "max_value", int(max_value))

    def __setattr__(self, name, value):
        raise AttributeError("ConstIntBound is immutable")

    def __eq__(self, other):
        return isinstance(other, ConstIntBound) and (self.min_value, self.max_value) == (
            other.min_value, other.max_value)

    def __hash__(self):
        return hash((self.min_value, self.max_value))

    def __repr__(self):
        lo = "-inf" if self.min_value <= NEG_INF else self.min_value
        hi = "+inf" if self.max_value >= POS_INF else self.max_value
        return f"ConstIntBound[{lo}, {hi}]"

    def is_const(self) -> bool:
        return self.min_value == self.max_value

    def intersect(self, other: "ConstIntBound") -> "ConstIntBound":
        """The intersection (an empty result keeps ``other`` rather than inventing a value)."""
        lo, hi = max(self.min_value, other.min_value), min(self.max_value, other.max_value)
        return ConstIntBound(lo, hi) if lo <= hi else other

    def union(self, other: "ConstIntBound") -> "ConstIntBound":
        return ConstIntBound(min(self.min_value, other.min_value), max(self.max_value, other.max_value))


EVERYTHING = ConstIntBound(NEG_INF, POS_INF)


def dtype_bound(dtype: DataType) -> ConstIntBound:
    """The values representable in an integer/bool ``dtype`` (everything for other types).

    Example:
        >>> dtype_bound(DataType("int8"))
        ConstIntBound[-128, 127]
    """
    if dtype.is_bool:
        return ConstIntBound(0, 1)
    if dtype.is_int:
        if dtype.bits >= 64:
            return EVERYTHING
        return ConstIntBound(-(2 ** (dtype.bits - 1)), 2 ** (dtype.bits - 1) - 1)
    if dtype.is_uint:
        return ConstIntBound(0, POS_INF if dtype.bits >= 63 else 2**dtype.bits - 1)
    return EVERYTHING


# -- saturating arithmetic on bounds --------------------------------------------------------------
def _is_inf(v: int) -> bool:
    return v >= POS_INF or v <= NEG_INF


def _clamp(v: int) -> int:
    return POS_INF if v >= POS_INF else (NEG_INF if v <= NEG_INF else v)


def _add(a: int, b: int) -> int:
    if _is_inf(a):
        return a
    if _is_inf(b):
        return b
    return _clamp(a + b)


def _mul(a: int, b: int) -> int:
    if a == 0 or b == 0:
        return 0
    if _is_inf(a) or _is_inf(b):
        return POS_INF if (a > 0) == (b > 0) else NEG_INF
    return _clamp(a * b)


def _floordiv(a: int, b: int) -> int:
    if _is_inf(a):
        return a if b > 0 else -a
    if _is_inf(b):
        return 0 if a >= 0 or b > 0 else -1
    return a // b


def _truncdiv(a: int, b: int) -> int:
    if _is_inf(a):
        return a if b > 0 else -a
    if _is_inf(b):
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _corners(fn: Callable[[int, int], int], x: ConstIntBound, y: ConstIntBound) -> ConstIntBound:
    values = [fn(a, b) for a in (x.min_value, x.max_value) for b in (y.min_value, y.max_value)]
    return ConstIntBound(min(values), max(values))


class ConstIntBoundEvaluator:
    """Bottom-up interval evaluation; one method per node class (dict dispatch).

    Example:
        >>> from ingot.arith import Analyzer
        >>> from ingot.ir import Var
        >>> ConstIntBoundEvaluator(Analyzer()).bound(Var("x", "int8") % 4)
        ConstIntBound[0, 3]
    """

    def __init__(self, analyzer: "Analyzer"):
        self.analyzer = analyzer
        self.cache: dict[int, tuple[E.PrimExpr, ConstIntBound]] = {}
        self._dispatch: dict[type, Callable] = {
            E.IntImm: self._int, E.Var: self._var, E.SizeVar: self._var, E.Add: self._add,
            E.Sub: self._sub, E.Mul: self._mul, E.FloorDiv: self._floordiv, E.Div: self._div,
            E.FloorMod: self._floormod, E.Mod: self._mod, E.Min: self._min, E.Max: self._max,
            E.Select: self._select, E.Cast: self._cast, E.Call: self._call, E.Let: self._let,
        }

    def bound(self, expr: E.PrimExpr) -> ConstIntBound:
        """The bound of ``expr`` (memoized until the analyzer's knowledge changes)."""
        hit = self.cache.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        fn = self._dispatch.get(type(expr))
        result = fn(expr) if fn is not None else self._default(expr)
        if not isinstance(expr, E.IntImm):
            result = self.analyzer._fact_bound(expr, result)
            result = result.intersect(dtype_bound(expr.dtype)) if expr.dtype.is_scalar else result
        if len(self.cache) > 100_000:
            self.cache.clear()
        self.cache[id(expr)] = (expr, result)
        return result

    def _default(self, expr: E.PrimExpr) -> ConstIntBound:
        return dtype_bound(expr.dtype) if expr.dtype.is_scalar else EVERYTHING

    def _int(self, expr: E.IntImm) -> ConstIntBound:
        return ConstIntBound(expr.value, expr.value)

    def _var(self, expr: E.Var) -> ConstIntBound:
        self.analyzer._consulted.add(expr)
        known = self.analyzer._var_bound(expr)
        if known is not None:
            return known
        base = dtype_bound(expr.dtype)
        if isinstance(expr, E.SizeVar):
            return ConstIntBound(max(0, base.min_value), base.max_value)
        return base

    def _add(self, expr: E.Add) -> ConstIntBound:
        a, b = self.bound(expr.a), self.bound(expr.b)
        return ConstIntBound(_add(a.min_value, b.min_value), _add(a.max_value, b.max_value))

    def _sub(self, expr: E.Sub) -> ConstIntBound:
        a, b = self.bound(expr.a), self.bound(expr.b)
        return ConstIntBound(_add(a.min_value, -b.max_value), _add(a.max_value, -b.min_value))

    def _mul(self, expr: E.Mul) -> ConstIntBound:
        return _corners(_mul, self.bound(expr.a), self.bound(expr.b))

    def _floordiv(self, expr: E.FloorDiv) -> ConstIntBound:
        a, b = self.bound(expr.a), self.bound(expr.b)
        if b.min_value > 0 or b.max_value < 0:
            return _corners(_floordiv, a, b)
        return self._default(expr)

    def _div(self, expr: E.Div) -> ConstIntBound:
        if not expr.dtype.is_integer:
            return self._default(expr)
        a, b = self.bound(expr.a), self.bound(expr.b)
        if b.min_value > 0 or b.max_value < 0:
            return _corners(_truncdiv, a, b)
        return self._default(expr)

    def _floormod(self, expr: E.FloorMod) -> ConstIntBound:
        a, b = self.bound(expr.a), self.bound(expr.b)
        if b.min_value > 0:
            if a.min_value >= 0 and a.max_value < b.min_value:
                return a
            return ConstIntBound(0, _add(b.max_value, -1))
        if b.max_value < 0:
            return ConstIntBound(_add(b.min_value, 1), 0)
        return self._default(expr)

    def _mod(self, expr: E.Mod) -> ConstIntBound:
        a, b = self.bound(expr.a), self.bound(expr.b)
        if b.min_value > 0 or b.max_value < 0:
            m = max(abs(b.min_value), abs(b.max_value)) - 1
            if a.min_value >= 0:
                return ConstIntBound(0, min(m, a.max_value))
            return ConstIntBound(max(-m, a.min_value) if a.min_value > NEG_INF else -m, m)
        return self._default(expr)

    def _min(self, expr: E.Min) -> ConstIntBound:
        a, b = self.bound(expr.a), self.bound(expr.b)
        return ConstIntBound(min(a.min_value, b.min_value), min(a.max_value, b.max_value))

    def _max(self, expr: E.Max) -> ConstIntBound:
        a, b = self.bound(expr.a), self.bound(expr.b)
        return ConstIntBound(max(a.min_value, b.min_value), max(a.max_value, b.max_value))

    def _select(self, expr: E.Select) -> ConstIntBound:
        return self.bound(expr.true_value).union(self.bound(expr.false_value))

    def _cast(self, expr: E.Cast) -> ConstIntBound:
        if not (expr.dtype.is_integer or expr.dtype.is_bool) or not expr.value.dtype.is_scalar:
            return self._default(expr)
        inner = self.bound(expr.value)
        if expr.value.dtype.is_float:
            return self._default(expr)
        target = dtype_bound(expr.dtype)
        if target.min_value <= inner.min_value and inner.max_value <= target.max_value:
            return inner
        return target  # the value may wrap around: only the type's range is known

    def _call(self, expr: E.Call) -> ConstIntBound:
        if expr.op == "if_then_else" and len(expr.args) == 3:
            return self.bound(expr.args[1]).union(self.bound(expr.args[2]))
        if expr.op == "abs" and expr.dtype.is_integer:
            a = self.bound(expr.args[0])
            if a.min_value >= 0:
                return a
            hi = max(abs(a.min_value), abs(a.max_value))
            return ConstIntBound(0 if a.max_value >= 0 else min(abs(a.max_value), hi), hi)
        return self._default(expr)

    def _let(self, expr: E.Let) -> ConstIntBound:
        return self.bound(expr.body)
