"""The simplifier: bottom-up rewrite rules per node class, driven to a fixed point.

Note: integer ``+ - *`` trees are normalized through `SumForm` (sum of monomials), then a list of
sum-level rules merges the ``floordiv``/``floormod`` pairs that split/fuse leave behind
(``x // c * c + x % c → x``, ``x // c1 % c2 * c1 + x % c1 → x % (c1*c2)``, ...). ``floordiv`` and
``floormod`` by a positive constant first split off the terms whose coefficients the divisor
divides, then use the analyzer's bounds on the rest (``(i*16 + j) // 16 → i`` when
``0 <= j < 16``). Comparisons are decided from the bound of their difference; ``min``/``max``
from the bound of the difference of their operands. Only signed scalar integers get algebra:
float expressions are constant-folded but never reassociated (that would change results), and
unsigned ones only folded.

Example:
    >>> from ingot.ir import Var, Range
    >>> from ingot.arith import Analyzer
    >>> ana = Analyzer(); i, j = Var("i"), Var("j")
    >>> ana.bind(i, Range(0, 8)); ana.bind(j, Range(0, 16))
    >>> str(ana.simplify((i * 16 + j) // 16)), str(ana.simplify((i * 16 + j) % 16))
    ('i', 'j')
"""
from __future__ import annotations

from math import gcd
from typing import TYPE_CHECKING, Callable

from ingot.ir import expr as E
from ingot.ir.functor import _rebuild

from .canonical import SumForm, expr_key, same_key
from .const_int_bound import NEG_INF, POS_INF

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer

_MAX_FIXPOINT_ROUNDS = 4
_SUM_NODES = (E.Add, E.Sub, E.Mul)
_CACHE_LIMIT = 100_000


def _is_int(expr: E.PrimExpr) -> bool:
    """Signed scalar integers: the type the algebra of this module is sound for."""
    return expr.dtype.is_int and expr.dtype.lanes == 1


def _const(expr: E.PrimExpr) -> "int | None":
    return expr.value if isinstance(expr, E.IntImm) else None


def _true(value: bool) -> E.IntImm:
    return E.IntImm("bool", 1 if value else 0)


def _finite(*values: int) -> bool:
    return all(NEG_INF < v < POS_INF for v in values)


