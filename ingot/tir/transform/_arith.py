"""The one door through which the lowering passes use integer analysis.

Note: the passes need four things from `ingot.arith`: simplify an expression under known loop
ranges, prove a condition, bound an expression when some variables range over loop domains
(``int_set``), and constant upper bounds. They ask for them only through `Analyzer` here, so the
dependency on the analyzer's exact API is in one place.

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

from ingot import arith
from ingot.arith.canonical import SumForm
from ingot.ir.expr import PrimExpr, Range, Var, as_const_int
from ingot.ir.functor import Visitor, collect_vars, substitute
from ingot.ir.structural import structural_hash



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
        self._impl = arith.Analyzer()
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
        result = self._affine_bounds(expr, relax)
        if result is None:
            result = self._int_set_bounds(expr, relax)
        if result is None:
            return None
        lo, hi = (self.simplify(x) for x in result)
        if any(v in relax for v in collect_vars(lo) + collect_vars(hi)):
            return None
        return lo, hi

    def _affine_bounds(self, expr: PrimExpr, relax: Mapping[Var, Range]) -> "tuple[PrimExpr, PrimExpr] | None":
        """The bounds of an index that is affine in the relaxed variables, each over a constant
        range (almost every access after blocks became loops), read off its sum form: each term
        ``c * v`` becomes ``c * min`` or ``c * max`` by the sign of ``c``. That is what interval
        arithmetic (`_int_set_bounds`) gives, without simplifying a partial sum at every ``+``
        node. None for any other index (a relaxed variable inside an atom, a product of variables,
        a symbolic range)."""
        e = self.simplify(expr)
        if not (e.dtype.is_int and e.dtype.lanes == 1):
            return None
        form = SumForm.from_expr(e)
        lo_const = hi_const = form.const
        kept: dict = {}
        for key, (coeff, atoms) in form.terms.items():
            atom = atoms[0]
            if len(atoms) == 1 and isinstance(atom, Var) and atom in relax:
                rng = relax[atom]
                start, extent = as_const_int(self.simplify(rng.min)), as_const_int(self.simplify(rng.extent))
                if start is None or extent is None or extent <= 0:
                    return None
                a, b = coeff * start, coeff * (start + extent - 1)
                lo_const += min(a, b)
                hi_const += max(a, b)
            elif any(isinstance(a, Var) and a in relax or not isinstance(a, Var) and _uses_any(a, relax)
                     for a in atoms):
                return None
            else:
                kept[key] = [coeff, atoms]
        rest = {k: list(v) for k, v in kept.items()}
        return SumForm(form.dtype, kept, lo_const).to_expr(), SumForm(form.dtype, rest, hi_const).to_expr()

    def _int_set_bounds(self, expr: PrimExpr, relax: Mapping[Var, Range]) -> "tuple[PrimExpr, PrimExpr] | None":
        s = self._impl.int_set(expr, dict(relax))
        if not (s.has_lower_bound() and s.has_upper_bound()):
            return None
        return s.min_value, s.max_value


def _uses_any(expr: PrimExpr, variables: Mapping[Var, Any]) -> bool:
    return any(v in variables for v in collect_vars(expr))


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
    value = analyzer._impl.const_int_bound(expr).max_value
    # Unbounded ends are reported as huge sentinels.
    return value if isinstance(value, int) and abs(value) < 2**62 else None


def fork(analyzer: Analyzer) -> Analyzer:
    """A new analyzer with the same variable ranges (for hypothetical bindings).

    Example:
        >>> a = fork(Analyzer())
    """
    other = Analyzer()
    for var, rng in analyzer.ranges.items():
        other.bind(var, rng)
    return other


class _Leaves(Visitor):
    def __init__(self) -> None:
        self.ids: list = []
        self.vars: dict = {}

    def visit_Var(self, node: Var) -> None:
        self.ids.append(id(node))
        self.vars.setdefault(id(node), node)

    def visit_Buffer(self, node: Any) -> None:
        self.ids.append(id(node))


def expr_key(expr: PrimExpr) -> "tuple[tuple, list[Var]]":
    """A memo key for an analysis of ``expr`` and its distinct variables: the key is equal for two
    expressions exactly when they have the same structure over the same variable and buffer
    *objects* (the structural hash only has their names). The caller keeps ``expr`` alive while
    the key is in use (the key holds ids).

    Example:
        >>> from ingot.ir import Var
        >>> i, j = Var("i"), Var("i")
        >>> expr_key(i + 1)[0] == expr_key(i + 1)[0], expr_key(i + 1)[0] == expr_key(j + 1)[0]
        (True, False)
    """
    leaves = _Leaves()
    leaves.visit(expr)
    return (structural_hash(expr), tuple(leaves.ids)), list(leaves.vars.values())

