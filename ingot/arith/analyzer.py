"""`Analyzer`: the one object schedules and passes talk to (TVM's ``tvm.arith.Analyzer``).

Note: the analyzer holds what is known — variable ranges (``bind``), variables equal to
expressions (``bind(var, expr)``), and constraints (``constraint_scope``) — and answers
simplification, bound, proof and interval-set queries under that knowledge. Constraints are
stored as bounds on the non-constant part of a linear form (``i*4 + j < 10`` becomes
``i*4 + j ∈ (-inf, 9]``), keyed independently of term order, so every later bound query on an
expression whose linear part matches sees them. Results are memoized per analyzer and the memo
is dropped whenever the knowledge changes.

Example:
    >>> from ingot.ir import Var, Range
    >>> ana = Analyzer()
    >>> i, j = Var("i"), Var("j")
    >>> ana.bind(i, Range(0, 4)); ana.bind(j, Range(0, 4))
    >>> with ana.constraint_scope(i * 4 + j < 10):
    ...     ana.can_prove(i * 4 + j <= 9)
    True
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from ingot.ir import expr as E
from ingot.ir.expr import PrimExpr, Range, Var, convert

from .canonical import SumForm
from .const_int_bound import NEG_INF, POS_INF, ConstIntBound, ConstIntBoundEvaluator
from .rewrite import Simplifier, _is_int


def _terms_key(form: SumForm) -> frozenset:
    return frozenset((k, v[0]) for k, v in form.terms.items())


class Analyzer:
    """Integer analysis under known variable ranges and constraints.

    Example:
        >>> from ingot.ir import Var, Range
        >>> ana = Analyzer(); x = Var("x")
        >>> ana.bind(x, Range(0, 16))
        >>> str(ana.simplify(x // 16)), ana.can_prove(x < 16), ana.const_int_bound(x * 2).max_value
        ('0', True, 30)
    """

    def __init__(self):
        self._var_bounds: dict[Var, ConstIntBound] = {}
        self._var_ranges: dict[Var, Range] = {}
        self._var_subst: dict[Var, PrimExpr] = {}
        self._facts: dict[frozenset, ConstIntBound] = {}
        # Variables whose knowledge some memoized simplify/bound result has read (see `_changed`).
        self._consulted: set[Var] = set()
        self._bounds = ConstIntBoundEvaluator(self)
        self._simplifier = Simplifier(self)

    # -- knowledge ---------------------------------------------------------------------------------
    def bind(self, var: Var, value: "Range | PrimExpr | int", allow_override: bool = False) -> None:
        """Declare ``var`` ranges over ``value`` (a `Range`) or equals ``value`` (an expression).

        Rebinding a variable to something different raises unless ``allow_override`` is set.

        Example:
            >>> from ingot.ir import Var, Range
            >>> ana = Analyzer(); i, k = Var("i"), Var("k")
            >>> ana.bind(i, Range(0, 8)); ana.bind(k, i * 2)
            >>> ana.const_int_bound(k).max_value
            14
        """
        if not isinstance(var, Var):
            raise TypeError(f"Analyzer.bind needs a Var as first argument, got {var!r}")
        if isinstance(value, Range):
            new_min = self.simplify(value.min)
            new_extent = self.simplify(value.extent)
            old = self._var_ranges.get(var)
            if old is not None and not allow_override and not (
                    self.can_prove_equal(old.min, new_min) and self.can_prove_equal(old.extent, new_extent)):
                raise ValueError(
                    f"variable {var.name} is already bound to [{old.min}, {old.min} + {old.extent}); "
                    f"cannot rebind it to [{new_min}, {new_min} + {new_extent}). Pass allow_override=True "
                    "to replace the binding, or use a fresh variable"
                )
            lo = self.const_int_bound(new_min).min_value
            hi = self.const_int_bound(self.simplify(new_min + new_extent - 1)).max_value
            self._var_ranges[var] = Range.from_min_extent(new_min, new_extent)
            self._var_bounds[var] = ConstIntBound(lo, max(lo, hi))
        else:
            value = self.simplify(convert(value))
            old_value = self._var_subst.get(var)
            if old_value is not None and not allow_override and not self.can_prove_equal(old_value, value):
                raise ValueError(
                    f"variable {var.name} is already bound to {old_value}; cannot rebind it to {value}. "
                    "Pass allow_override=True to replace the binding"
                )
            bound = self.const_int_bound(value)
            self._var_subst[var] = value
            self._var_bounds[var] = bound
        if var in self._consulted:
            # Only results that read this variable's knowledge can be stale. Lowering binds each
            # loop variable once, before any expression using it is simplified: the memo survives.
            self._changed()

    @contextmanager
    def constraint_scope(self, constraint: Any) -> Iterator[None]:
        """Assume the bool ``constraint`` inside the ``with`` block.

        Example:
            >>> from ingot.ir import Var
            >>> ana = Analyzer(); n = Var("n")
            >>> with ana.constraint_scope(n >= 4):
            ...     ana.can_prove(n > 2)
            True
            >>> ana.can_prove(n > 2)
            False
        """
        saved = (dict(self._var_bounds), dict(self._facts))
        self._add_constraint(self.simplify(convert(constraint)))
        self._changed()
        try:
            yield
        finally:
            self._var_bounds, self._facts = saved
            self._changed()

    def _changed(self) -> None:
        self._bounds.cache.clear()
        self._simplifier.cache.clear()
        self._consulted.clear()

    def _add_constraint(self, cond: PrimExpr) -> None:
        """Record what ``cond`` says about bounds of linear forms (conjunctions are split)."""
        if isinstance(cond, E.And):
            self._add_constraint(cond.a)
            self._add_constraint(cond.b)
            return
        if isinstance(cond, E.Not):
            negated = self._simplifier.visit(cond)
            if not isinstance(negated, E.Not):
                self._add_constraint(negated)
            return
        if not isinstance(cond, E.CmpOp) or not _is_int(cond.a) or isinstance(cond, E.NE):
            return
        # Step 1. linear = a - b, relation on its non-constant part L: L op -const.
        diff = SumForm.from_expr(cond.a).add(SumForm.from_expr(cond.b), -1)
        k = -diff.const
        linear = diff.without_const()
        if linear.is_const():
            return
        lo, hi = {E.LT: (NEG_INF, k - 1), E.LE: (NEG_INF, k), E.GT: (k + 1, POS_INF),
                  E.GE: (k, POS_INF), E.EQ: (k, k)}[type(cond)]
        # Step 2. a single scaled atom c*x also bounds x itself.
        single = linear.single_atom()
        if single is not None and single[0] != 1:
            c, atom = single
            lo, hi = (lo, hi) if c > 0 else (-hi, -lo)
            c = abs(c)
            lo = lo if lo <= NEG_INF else -((-lo) // c)
            hi = hi if hi >= POS_INF else hi // c
            linear = SumForm.atom(atom)
        self._add_fact(linear, ConstIntBound(lo, hi))
        # Step 3. bound each variable of a sum by the fact and the bounds of the other terms:
        # i*4 + k <= 9 with k >= 0 gives i <= 2.
        if len(linear.terms) > 1:
            for key, (coeff, atoms) in list(linear.terms.items()):
                if len(atoms) != 1 or not isinstance(atoms[0], Var):
                    continue
                rest = linear.copy()
                del rest.terms[key]
                rb = self._bounds.bound(rest.to_expr())
                v_lo = NEG_INF if lo <= NEG_INF or rb.max_value >= POS_INF else lo - rb.max_value
                v_hi = POS_INF if hi >= POS_INF or rb.min_value <= NEG_INF else hi - rb.min_value
                if coeff < 0:
                    v_lo, v_hi = (NEG_INF if v_hi >= POS_INF else -v_hi), (POS_INF if v_lo <= NEG_INF else -v_lo)
                c = abs(coeff)
                v_lo = v_lo if v_lo <= NEG_INF else -((-v_lo) // c)
                v_hi = v_hi if v_hi >= POS_INF else v_hi // c
                self._add_fact(SumForm.atom(atoms[0]), ConstIntBound(v_lo, v_hi))

    def _add_fact(self, linear: SumForm, bound: ConstIntBound) -> None:
        key = _terms_key(linear)
        old = self._facts.get(key)
        self._facts[key] = bound if old is None else old.intersect(bound)
        single = linear.single_atom()
        if single is not None and single[0] == 1 and isinstance(single[1], Var):
            var = single[1]
            old_var = self._var_bounds.get(var)
            self._var_bounds[var] = self._facts[key] if old_var is None else old_var.intersect(self._facts[key])

    def _var_bound(self, var: Var) -> "ConstIntBound | None":
        return self._var_bounds.get(var)

    def _fact_bound(self, expr: PrimExpr, result: ConstIntBound) -> ConstIntBound:
        """Intersect ``result`` with what constraints say about ``expr``'s linear part."""
        if not self._facts or not _is_int(expr):
            return result
        form = SumForm.from_expr(expr)
        linear = form.without_const()
        fact = self._facts.get(_terms_key(linear))
        if fact is not None:
            result = result.intersect(_shift(fact, form.const))
        fact = self._facts.get(_terms_key(linear.mul_const(-1)))
        if fact is not None:
            result = result.intersect(_shift(ConstIntBound(-fact.max_value, -fact.min_value), form.const))
        return result

    # -- queries -----------------------------------------------------------------------------------
    def simplify(self, expr: Any) -> PrimExpr:
        """The canonical simplified form of ``expr`` under what is known (idempotent).

        Example:
            >>> from ingot.ir import Var, Range
            >>> ana = Analyzer(); i, j = Var("i"), Var("j")
            >>> ana.bind(j, Range(0, 4))
            >>> str(ana.simplify((i * 4 + j) // 4 * 4 + (i * 4 + j) % 4))
            'i * 4 + j'
        """
        return self._simplifier.simplify(convert(expr))

    def const_int_bound(self, expr: Any) -> ConstIntBound:
        """Constant ``[min_value, max_value]`` of an integer expression (sentinels when unbounded).

        Example:
            >>> from ingot.ir import Var, Range
            >>> ana = Analyzer(); i = Var("i"); ana.bind(i, Range(0, 10))
            >>> b = ana.const_int_bound(i % 4 + i // 4)
            >>> (b.min_value, b.max_value)
            (0, 5)
        """
        expr = convert(expr)
        bound = self._bounds.bound(expr)
        simplified = self.simplify(expr)
        if simplified is not expr:
            bound = bound.intersect(self._bounds.bound(simplified))
        return bound

    def can_prove(self, cond: Any) -> bool:
        """True only if ``cond`` is proven to hold (False means "not proven", not "false").

        Example:
            >>> from ingot.ir import Var, Range
            >>> ana = Analyzer(); i = Var("i"); ana.bind(i, Range(0, 8))
            >>> ana.can_prove(i * 2 < 16), ana.can_prove(i < 7)
            (True, False)
        """
        result = self.simplify(cond)
        return isinstance(result, E.IntImm) and result.value != 0

    def can_prove_equal(self, a: Any, b: Any) -> bool:
        """Whether ``a == b`` is proven for all values of the free variables.

        Example:
            >>> from ingot.ir import Var
            >>> ana = Analyzer(); x = Var("x")
            >>> ana.can_prove_equal((x + 1) * 2, x * 2 + 2)
            True
        """
        a, b = convert(a), convert(b)
        if isinstance(a, PrimExpr) and isinstance(b, PrimExpr) and a.dtype == b.dtype and _is_int(a):
            diff = self.simplify(E.Sub(a, b))
            return isinstance(diff, E.IntImm) and diff.value == 0
        from .canonical import expr_key

        return expr_key(self.simplify(a)) == expr_key(self.simplify(b))

    def int_set(self, expr: Any, dom_map: "Mapping[Var, Any] | None" = None):
        """The set of values ``expr`` takes when the variables of ``dom_map`` range over their domains.

        Variables not in ``dom_map`` stay symbolic (a single point each).

        Example:
            >>> from ingot.ir import Var, Range
            >>> ana = Analyzer(); i, j = Var("i"), Var("j")
            >>> s = ana.int_set(i * 4 + j, {j: Range(0, 4)})
            >>> str(s.min_value), str(s.max_value)
            ('i * 4', 'i * 4 + 3')
        """
        from .int_set import eval_int_set

        return eval_int_set(convert(expr), dom_map or {}, self)


def _shift(bound: ConstIntBound, k: int) -> ConstIntBound:
    lo = bound.min_value if bound.min_value <= NEG_INF else bound.min_value + k
    hi = bound.max_value if bound.max_value >= POS_INF else bound.max_value + k
    return ConstIntBound(lo, hi)


__all__ = ["Analyzer"]
