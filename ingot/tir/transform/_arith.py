"""The one door through which the lowering passes use integer analysis.

Note: the passes need four things from `ingot.arith`: simplify an expression under known loop
ranges, prove a condition, and bound an expression when some variables range over loop domains
(``int_set``/``relax``). They ask for them only through `Analyzer` here, so the dependency is in
one place. While `ingot.arith` was still being written this module carried a small fallback
(a linear canonicalizer with constant bounds); it is used only when ``ingot.arith`` has no
``Analyzer`` and is marked TRANSITIONAL — delete `_Fallback` once `ingot.arith` is complete.

Example:
    >>> from ingot.ir import Var, Range
    >>> i = Var("i")
    >>> ana = Analyzer()
    >>> ana.bind(i, Range.from_min_extent(0, 16))
    >>> ana.can_prove(i < 16)
    True
"""
from __future__ import annotations

from typing import Any, Mapping

from ingot.ir.expr import (
    Add, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Range, Sub, Var, as_const_int, const,
)
from ingot.ir.functor import collect_vars, substitute


def _real_arith() -> Any:
    try:
        from ingot import arith
    except ImportError:  # pragma: no cover - only while ingot.arith is missing
        return None
    return arith if hasattr(arith, "Analyzer") else None


class Analyzer:
    """Simplify/prove/bound integer expressions with loop variables bound to their ranges.

    Example:
        >>> from ingot.ir import Var, Range
        >>> i, j = Var("i"), Var("j")
        >>> ana = Analyzer()
        >>> ana.bind(j, Range.from_min_extent(0, 4))
        >>> lo, hi = ana.bounds(i * 4 + j, {j: Range.from_min_extent(0, 4)})
        >>> str(ana.simplify(hi - lo + 1))
        '4'
    """

    def __init__(self) -> None:
        arith = _real_arith()
        self._impl = arith.Analyzer() if arith is not None else _Fallback()
        self._arith = arith
        self.ranges: dict[Var, Range] = {}

    def bind(self, var: Var, rng: Range) -> None:
        """Declare ``var`` to range over ``rng`` (a loop variable), replacing an earlier binding."""
        self.ranges[var] = rng
        try:
            self._impl.bind(var, rng, allow_override=True)
        except TypeError:
            self._impl.bind(var, rng)

    def simplify(self, expr: PrimExpr) -> PrimExpr:
        """``expr`` in canonical form under the bound ranges."""
        return self._impl.simplify(expr)

    def can_prove(self, cond: PrimExpr) -> bool:
        """Whether ``cond`` holds for every value of the bound variables."""
        return bool(self._impl.can_prove(cond))

    def bounds(self, expr: PrimExpr, relax: Mapping[Var, Range]) -> "tuple[PrimExpr, PrimExpr] | None":
        """Inclusive ``(lo, hi)`` of ``expr`` when the variables of ``relax`` range over their domains.

        The bounds may use the other (outer) variables; None when they cannot be computed.
        """
        relax = {v: r for v, r in relax.items()}
        used = set(collect_vars(expr))
        if not any(v in used for v in relax):
            e = self.simplify(expr)
            return e, e
        if self._arith is not None:
            result = self._real_bounds(expr, relax)
        else:
            result = self._impl.bounds(expr, relax)
        if result is None:
            return None
        lo, hi = (self.simplify(x) for x in result)
        if any(v in relax for v in collect_vars(lo) + collect_vars(hi)):
            return None
        return lo, hi

    def _real_bounds(self, expr: PrimExpr, relax: Mapping[Var, Range]) -> "tuple[PrimExpr, PrimExpr] | None":
        arith = self._arith
        int_set_fn = getattr(self._impl, "int_set", None) or getattr(arith, "int_set", None)
        if int_set_fn is None:
            return None
        s = int_set_fn(expr, dict(relax))
        lo = getattr(s, "min_value", None)
        hi = getattr(s, "max_value", None)
        if not isinstance(lo, PrimExpr) or not isinstance(hi, PrimExpr):
            return None
        # Infinite bounds are reported as special values/flags by interval sets; refuse them.
        for flag in ("is_everything", "has_upper_bound", "has_lower_bound"):
            fn = getattr(s, flag, None)
            if callable(fn):
                value = fn()
                if (flag == "is_everything" and value) or (flag != "is_everything" and not value):
                    return None
        return lo, hi


# ------------------------------------------------------------------------------------------------
# TRANSITIONAL fallback (used only while ingot.arith has no Analyzer)
# ------------------------------------------------------------------------------------------------


