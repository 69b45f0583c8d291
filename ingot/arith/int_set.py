"""Symbolic integer intervals (TVM's ``IntSet``) and buffer-region relaxation.

Note: an `IntSet` is the closed interval ``[min_value, max_value]`` whose ends are expressions
(or unbounded). Evaluation is interval arithmetic over the expression tree: a variable in the
domain map becomes its interval, any other variable stays a single point, and every end is
simplified by the analyzer, so ``i*4 + j`` with ``j ∈ [0, 4)`` relaxes to ``[i*4, i*4 + 3]``. This
is what ``compute_at``, ``cache_read`` and region inference use to find the footprint of a loop.

Example:
    >>> from ingot.ir import Var, Range
    >>> i, j = Var("i"), Var("j")
    >>> [str(r.min) + ", " + str(r.extent) for r in relax_region([Range.from_min_extent(i * 4 + j, 1)],
    ...                                                          {j: Range(0, 4)})]
    ['i * 4, 4']
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ingot.ir import expr as E
from ingot.ir.expr import IntImm, PrimExpr, Range, Var, convert

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer

# Stand-ins for the unbounded ends, as TVM's ``pos_inf()`` / ``neg_inf()``.
pos_inf = Var("pos_inf", "int64")
neg_inf = Var("neg_inf", "int64")


class IntSet:
    """A closed interval of integers with symbolic ends; ``None`` internally marks an unbounded end.

    Example:
        >>> s = IntSet.interval(0, 7).union(IntSet.single_point(12))
        >>> str(s.min_value), str(s.max_value), s.to_range().extent.value
        ('0', '12', 13)
    """

    __slots__ = ("_min", "_max")

    def __init__(self, min_value: "PrimExpr | None", max_value: "PrimExpr | None"):
        object.__setattr__(self, "_min", min_value)
        object.__setattr__(self, "_max", max_value)

    def __setattr__(self, name, value):
        raise AttributeError("IntSet is immutable")

    # -- constructors --------------------------------------------------------------------------------
    @staticmethod
    def interval(min_value: Any, max_value: Any) -> "IntSet":
        """``[min_value, max_value]`` (both inclusive)."""
        return IntSet(convert(min_value), convert(max_value))

    @staticmethod
    def single_point(value: Any) -> "IntSet":
        """``{value}``."""
        value = convert(value)
        return IntSet(value, value)

    @staticmethod
    def everything() -> "IntSet":
        """All integers."""
        return IntSet(None, None)

    @staticmethod
    def from_range(rng: Range) -> "IntSet":
        """The set of ``[rng.min, rng.min + rng.extent)``."""
        return IntSet(rng.min, _simplify(rng.min + rng.extent - 1))

    # -- accessors -----------------------------------------------------------------------------------
    @property
    def min_value(self) -> PrimExpr:
        """Inclusive lower end (`neg_inf` when unbounded)."""
        return neg_inf if self._min is None else self._min

    @property
    def max_value(self) -> PrimExpr:
        """Inclusive upper end (`pos_inf` when unbounded)."""
        return pos_inf if self._max is None else self._max

    def has_lower_bound(self) -> bool:
        return self._min is not None

    def has_upper_bound(self) -> bool:
        return self._max is not None

    def is_everything(self) -> bool:
        return self._min is None and self._max is None

    def is_single_point(self) -> bool:
        """Whether both ends are the same expression."""
        from .canonical import expr_key

        return self._min is not None and self._max is not None and (
            self._min is self._max or expr_key(self._min) == expr_key(self._max))

    def union(self, other: "IntSet", analyzer: "Analyzer | None" = None) -> "IntSet":
        """The smallest interval containing both (ends that cannot be ordered become min/max)."""
        ana = analyzer or _default_analyzer()
        return IntSet(_combine(self._min, other._min, E.Min, ana, keep_none=True),
                      _combine(self._max, other._max, E.Max, ana, keep_none=True))

    def intersect(self, other: "IntSet", analyzer: "Analyzer | None" = None) -> "IntSet":
        """The intersection (ends that cannot be ordered become max/min)."""
        ana = analyzer or _default_analyzer()
        return IntSet(_combine(self._min, other._min, E.Max, ana, keep_none=False),
                      _combine(self._max, other._max, E.Min, ana, keep_none=False))

    def to_range(self) -> Range:
        """``Range(min, extent)``; raises for an unbounded set.

        Example:
            >>> IntSet.interval(2, 5).to_range().extent.value
            4
        """
        if self._min is None or self._max is None:
            raise ValueError(f"cannot turn the unbounded set {self} into a Range; bound the variables "
                             "it depends on (pass their ranges in dom_map or bind them in the analyzer)")
        return Range.from_min_extent(self._min, _simplify(self._max - self._min + 1))

    def __repr__(self) -> str:
        return f"IntSet[{self.min_value}, {self.max_value}]"


_DEFAULT: "list[Analyzer]" = []


def _default_analyzer() -> "Analyzer":
    from .analyzer import Analyzer

    if not _DEFAULT:
        _DEFAULT.append(Analyzer())
    return _DEFAULT[0]


def _simplify(expr: PrimExpr, analyzer: "Analyzer | None" = None) -> PrimExpr:
    return (analyzer or _default_analyzer()).simplify(expr)


def _combine(a, b, op: type, ana: "Analyzer", keep_none: bool):
    """min/max of two ends; None is the unbounded end (absorbing for union, neutral for intersect)."""
    if a is None or b is None:
        if keep_none:
            return None
        return b if a is None else a
    return ana.simplify(op(a, b))


# -- evaluation ----------------------------------------------------------------------------------------
class _IntSetEvaluator:
    """Interval arithmetic over an expression; one method per node class (dict dispatch)."""

    def __init__(self, dom_map: Mapping[Var, IntSet], analyzer: "Analyzer"):
        self.dom_map = dom_map
        self.ana = analyzer
        self._dispatch: dict[type, Callable[[Any], IntSet]] = {
            E.Var: self._var, E.SizeVar: self._var, E.IntImm: self._point, E.Add: self._add,
            E.Sub: self._sub, E.Mul: self._mul, E.FloorDiv: self._floordiv, E.FloorMod: self._floormod,
            E.Min: self._minmax, E.Max: self._minmax, E.Select: self._select, E.Call: self._call,
        }

    def eval(self, expr: PrimExpr) -> IntSet:
        # A sub-expression free of relaxed variables is one point: keep it whole (no loss).
        if not self._depends(expr):
            return IntSet.single_point(expr)
        fn = self._dispatch.get(type(expr))
        return fn(expr) if fn is not None else IntSet.everything()

    def _depends(self, expr: PrimExpr) -> bool:
        from ingot.ir.functor import collect_vars

        return any(v in self.dom_map for v in collect_vars(expr))

    def _point(self, expr: PrimExpr) -> IntSet:
        return IntSet.single_point(expr)

    def _var(self, expr: Var) -> IntSet:
        return self.dom_map.get(expr) or IntSet.single_point(expr)

    def _simp(self, expr: "PrimExpr | None") -> "PrimExpr | None":
        return None if expr is None else self.ana.simplify(expr)

    def _add(self, expr: E.Add) -> IntSet:
        a, b = self.eval(expr.a), self.eval(expr.b)
        return IntSet(_opt(a._min, b._min, E.Add, self.ana), _opt(a._max, b._max, E.Add, self.ana))

    def _sub(self, expr: E.Sub) -> IntSet:
        a, b = self.eval(expr.a), self.eval(expr.b)
        return IntSet(_opt(a._min, b._max, E.Sub, self.ana), _opt(a._max, b._min, E.Sub, self.ana))

    def _mul(self, expr: E.Mul) -> IntSet:
        a, b = self.eval(expr.a), self.eval(expr.b)
        if not b.is_single_point() and a.is_single_point():
            a, b = b, a
        if b.is_single_point():
            sign = self._sign(b._min)
            if sign > 0:
                return IntSet(_opt(a._min, b._min, E.Mul, self.ana), _opt(a._max, b._min, E.Mul, self.ana))
            if sign < 0:
                return IntSet(_opt(a._max, b._min, E.Mul, self.ana), _opt(a._min, b._min, E.Mul, self.ana))
        return self._const_corners(expr)

    def _sign(self, expr: PrimExpr) -> int:
        bound = self.ana.const_int_bound(expr)
        return 1 if bound.min_value >= 0 else (-1 if bound.max_value <= 0 else 0)

    def _const_corners(self, expr: PrimExpr) -> IntSet:
        """Fallback: constant bounds of the expression with every relaxed variable at its extremes."""
        from .analyzer import Analyzer
        from .const_int_bound import NEG_INF, POS_INF

        ana = Analyzer()
        for var, rng in self.ana._var_ranges.items():
            ana.bind(var, rng)
        for var, dom in self.dom_map.items():
            lo = self.ana.const_int_bound(dom.min_value).min_value if dom._min is not None else NEG_INF
            hi = self.ana.const_int_bound(dom.max_value).max_value if dom._max is not None else POS_INF
            if NEG_INF < lo and hi < POS_INF:
                ana.bind(var, Range.from_min_extent(IntImm(var.dtype, lo), IntImm(var.dtype, hi - lo + 1)),
                         allow_override=True)
        bound = ana.const_int_bound(expr)
        lo = None if bound.min_value <= NEG_INF else IntImm(expr.dtype, bound.min_value)
        hi = None if bound.max_value >= POS_INF else IntImm(expr.dtype, bound.max_value)
        return IntSet(lo, hi)

    def _floordiv(self, expr: E.FloorDiv) -> IntSet:
        a, b = self.eval(expr.a), self.eval(expr.b)
        if b.is_single_point() and self.ana.const_int_bound(b._min).min_value > 0:
            return IntSet(self._simp(None if a._min is None else E.FloorDiv(a._min, b._min)),
                          self._simp(None if a._max is None else E.FloorDiv(a._max, b._min)))
        return self._const_corners(expr)

    def _floormod(self, expr: E.FloorMod) -> IntSet:
        a, b = self.eval(expr.a), self.eval(expr.b)
        if b.is_single_point() and self.ana.const_int_bound(b._min).min_value > 0 and \
                a._min is not None and a._max is not None:
            # Both ends in the same period: the modulo is monotone over the interval.
            if self.ana.can_prove_equal(E.FloorDiv(a._min, b._min), E.FloorDiv(a._max, b._min)):
                return IntSet(self._simp(E.FloorMod(a._min, b._min)), self._simp(E.FloorMod(a._max, b._min)))
            return IntSet(IntImm(expr.dtype, 0), self._simp(b._min - 1))
        return self._const_corners(expr)

    def _minmax(self, expr: "E.Min | E.Max") -> IntSet:
        a, b = self.eval(expr.a), self.eval(expr.b)
        op = type(expr)
        return IntSet(_opt(a._min, b._min, op, self.ana), _opt(a._max, b._max, op, self.ana))

    def _select(self, expr: E.Select) -> IntSet:
        return self.eval(expr.true_value).union(self.eval(expr.false_value), self.ana)

    def _call(self, expr: E.Call) -> IntSet:
        if expr.op == "if_then_else" and len(expr.args) == 3:
            return self.eval(expr.args[1]).union(self.eval(expr.args[2]), self.ana)
        return self._const_corners(expr)


def _opt(a, b, op: type, ana: "Analyzer"):
    if a is None or b is None:
        return None
    return ana.simplify(op(a, b))


def _as_int_set(value: Any, analyzer: "Analyzer") -> IntSet:
    if isinstance(value, IntSet):
        return value
    if isinstance(value, Range):
        return IntSet(analyzer.simplify(value.min), analyzer.simplify(value.min + value.extent - 1))
    raise TypeError(f"a domain must be a Range or an IntSet, got {value!r}")


def eval_int_set(expr: PrimExpr, dom_map: Mapping[Var, Any], analyzer: "Analyzer") -> IntSet:
    """The `IntSet` of ``expr`` when each variable of ``dom_map`` ranges over its Range/IntSet.

    Example:
        >>> from ingot.arith import Analyzer
        >>> from ingot.ir import Var, Range
        >>> i = Var("i")
        >>> str(eval_int_set(i // 4, {i: Range(0, 16)}, Analyzer()).max_value)
        '3'
    """
    doms = {var: _as_int_set(dom, analyzer) for var, dom in dom_map.items()}
    return _IntSetEvaluator(doms, analyzer).eval(analyzer.simplify(expr))


def relax_region(region: Sequence[Range], dom_map: Mapping[Var, Any],
                 analyzer: "Analyzer | None" = None) -> list[Range]:
    """The box covered by ``region`` while the variables of ``dom_map`` range over their domains.

    Example:
        >>> from ingot.ir import Var, Range
        >>> io, ii = Var("io"), Var("ii")
        >>> r = relax_region([Range.from_min_extent(io * 16 + ii, 1)], {ii: Range(0, 16)})
        >>> str(r[0].min), str(r[0].extent)
        ('io * 16', '16')
    """
    ana = analyzer or _default_analyzer()
    out = []
    for rng in region:
        lo = eval_int_set(rng.min, dom_map, ana)
        hi = eval_int_set(ana.simplify(rng.min + rng.extent - 1), dom_map, ana)
        if lo._min is None or hi._max is None:
            raise ValueError(
                f"region dimension [{rng.min}, {rng.min} + {rng.extent}) is unbounded over the "
                f"variables {[v.name for v in dom_map]}; give every variable it depends on a finite range"
            )
        out.append(Range.from_min_extent(lo._min, ana.simplify(hi._max - lo._min + 1)))
    return out


def union_region(regions: Sequence[Sequence[Range]], analyzer: "Analyzer | None" = None) -> list[Range]:
    """The smallest box containing every region of ``regions`` (all of the same rank).

    Example:
        >>> from ingot.ir import Range
        >>> r = union_region([[Range(0, 4)], [Range(8, 12)]])
        >>> r[0].min.value, r[0].extent.value
        (0, 12)
    """
    ana = analyzer or _default_analyzer()
    regions = [list(r) for r in regions]
    if not regions:
        raise ValueError("union_region needs at least one region")
    rank = len(regions[0])
    if any(len(r) != rank for r in regions):
        raise ValueError(f"union_region: regions differ in rank: {[len(r) for r in regions]}")
    out = []
    for dim in range(rank):
        acc = IntSet.from_range(regions[0][dim])
        for region in regions[1:]:
            acc = acc.union(IntSet.from_range(region[dim]), ana)
        out.append(Range.from_min_extent(acc._min, ana.simplify(acc._max - acc._min + 1)))
    return out


__all__ = ["IntSet", "relax_region", "union_region", "eval_int_set", "pos_inf", "neg_inf"]