class Simplifier:
    """Rewrite-rule simplifier bound to one `Analyzer` (its bounds, bindings and constraints).

    Example:
        >>> from ingot.arith import Analyzer
        >>> from ingot.ir import Var
        >>> x = Var("x")
        >>> str(Simplifier(Analyzer()).simplify(x // 4 * 4 + x % 4))
        'x'
    """

    def __init__(self, analyzer: "Analyzer"):
        self.ana = analyzer
        self.cache: dict[int, tuple[E.PrimExpr, E.PrimExpr]] = {}
        cmp = self._compare
        self._rules: dict[type, Callable[[E.PrimExpr], E.PrimExpr]] = {
            E.Var: self._var, E.SizeVar: self._var, E.IntImm: self._leaf, E.FloatImm: self._leaf,
            E.StringImm: self._leaf, E.Add: self._arith, E.Sub: self._arith, E.Mul: self._arith,
            E.FloorDiv: self._floordiv, E.FloorMod: self._floormod, E.Div: self._truncdiv,
            E.Mod: self._truncmod, E.Min: self._minmax, E.Max: self._minmax, E.LT: cmp, E.LE: cmp,
            E.GT: cmp, E.GE: cmp, E.EQ: cmp, E.NE: cmp, E.And: self._and, E.Or: self._or,
            E.Not: self._not, E.Select: self._select, E.Call: self._call, E.Cast: self._cast,
            E.Let: self._let,
        }
        # Sum-level rules: each takes (form, key of a single-atom term) and returns a new form or None.
        self._sum_rules = (self._rule_div_mod_pair, self._rule_split_mod_pair, self._rule_split_div_pair)

    # -- engine ------------------------------------------------------------------------------------
    def simplify(self, expr: E.PrimExpr) -> E.PrimExpr:
        """Rewrite until nothing changes (at most a few rounds; each round is bottom-up)."""
        for _ in range(_MAX_FIXPOINT_ROUNDS):
            new = self.visit(expr)
            if new is expr or same_key(new, expr):
                return new
            expr = new
        return expr

    def visit(self, expr: E.PrimExpr) -> E.PrimExpr:
        hit = self.cache.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        rule = self._rules.get(type(expr), self._generic)
        result = rule(expr)
        if len(self.cache) > _CACHE_LIMIT:  # keep tuning loops with one long-lived analyzer bounded
            self.cache.clear()
        self.cache[id(expr)] = (expr, result)
        return result

    def _generic(self, expr: E.PrimExpr) -> E.PrimExpr:
        """Simplify the children, rebuild only if one changed."""
        changes = {}
        for name in expr._fields:
            value = getattr(expr, name)
            if isinstance(value, E.PrimExpr):
                new = self.visit(value)
            elif isinstance(value, tuple) and value and all(isinstance(v, E.PrimExpr) for v in value):
                new = tuple(self.visit(v) for v in value)
                if all(a is b for a, b in zip(new, value)):
                    new = value
            else:
                continue
            if new is not value:
                changes[name] = new
        return _rebuild(expr, changes) if changes else expr

    def _leaf(self, expr: E.PrimExpr) -> E.PrimExpr:
        return expr

    def _var(self, expr: E.Var) -> E.PrimExpr:
        self.ana._consulted.add(expr)
        bound_to = self.ana._var_subst.get(expr)
        return bound_to if bound_to is not None else expr

    def _bound(self, expr: E.PrimExpr):
        return self.ana._bounds.bound(expr)

    # -- + - * -------------------------------------------------------------------------------------
    def _arith(self, expr: E.BinaryOp) -> E.PrimExpr:
        if not _is_int(expr):
            a, b = self.visit(expr.a), self.visit(expr.b)
            return self._fold_or_vector(type(expr), a, b, expr)
        return self._arith_form(expr).to_expr()

    def _arith_form(self, expr: E.BinaryOp) -> SumForm:
        """The simplified form of an integer ``+ - *`` node (sum rules applied)."""
        fa, fb = self._operand_form(expr.a), self._operand_form(expr.b)
        if isinstance(expr, E.Add):
            form = fa.add(fb)
        elif isinstance(expr, E.Sub):
            form = fa.add(fb, -1)
        else:
            form = fa.mul(fb)
        return self._apply_sum_rules(form)

    def _operand_form(self, operand: E.PrimExpr) -> SumForm:
        """``SumForm.from_expr(self.visit(operand))``. An operand that is itself ``+ - *`` goes
        form to form: building its expression only for this node to parse it again made a sum of
        n terms cost O(n²) nodes."""
        if type(operand) in _SUM_NODES:
            hit = self.cache.get(id(operand))
            if hit is None or hit[0] is not operand:
                form = self._arith_form(operand).reparsed()
                if form is not None:
                    return form
        return SumForm.from_expr(self.visit(operand))

    def _fold_or_vector(self, op: type, a: E.PrimExpr, b: E.PrimExpr, expr: E.PrimExpr) -> E.PrimExpr:
        """Non-integer or vector arithmetic: fold constants and push ops through Broadcast/Ramp."""
        folded = E._fold(op, a, b)
        if folded is not None:
            return folded
        if isinstance(a, E.Broadcast) and isinstance(b, E.Broadcast):
            return E.Broadcast(self.visit(op(a.value, b.value)), a.lanes)
        if op in (E.Add, E.Sub) and isinstance(a, E.Ramp) and isinstance(b, E.Broadcast):
            return E.Ramp(self.visit(op(a.base, b.value)), a.stride, a.lanes)
        if op is E.Add and isinstance(a, E.Broadcast) and isinstance(b, E.Ramp):
            return E.Ramp(self.visit(op(a.value, b.base)), b.stride, b.lanes)
        if op is E.Add and isinstance(a, E.Ramp) and isinstance(b, E.Ramp):
            return E.Ramp(self.visit(op(a.base, b.base)), self.visit(op(a.stride, b.stride)), a.lanes)
        if op is E.Mul and isinstance(a, E.Ramp) and isinstance(b, E.Broadcast):
            return E.Ramp(self.visit(op(a.base, b.value)), self.visit(op(a.stride, b.value)), a.lanes)
        if a is expr.a and b is expr.b:
            return expr
        return op(a, b)

    def _apply_sum_rules(self, form: SumForm) -> SumForm:
        """Apply the sum-level rules until none fires."""
        changed = True
        while changed:
            changed = False
            for key, (_coeff, atoms) in list(form.terms.items()):
                if len(atoms) != 1 or key not in form.terms:
                    continue
                for rule in self._sum_rules:
                    new = rule(form, key)
                    if new is not None:
                        form, changed = new, True
                        break
                if changed:
                    break
        return form

    def _find_term(self, form: SumForm, atom: E.PrimExpr, coeff: int) -> "object | None":
        """The key of the term ``coeff * atom`` in ``form`` (None if absent or another coefficient)."""
        key = frozenset({(expr_key(atom), 1)})
        entry = form.terms.get(key)
        return key if entry is not None and entry[0] == coeff else None

    def _replace(self, form: SumForm, keys: tuple, coeff: int, expr: E.PrimExpr) -> SumForm:
        out = form.copy()
        for key in keys:
            del out.terms[key]
        return out.add(SumForm.from_expr(self.visit(expr)).mul_const(coeff))

    def _rule_div_mod_pair(self, form: SumForm, key) -> "SumForm | None":
        """``x // c * (k*c) + x % c * k → x * k``."""
        coeff, (atom,) = form.terms[key]
        c = _const(atom.b) if isinstance(atom, E.FloorMod) else None
        if not c or c <= 0:
            return None
        other = self._find_term(form, E.FloorDiv(atom.a, atom.b), coeff * c)
        return None if other is None else self._replace(form, (key, other), coeff, atom.a)

    def _rule_split_mod_pair(self, form: SumForm, key) -> "SumForm | None":
        """``x // c1 % c2 * (k*c1) + x % c1 * k → x % (c1*c2) * k``."""
        coeff, (atom,) = form.terms[key]
        c1 = _const(atom.b) if isinstance(atom, E.FloorMod) else None
        if not c1 or c1 <= 0:
            return None
        x_key = expr_key(atom.a)
        for other_key, (other_coeff, other_atoms) in form.terms.items():
            other = other_atoms[0]
            if (len(other_atoms) == 1 and other_coeff == coeff * c1 and isinstance(other, E.FloorMod)
                    and isinstance(other.a, E.FloorDiv) and _const(other.a.b) == c1
                    and _const(other.b) is not None and _const(other.b) > 0
                    and expr_key(other.a.a) == x_key):
                modulus = E.IntImm(atom.b.dtype, c1 * other.b.value)
                return self._replace(form, (key, other_key), coeff, E.FloorMod(atom.a, modulus))
        return None

    def _rule_split_div_pair(self, form: SumForm, key) -> "SumForm | None":
        """``x // (c1*c2) * (k*c2) + x // c1 % c2 * k → x // c1 * k``."""
        coeff, (atom,) = form.terms[key]
        if not (isinstance(atom, E.FloorMod) and isinstance(atom.a, E.FloorDiv)):
            return None
        c1, c2 = _const(atom.a.b), _const(atom.b)
        if not c1 or not c2 or c1 <= 0 or c2 <= 0:
            return None
        outer = E.FloorDiv(atom.a.a, E.IntImm(atom.b.dtype, c1 * c2))
        other = self._find_term(form, outer, coeff * c2)
        return None if other is None else self._replace(form, (key, other), coeff, atom.a)

    # -- floordiv / floormod -----------------------------------------------------------------------
    def _floordiv(self, expr: E.FloorDiv) -> E.PrimExpr:
        a, b = self.visit(expr.a), self.visit(expr.b)
        if not _is_int(expr):
            return self._fold_or_vector(E.FloorDiv, a, b, expr)
        c = _const(b)
        if c is not None and c > 0:
            return self._div_by_const(a, c, b.dtype)
        folded = E._fold(E.FloorDiv, a, b)
        if folded is not None:
            return folded
        if self._nonneg_below(a, b):
            return E.IntImm(expr.dtype, 0)
        return expr if a is expr.a and b is expr.b else E.FloorDiv(a, b)

    def _floormod(self, expr: E.FloorMod) -> E.PrimExpr:
        a, b = self.visit(expr.a), self.visit(expr.b)
        if not _is_int(expr):
            return self._fold_or_vector(E.FloorMod, a, b, expr)
        c = _const(b)
        if c is not None and c > 0:
            return self._mod_by_const(a, c, b.dtype)
        folded = E._fold(E.FloorMod, a, b)
        if folded is not None:
            return folded
        if self._nonneg_below(a, b):
            return a
        return expr if a is expr.a and b is expr.b else E.FloorMod(a, b)

    def _nonneg_below(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        """Whether ``0 <= a < b`` is provable from bounds (then a // b = 0 and a % b = a)."""
        ba, bb = self._bound(a), self._bound(b)
        if ba.min_value < 0 or bb.min_value <= 0:
            return False
        return self._bound(self.visit(E.Sub(b, a))).min_value > 0

    def _split_multiples(self, form: SumForm, c: int) -> tuple[SumForm, SumForm]:
        """``form = c * q + r`` where q takes the terms whose coefficients c divides."""
        q, r = SumForm(form.dtype), SumForm(form.dtype)
        for key, (coeff, atoms) in form.terms.items():
            if coeff % c == 0:
                q.terms[key] = [coeff // c, atoms]
            else:
                r.terms[key] = [coeff, atoms]
        q.const, r.const = form.const // c, form.const % c
        return q, r

    def _div_by_const(self, a: E.PrimExpr, c: int, dtype) -> E.PrimExpr:
        if c == 1:
            return a
        # Step 1. floordiv(c*q + r, c) = q + floordiv(r, c), exactly.
        q, r = self._split_multiples(SumForm.from_expr(a), c)
        # Step 2. r is bounded inside one multiple of c: the division is a constant.
        r_expr = r.to_expr()
        rb = self._bound(r_expr)
        if _finite(rb.min_value, rb.max_value) and rb.min_value // c == rb.max_value // c:
            return q.add(SumForm.constant(rb.min_value // c, dtype)).to_expr()
        # Step 2b. r = k*x + y with k | c and 0 <= y < k: floordiv(r, c) = floordiv(x, c / k) (a vector
        # lane inside a panel: (8*t + lane) // 32 = t // 4 for lane < 8).
        split = self._offset_split(r, c)
        if split is not None:
            k, x, _ = split
            return q.add(SumForm.from_expr(self._div_by_const(x.to_expr(), c // k, dtype))).to_expr()
        # Step 3. a factor common to r and c cancels: floordiv(g*r', g*c') = floordiv(r', c').
        g = gcd(gcd(r.coeff_gcd(), r.const), c)
        if g > 1:
            reduced = SumForm(dtype, {k: [v[0] // g, v[1]] for k, v in r.terms.items()}, r.const // g)
            rest = self._div_by_const(reduced.to_expr(), c // g, dtype)
            return q.add(SumForm.from_expr(rest)).to_expr()
        # Step 4. rules on a single atom: nested divisions merge, div of a mod becomes a split.
        atom = self._div_atom(r_expr, c, dtype)
        return q.add(SumForm.from_expr(atom)).to_expr()

    def _offset_split(self, r: SumForm, c: int) -> "tuple[int, SumForm, SumForm] | None":
        """``(k, x, y)`` with ``r = k*x + y``, ``1 < k < c``, ``k | c`` and ``0 <= y < k`` provable
        from bounds (the largest such k), or None."""
        candidates = sorted({gcd(abs(coeff), c) for coeff, _ in r.terms.values()}, reverse=True)
        for k in candidates:
            if not 1 < k < c:
                continue
            x, y = self._split_multiples(r, k)
            if not x.terms or not y.terms:
                continue  # nothing to gain: the plain rules already cover a constant offset
            yb = self._bound(y.to_expr())
            if _finite(yb.min_value, yb.max_value) and yb.min_value >= 0 and yb.max_value < k:
                return k, x, y
        return None

    def _div_atom(self, x: E.PrimExpr, c: int, dtype) -> E.PrimExpr:
        if isinstance(x, E.FloorDiv) and (_const(x.b) or 0) > 0:
            return self._div_by_const(x.a, x.b.value * c, dtype)
        if isinstance(x, E.FloorMod) and (_const(x.b) or 0) > 0 and x.b.value % c == 0:
            inner = self._div_by_const(x.a, c, dtype)
            return self._mod_by_const(inner, x.b.value // c, dtype)
        return E.FloorDiv(x, E.IntImm(dtype, c))

    def _mod_by_const(self, a: E.PrimExpr, c: int, dtype) -> E.PrimExpr:
        if c == 1:
            return E.IntImm(dtype, 0)
        # Step 1. floormod(c*q + r, c) = floormod(r, c).
        _, r = self._split_multiples(SumForm.from_expr(a), c)
        if r.is_const():
            return E.IntImm(dtype, r.const)
        # Step 2. r bounded inside one multiple of c: the modulo is an offset.
        r_expr = r.to_expr()
        rb = self._bound(r_expr)
        if _finite(rb.min_value, rb.max_value) and rb.min_value // c == rb.max_value // c:
            return r.add(SumForm.constant(-(rb.min_value // c) * c, dtype)).to_expr()
        # Step 2b. r = k*x + y with k | c and 0 <= y < k: floormod(r, c) = floormod(x, c / k) * k + y.
        split = self._offset_split(r, c)
        if split is not None:
            k, x, y = split
            outer = SumForm.from_expr(self._mod_by_const(x.to_expr(), c // k, dtype)).mul_const(k)
            return outer.add(y).to_expr()
        # Step 3. common factor: floormod(g*r', g*c') = g * floormod(r', c').
        g = gcd(gcd(r.coeff_gcd(), r.const), c)
        if g > 1:
            reduced = SumForm(dtype, {k: [v[0] // g, v[1]] for k, v in r.terms.items()}, r.const // g)
            rest = self._mod_by_const(reduced.to_expr(), c // g, dtype)
            return SumForm.from_expr(rest).mul_const(g).to_expr()
        # Step 4. a modulo of a modulo by a multiple of c is the inner one's operand modulo c.
        if isinstance(r_expr, E.FloorMod) and (_const(r_expr.b) or 0) > 0 and r_expr.b.value % c == 0:
            return self._mod_by_const(r_expr.a, c, dtype)
        return E.FloorMod(r_expr, E.IntImm(dtype, c))

    def _truncdiv(self, expr: E.Div) -> E.PrimExpr:
        """C division: equal to floordiv when the dividend is non-negative and the divisor positive."""
        a, b = self.visit(expr.a), self.visit(expr.b)
        if _is_int(expr) and self._bound(a).min_value >= 0 and self._bound(b).min_value > 0:
            return self.visit(E.FloorDiv(a, b))
        return self._fold_or_vector(E.Div, a, b, expr)

    def _truncmod(self, expr: E.Mod) -> E.PrimExpr:
        a, b = self.visit(expr.a), self.visit(expr.b)
        if _is_int(expr) and self._bound(a).min_value >= 0 and self._bound(b).min_value > 0:
            return self.visit(E.FloorMod(a, b))
        return self._fold_or_vector(E.Mod, a, b, expr)

    # -- min / max ---------------------------------------------------------------------------------
    def _minmax(self, expr: "E.Min | E.Max") -> E.PrimExpr:
        op = type(expr)
        a, b = self.visit(expr.a), self.visit(expr.b)
        folded = E._fold(op, a, b)
        if folded is not None:
            return folded
        if not _is_int(expr):
            return expr if a is expr.a and b is expr.b else op(a, b)
        if expr_key(a) == expr_key(b):
            return a
        # Step 1. decide from the bound of a - b.
        diff = self._bound(self._arith(E.Sub(a, b)))
        a_le_b = diff.max_value <= 0
        a_ge_b = diff.min_value >= 0
        if a_le_b or a_ge_b:
            return a if (op is E.Min) == a_le_b else b
        # Step 2. constants go right; nested constants merge: min(min(x, 3), 5) → min(x, 3).
        if isinstance(a, E.IntImm):
            a, b = b, a
        if isinstance(a, op) and isinstance(b, E.IntImm) and isinstance(a.b, E.IntImm):
            return op(a.a, E._fold(op, a.b, b))
        # Step 3. min(min(x, y), y) → min(x, y).
        if isinstance(a, op) and expr_key(b) in (expr_key(a.a), expr_key(a.b)):
            return a
        return op(a, b)

    # -- comparisons and logic ---------------------------------------------------------------------
    def _compare(self, expr: E.CmpOp) -> E.PrimExpr:
        op = type(expr)
        a, b = self.visit(expr.a), self.visit(expr.b)
        if isinstance(a, (E.IntImm, E.FloatImm)) and isinstance(b, (E.IntImm, E.FloatImm)):
            return E._compare(op, a, b)
        if not _is_int(a):
            if expr_key(a) == expr_key(b) and not a.dtype.is_float:
                return _true(op in (E.LE, E.GE, E.EQ))
            return expr if a is expr.a and b is expr.b else op(a, b)
        # Step 1. decide from the bound of d = a - b (and divisibility for == / !=).
        diff = SumForm.from_expr(a).add(SumForm.from_expr(b), -1)
        d = self._bound(diff.to_expr())
        lo, hi = d.min_value, d.max_value
        decided = {
            E.LT: (hi < 0, lo >= 0), E.LE: (hi <= 0, lo > 0), E.GT: (lo > 0, hi <= 0),
            E.GE: (lo >= 0, hi < 0), E.EQ: (lo == hi == 0, lo > 0 or hi < 0),
            E.NE: (lo > 0 or hi < 0, lo == hi == 0),
        }[op]
        if decided[0]:
            return _true(True)
        if decided[1]:
            return _true(False)
        g = diff.coeff_gcd()
        if op in (E.EQ, E.NE) and g > 1 and diff.const % g != 0:
            return _true(op is E.NE)
        # Step 2. normal form: positive terms < negative terms - const; > and >= flip to < and <=.
        if op in (E.GT, E.GE):
            diff, op = diff.mul_const(-1), (E.LT if op is E.GT else E.LE)
        lhs = SumForm(diff.dtype, {k: v for k, v in diff.terms.items() if v[0] > 0})
        rhs = SumForm(diff.dtype, {k: [-v[0], v[1]] for k, v in diff.terms.items() if v[0] < 0}, -diff.const)
        return op(lhs.to_expr(), rhs.to_expr())

    def _and(self, expr: E.And) -> E.PrimExpr:
        a, b = self.visit(expr.a), self.visit(expr.b)
        for x, y in ((a, b), (b, a)):
            if _const(x) == 0:
                return x
            if _const(x) == 1:
                return y
        if expr_key(a) == expr_key(b):
            return a
        if expr_key(self.visit(E.Not(a))) == expr_key(b):
            return _true(False)
        return expr if a is expr.a and b is expr.b else E.And(a, b)

    def _or(self, expr: E.Or) -> E.PrimExpr:
        a, b = self.visit(expr.a), self.visit(expr.b)
        for x, y in ((a, b), (b, a)):
            if _const(x) == 1:
                return x
            if _const(x) == 0:
                return y
        if expr_key(a) == expr_key(b):
            return a
        if expr_key(self.visit(E.Not(a))) == expr_key(b):
            return _true(True)
        return expr if a is expr.a and b is expr.b else E.Or(a, b)

    _NEGATED = {E.LT: (E.GE, False), E.LE: (E.GT, False), E.GT: (E.LE, False), E.GE: (E.LT, False),
                E.EQ: (E.NE, False), E.NE: (E.EQ, False)}

    def _not(self, expr: E.Not) -> E.PrimExpr:
        a = self.visit(expr.a)
        if isinstance(a, E.IntImm):
            return _true(not a.value)
        if isinstance(a, E.Not):
            return a.a
        negated = self._NEGATED.get(type(a))
        if negated is not None and not a.a.dtype.is_float:  # NaN makes not(a < b) differ from a >= b
            return self.visit(negated[0](a.a, a.b))
        if isinstance(a, E.And):
            return self.visit(E.Or(E.Not(a.a), E.Not(a.b)))
        if isinstance(a, E.Or):
            return self.visit(E.And(E.Not(a.a), E.Not(a.b)))
        return expr if a is expr.a else E.Not(a)

    # -- select, calls, casts, let -----------------------------------------------------------------
    def _select(self, expr: E.Select) -> E.PrimExpr:
        cond = self.visit(expr.condition)
        if isinstance(cond, E.IntImm):
            return self.visit(expr.true_value if cond.value else expr.false_value)
        t, f = self.visit(expr.true_value), self.visit(expr.false_value)
        if expr_key(t) == expr_key(f):
            return t
        if cond is expr.condition and t is expr.true_value and f is expr.false_value:
            return expr
        return E.Select(cond, t, f)

    def _call(self, expr: E.Call) -> E.PrimExpr:
        if expr.op == "if_then_else" and len(expr.args) == 3:
            cond = self.visit(expr.args[0])
            if isinstance(cond, E.IntImm):
                return self.visit(expr.args[1] if cond.value else expr.args[2])
            t, f = self.visit(expr.args[1]), self.visit(expr.args[2])
            if expr_key(t) == expr_key(f):
                return t
            return E.Call(expr.dtype, expr.op, (cond, t, f))
        return self._generic(expr)

    def _cast(self, expr: E.Cast) -> E.PrimExpr:
        value = self.visit(expr.value)
        if value.dtype == expr.dtype:
            return value
        if isinstance(value, (E.IntImm, E.FloatImm)) and expr.dtype.is_scalar:
            if expr.dtype.is_integer and isinstance(value, E.FloatImm):
                return E.IntImm(expr.dtype, int(value.value))  # C conversion truncates toward zero
            return E.cast(value, expr.dtype)
        # Cast back through a wider integer type is the identity: int32(int64(x)) → x.
        if (isinstance(value, E.Cast) and value.value.dtype == expr.dtype and expr.dtype.is_int
                and value.dtype.is_int and value.dtype.bits >= expr.dtype.bits):
            return value.value
        return expr if value is expr.value else E.Cast(expr.dtype, value)

    def _let(self, expr: E.Let) -> E.PrimExpr:
        from ingot.ir.functor import substitute

        value = self.visit(expr.value)
        if isinstance(value, (E.IntImm, E.FloatImm, E.Var)):
            return self.visit(substitute(expr.body, {expr.var: value}))
        body = self.visit(expr.body)
        return expr if value is expr.value and body is expr.body else E.Let(expr.var, value, body)


__all__ = ["Simplifier"]