def _key(expr: PrimExpr) -> Any:
    from ingot.ir.structural import structural_hash

    return expr if isinstance(expr, Var) else structural_hash(expr)


class _Linear:
    """``const + sum(coeff * atom)`` with atoms kept in first-appearance order."""

    def __init__(self, dtype, terms=None, const_value=0):
        self.dtype = dtype
        self.terms: dict[Any, list] = terms if terms is not None else {}
        self.const = const_value

    @staticmethod
    def of(expr: PrimExpr, simplify_atom) -> "_Linear":
        if isinstance(expr, IntImm):
            return _Linear(expr.dtype, {}, expr.value)
        if isinstance(expr, (Add, Sub)):
            a, b = _Linear.of(expr.a, simplify_atom), _Linear.of(expr.b, simplify_atom)
            return a.plus(b, 1 if isinstance(expr, Add) else -1)
        if isinstance(expr, Mul):
            a, b = _Linear.of(expr.a, simplify_atom), _Linear.of(expr.b, simplify_atom)
            if not b.terms:
                return a.scale(b.const)
            if not a.terms:
                return b.scale(a.const)
        atom = simplify_atom(expr)
        if isinstance(atom, IntImm):
            return _Linear(atom.dtype, {}, atom.value)
        return _Linear(expr.dtype, {_key(atom): [1, atom]}, 0)

    def plus(self, other: "_Linear", sign: int) -> "_Linear":
        terms = {k: list(v) for k, v in self.terms.items()}
        for k, (c, atom) in other.terms.items():
            if k in terms:
                terms[k][0] += sign * c
            else:
                terms[k] = [sign * c, atom]
        return _Linear(self.dtype, {k: v for k, v in terms.items() if v[0] != 0}, self.const + sign * other.const)

    def scale(self, c: int) -> "_Linear":
        if c == 0:
            return _Linear(self.dtype, {}, 0)
        return _Linear(self.dtype, {k: [v[0] * c, v[1]] for k, v in self.terms.items()}, self.const * c)

    def to_expr(self) -> PrimExpr:
        result = None
        for c, atom in self.terms.values():
            term = atom if c in (1, -1) else atom * const(abs(c), self.dtype)
            if result is None:
                result = term if c > 0 else const(0, self.dtype) - term
            else:
                result = result + term if c > 0 else result - term
        if result is None:
            return const(self.const, self.dtype)
        if self.const > 0:
            return result + const(self.const, self.dtype)
        if self.const < 0:
            return result - const(-self.const, self.dtype)
        return result


class _Fallback:
    """TRANSITIONAL: linear canonicalization and interval bounds; delete once ingot.arith lands."""

    def __init__(self) -> None:
        self.ranges: dict[Var, Range] = {}

    def bind(self, var, rng, allow_override=True):
        self.ranges[var] = rng

    def simplify(self, expr: PrimExpr) -> PrimExpr:
        if not isinstance(expr, PrimExpr) or not expr.dtype.is_integer or expr.dtype.lanes != 1:
            return expr
        lin = _Linear.of(expr, self._atom)
        return lin.to_expr()

    def _atom(self, expr: PrimExpr) -> PrimExpr:
        if isinstance(expr, (FloorDiv, FloorMod)):
            a, c = self.simplify(expr.a), as_const_int(expr.b)
            if c is not None and c > 0:
                lo, hi = self.const_bounds(a)
                if lo is not None and hi is not None and lo >= 0 and hi < c:
                    return const(0, expr.dtype) if isinstance(expr, FloorDiv) else a
                if c == 1:
                    return a if isinstance(expr, FloorDiv) else const(0, expr.dtype)
            return type(expr)(a, self.simplify(expr.b))
        return expr

    def const_bounds(self, expr: PrimExpr) -> "tuple[int | None, int | None]":
        env = {v: (as_const_int(r.min), None if as_const_int(r.min) is None or as_const_int(r.extent) is None
                   else as_const_int(r.min) + as_const_int(r.extent) - 1) for v, r in self.ranges.items()}
        return self._interval(expr, env)

    def _interval(self, expr: PrimExpr, env) -> "tuple[int | None, int | None]":
        c = as_const_int(expr)
        if c is not None:
            return c, c
        if isinstance(expr, Var):
            return env.get(expr, (None, None))
        if isinstance(expr, (Add, Sub)):
            (a0, a1), (b0, b1) = self._interval(expr.a, env), self._interval(expr.b, env)
            if isinstance(expr, Sub):
                b0, b1 = (None if b1 is None else -b1), (None if b0 is None else -b0)
            return (None if a0 is None or b0 is None else a0 + b0), (None if a1 is None or b1 is None else a1 + b1)
        if isinstance(expr, Mul):
            k, other = as_const_int(expr.b), expr.a
            if k is None:
                k, other = as_const_int(expr.a), expr.b
            if k is None:
                return None, None
            lo, hi = self._interval(other, env)
            vals = (None if lo is None else lo * k, None if hi is None else hi * k)
            return vals if k >= 0 else (vals[1], vals[0])
        if isinstance(expr, (FloorDiv, FloorMod)):
            k = as_const_int(expr.b)
            if k is None or k <= 0:
                return None, None
            lo, hi = self._interval(expr.a, env)
            if isinstance(expr, FloorMod):
                if lo is not None and hi is not None and lo // k == hi // k:
                    return lo % k, hi % k
                return 0, k - 1
            return (None if lo is None else lo // k), (None if hi is None else hi // k)
        return None, None

    def can_prove(self, cond: PrimExpr) -> bool:
        from ingot.ir import expr as E

        c = as_const_int(cond)
        if c is not None:
            return bool(c)
        if isinstance(cond, E.And):
            return self.can_prove(cond.a) and self.can_prove(cond.b)
        if isinstance(cond, (E.LT, E.LE, E.GT, E.GE, E.EQ)) and cond.a.dtype.is_integer:
            diff = self.simplify(cond.a - cond.b)
            lo, hi = self.const_bounds(diff)
            if isinstance(cond, E.LT):
                return hi is not None and hi < 0
            if isinstance(cond, E.LE):
                return hi is not None and hi <= 0
            if isinstance(cond, E.GT):
                return lo is not None and lo > 0
            if isinstance(cond, E.GE):
                return lo is not None and lo >= 0
            return lo == 0 and hi == 0
        return False

    def bounds(self, expr: PrimExpr, relax: Mapping[Var, Range]):
        # Split the linear form into relaxed-variable terms (bounded by their ranges) and the rest.
        lin = _Linear.of(self.simplify(expr), lambda e: e)
        lo = hi = _Linear(lin.dtype, {}, lin.const)
        saved = dict(self.ranges)
        self.ranges.update(relax)
        try:
            for k, (c, atom) in lin.terms.items():
                if not any(v in relax for v in collect_vars(atom)):
                    term = _Linear(lin.dtype, {k: [c, atom]}, 0)
                    lo, hi = lo.plus(term, 1), hi.plus(term, 1)
                    continue
                env = {v: (as_const_int(r.min), as_const_int(r.min + r.extent - 1)) for v, r in relax.items()}
                a_lo, a_hi = self._interval(atom, env)
                if a_lo is None or a_hi is None:
                    return None
                t_lo, t_hi = (c * a_lo, c * a_hi) if c > 0 else (c * a_hi, c * a_lo)
                lo, hi = lo.plus(_Linear(lin.dtype, {}, t_lo), 1), hi.plus(_Linear(lin.dtype, {}, t_hi), 1)
        finally:
            self.ranges = saved
        return lo.to_expr(), hi.to_expr()


def substitute_expr(expr: Any, vmap: Mapping[Var, Any]) -> Any:
    """`ingot.ir.substitute` (re-exported so passes import analysis helpers from one place)."""
    return substitute(expr, vmap)


def const_upper_bound(analyzer: Analyzer, expr: PrimExpr) -> "int | None":
    """The largest value ``expr`` can take under the analyzer's bound ranges, if known.

    Example:
        >>> from ingot.ir import Var, Range
        >>> i = Var("i"); ana = Analyzer(); ana.bind(i, Range.from_min_extent(0, 8))
        >>> const_upper_bound(ana, i * 2 + 1)
        15
    """
    expr = analyzer.simplify(expr)
    c = as_const_int(expr)
    if c is not None:
        return c
    impl = analyzer._impl
    if hasattr(impl, "const_int_bound"):
        bound = impl.const_int_bound(expr)
        value = getattr(bound, "max_value", None)
        if isinstance(value, int) and abs(value) < 2**62:
            return value
        return None
    if isinstance(impl, _Fallback):
        return impl.const_bounds(expr)[1]
    return None


def fork(analyzer: Analyzer) -> Analyzer:
    """A new analyzer with the same variable ranges (for hypothetical bindings).

    Example:
        >>> a = fork(Analyzer())
    """
    other = Analyzer()
    for var, rng in analyzer.ranges.items():
        other.bind(var, rng)
    return other
