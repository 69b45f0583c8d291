"""Canonical sum-of-monomials form of integer expressions.

Note: the simplifier brings every integer ``+ - *`` tree into one `SumForm`: a constant plus a list
of terms ``coeff * atom_1 * ... * atom_k``. Atoms are the expressions the linear algebra cannot see
into (variables, ``floordiv``/``floormod``, ``min``/``max``, loads, calls, casts). Equal monomials
are merged by a structural key (`expr_key`), so ``i*4 + j - i*4`` is ``j``. Terms keep the order of
their first appearance, so the output is deterministic and reads like the input (``i * 4 + j``
stays ``i * 4 + j``); negative terms are printed last as subtractions.

Example:
    >>> from ingot.ir import Var
    >>> i, j = Var("i"), Var("j")
    >>> str(SumForm.from_expr(i * 4 + j - i * 4 + 3).to_expr())
    'j + 3'
"""
from __future__ import annotations

from typing import Any

from ingot.ir.dtype import DataType
from ingot.ir.expr import Add, IntImm, Mul, PrimExpr, Sub, Var
from ingot.ir.node import Node

_KEY_CACHE: dict[int, tuple[Any, Any]] = {}
_KEY_CACHE_LIMIT = 200_000
# The form each `SumForm.to_expr` result parses back to (id -> (expr, form)). The simplifier turns
# every integer ``+ - *`` node into a form and back, and the parent node parses the child's result
# again: without this memo a sum of n terms is re-walked at each of its n levels.
_FORM_CACHE: dict[int, tuple[Any, "SumForm"]] = {}
_FORM_CACHE_LIMIT = 100_000
# Tests set this to check every memo hit against a fresh parse (the memo must change nothing).
VERIFY_FORM_CACHE = False


def expr_key(expr: Any) -> Any:
    """A hashable key equal for structurally equal expressions (free variables by identity).

    Example:
        >>> from ingot.ir import Var
        >>> x = Var("x")
        >>> expr_key(x + 1) == expr_key(x + 1), expr_key(x + 1) == expr_key(Var("x") + 1)
        (True, False)
    """
    if isinstance(expr, Var):
        # Tuples compare elements by identity first, and Var equality is identity: safe as a key.
        return ("var", expr)
    cached = _KEY_CACHE.get(id(expr))
    if cached is not None and cached[0] is expr:
        return cached[1]
    if isinstance(expr, IntImm):
        key: Any = ("int", str(expr.dtype), expr.value)
    elif isinstance(expr, Node) and not isinstance(expr, PrimExpr) and type(expr).__name__ == "Buffer":
        key = ("buffer", expr)
    elif isinstance(expr, Node):
        parts: list[Any] = [type(expr).__name__, str(getattr(expr, "dtype", ""))]
        for name in expr._fields:
            parts.append(_field_key(getattr(expr, name)))
        key = tuple(parts)
    else:
        key = _field_key(expr)
    if len(_KEY_CACHE) > _KEY_CACHE_LIMIT:
        _KEY_CACHE.clear()
    _KEY_CACHE[id(expr)] = (expr, key)
    return key


def same_key(a: Any, b: Any) -> bool:
    """``expr_key(a) == expr_key(b)``, decided by walking both trees together: no key tuples are
    built (the simplifier's fixed-point test compares two fresh trees each round), and shared
    subtrees are equal at once.

    Example:
        >>> from ingot.ir import Var
        >>> x = Var("x")
        >>> same_key(x * 2 + 1, x * 2 + 1), same_key(x + 1, x + 2)
        (True, False)
    """
    if VERIFY_FORM_CACHE:
        expected = expr_key(a) == expr_key(b)
        if _same_key(a, b) != expected:
            raise AssertionError(f"same_key({a}, {b}) disagrees with expr_key equality ({expected})")
    return _same_key(a, b)


def _same_key(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, Var) or isinstance(b, Var):
        return False  # a variable's key is the variable itself
    if isinstance(a, IntImm) or isinstance(b, IntImm):
        return (isinstance(a, IntImm) and isinstance(b, IntImm) and a.value == b.value
                and str(a.dtype) == str(b.dtype))
    if not (isinstance(a, Node) and isinstance(b, Node)) or type(a).__name__ == "Buffer" \
            or type(b).__name__ == "Buffer" or type(a).__name__ != type(b).__name__:
        return expr_key(a) == expr_key(b)
    if str(getattr(a, "dtype", "")) != str(getattr(b, "dtype", "")) or len(a._fields) != len(b._fields):
        return False
    return all(_same_field(getattr(a, fa), getattr(b, fb)) for fa, fb in zip(a._fields, b._fields))


def _same_field(x: Any, y: Any) -> bool:
    if x is y:
        return True
    if isinstance(x, PrimExpr) and isinstance(y, PrimExpr):
        return _same_key(x, y)
    if isinstance(x, tuple) and isinstance(y, tuple):
        return len(x) == len(y) and all(_same_field(u, v) for u, v in zip(x, y))
    return _field_key(x) == _field_key(y)


def _field_key(value: Any) -> Any:
    if isinstance(value, PrimExpr):
        return expr_key(value)
    if isinstance(value, Node):
        # Buffers and other definitions are compared by identity (the same buffer object).
        return ("node", value)
    if isinstance(value, tuple):
        return tuple(_field_key(v) for v in value)
    if isinstance(value, DataType):
        return str(value)
    return value


def const_like(value: int, dtype: DataType) -> IntImm:
    """An `IntImm` of ``dtype`` (bool results come back as int of the same dtype only for ints)."""
    return IntImm(dtype, int(value))


class SumForm:
    """``const + sum(coeff * monomial)`` over integers of one dtype; a monomial is a tuple of atoms.

    ``terms`` maps a monomial key (a frozenset of (atom key, power)) to ``[coeff, atoms]``; dict
    order is first appearance. SumForms are values: every operation returns a new one.

    Example:
        >>> from ingot.ir import Var
        >>> x = Var("x")
        >>> s = SumForm.from_expr(x * 2 + 1).mul_const(3)
        >>> str(s.to_expr())
        'x * 6 + 3'
    """

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, dtype: DataType, terms: "dict | None" = None, const: int = 0):
        self.dtype = dtype if type(dtype) is DataType else DataType(dtype)
        self.terms: dict[Any, list] = terms if terms is not None else {}
        self.const = int(const)

    # -- construction ------------------------------------------------------------------------------
    @staticmethod
    def atom(expr: PrimExpr) -> "SumForm":
        """The form of one opaque atom (coefficient 1)."""
        return SumForm(expr.dtype, {_mono_key((expr,)): [1, (expr,)]}, 0)

    @staticmethod
    def constant(value: int, dtype: DataType) -> "SumForm":
        return SumForm(dtype, {}, value)

    @staticmethod
    def from_expr(expr: PrimExpr) -> "SumForm":
        """Flatten the ``+ - *`` layers of ``expr``; everything else becomes an atom.

        Example:
            >>> from ingot.ir import Var
            >>> i = Var("i")
            >>> SumForm.from_expr((i + 1) * 4).const
            4
        """
        handler = _FROM_EXPR.get(type(expr))
        if handler is None:
            return SumForm.atom(expr)
        hit = _FORM_CACHE.get(id(expr))
        if hit is not None and hit[0] is expr:
            if VERIFY_FORM_CACHE:
                _check_same_form(hit[1], handler(expr), expr)
            return hit[1].copy()
        return handler(expr)

    def copy(self) -> "SumForm":
        return SumForm(self.dtype, {k: list(v) for k, v in self.terms.items()}, self.const)

    # -- arithmetic --------------------------------------------------------------------------------
    def add(self, other: "SumForm", sign: int = 1) -> "SumForm":
        """``self + sign * other``."""
        out = self.copy()
        for key, (coeff, atoms) in other.terms.items():
            entry = out.terms.get(key)
            if entry is None:
                out.terms[key] = [sign * coeff, atoms]
            else:
                entry[0] += sign * coeff
                if entry[0] == 0:
                    del out.terms[key]
        out.const += sign * other.const
        return out

    def mul_const(self, c: int) -> "SumForm":
        """``self * c``."""
        if c == 0:
            return SumForm(self.dtype)
        return SumForm(self.dtype, {k: [v[0] * c, v[1]] for k, v in self.terms.items()}, self.const * c)

    def mul(self, other: "SumForm") -> "SumForm":
        """Polynomial product (monomials multiply, coefficients multiply)."""
        if not other.terms:
            return self.mul_const(other.const)
        if not self.terms:
            return other.mul_const(self.const)
        out = SumForm(self.dtype)
        for c1, atoms1 in [*self.terms.values(), (self.const, ())]:
            for c2, atoms2 in [*other.terms.values(), (other.const, ())]:
                coeff = c1 * c2
                if coeff == 0:
                    continue
                atoms = atoms1 + atoms2
                if not atoms:
                    out.const += coeff
                    continue
                key = _mono_key(atoms)
                entry = out.terms.get(key)
                if entry is None:
                    out.terms[key] = [coeff, atoms]
                else:
                    entry[0] += coeff
                    if entry[0] == 0:
                        del out.terms[key]
        return out

    # -- queries -----------------------------------------------------------------------------------
    def is_const(self) -> bool:
        return not self.terms

    def coeff_gcd(self) -> int:
        """The gcd of all term coefficients (0 when there are none)."""
        from math import gcd

        g = 0
        for coeff, _ in self.terms.values():
            g = gcd(g, coeff)
        return abs(g)

    def without_const(self) -> "SumForm":
        return SumForm(self.dtype, {k: list(v) for k, v in self.terms.items()}, 0)

    def single_atom(self) -> "tuple[int, PrimExpr] | None":
        """(coeff, atom) when the form is ``coeff * atom`` exactly (no constant)."""
        if self.const != 0 or len(self.terms) != 1:
            return None
        coeff, atoms = next(iter(self.terms.values()))
        return (coeff, atoms[0]) if len(atoms) == 1 else None

    # -- back to an expression ---------------------------------------------------------------------
    def to_expr(self) -> PrimExpr:
        """The expression: positive terms in order, then negative ones subtracted, constant last."""
        dtype = self.dtype
        positive = [(c, a) for c, a in self.terms.values() if c > 0]
        negative = [(-c, a) for c, a in self.terms.values() if c < 0]
        result: "PrimExpr | None" = None
        for coeff, atoms in positive:
            term = _monomial(coeff, atoms, dtype)
            result = term if result is None else _binary(Add, result, term)
        if result is None and negative:
            if self.const > 0:
                result = _imm(dtype, self.const)
                for coeff, atoms in negative:
                    result = _binary(Sub, result, _monomial(coeff, atoms, dtype))
                return result
            coeff, atoms = negative.pop(0)
            result = _monomial(-coeff, atoms, dtype)
        for coeff, atoms in negative:
            result = _binary(Sub, result, _monomial(coeff, atoms, dtype))
        if result is None:
            return _imm(dtype, self.const)
        if self.const > 0:
            result = _binary(Add, result, _imm(dtype, self.const))
        elif self.const < 0:
            result = _binary(Sub, result, _imm(dtype, -self.const))
        self._remember_as(result)
        return result

    def _remember_as(self, result: PrimExpr) -> None:
        """Memoize the form ``from_expr(result)`` gives (see `reparsed`)."""
        form = self.reparsed()
        if form is None or (result.dtype is not self.dtype and result.dtype != self.dtype):
            return
        if len(_FORM_CACHE) > _FORM_CACHE_LIMIT:
            _FORM_CACHE.clear()
        _FORM_CACHE[id(result)] = (result, form)

    def reparsed(self) -> "SumForm | None":
        """The form ``SumForm.from_expr(self.to_expr())`` returns, without building the expression:
        this one with its terms in emitted order (positive terms first, then negative ones, no zero
        coefficients). None when an atom would parse further (an atom that is itself ``+ - *``)."""
        dtype = self.dtype
        terms: dict[Any, list] = {}
        negative = []
        for key, entry in self.terms.items():
            coeff, atoms = entry
            if coeff == 0:
                continue
            for a in atoms:
                if type(a) in _FROM_EXPR or (a.dtype is not dtype and a.dtype != dtype):
                    return None
            if coeff > 0:
                terms[key] = [coeff, atoms]
            else:
                negative.append((key, coeff, atoms))
        for key, coeff, atoms in negative:
            terms[key] = [coeff, atoms]
        return SumForm(dtype, terms, self.const)

    def __repr__(self) -> str:
        return f"SumForm({self.to_expr()})"


def _check_same_form(memo: SumForm, parsed: SumForm, expr: PrimExpr) -> None:
    def items(f: SumForm) -> list:
        return [(k, c, a) for k, (c, a) in f.terms.items()]

    same = memo.dtype == parsed.dtype and memo.const == parsed.const and items(memo) == items(parsed)
    # Atoms compare by identity (`==` on expressions builds EQ, whose truth is identity).
    if not same:
        raise AssertionError(f"SumForm memo of `{expr}` differs from its parse: {memo.terms} vs {parsed.terms}")


def _mono_key(atoms: tuple) -> frozenset:
    counts: dict[Any, int] = {}
    for atom in atoms:
        key = expr_key(atom)
        counts[key] = counts.get(key, 0) + 1
    return frozenset(counts.items())


def _monomial(coeff: int, atoms: tuple, dtype: DataType) -> PrimExpr:
    result: PrimExpr = atoms[0]
    for atom in atoms[1:]:
        result = _binary(Mul, result, atom)
    if coeff != 1:
        result = _binary(Mul, result, _imm(dtype, coeff))
    return result


def _binary(cls: type, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``cls(a, b)`` for operands that are already expressions: the same node as the constructor
    builds (fields a, b, dtype; no span), without its argument conversion. Node construction is
    most of the simplifier's time, and `SumForm.to_expr` builds a node per term."""
    if a.dtype is not b.dtype and a.dtype != b.dtype:
        return cls(a, b)  # the constructor's error names both operands
    node = object.__new__(cls)
    _set(node, "a", a)
    _set(node, "b", b)
    _set(node, "dtype", a.dtype)
    _set(node, "span", None)
    return node


def _imm(dtype: DataType, value: int) -> IntImm:
    """``IntImm(dtype, value)`` for an integer ``dtype`` (see `_binary`)."""
    if not isinstance(dtype, DataType) or not (dtype.is_integer or dtype.is_bool):
        return IntImm(dtype, value)
    node = object.__new__(IntImm)
    _set(node, "dtype", dtype)
    _set(node, "value", int(value))
    _set(node, "span", None)
    return node


_set = object.__setattr__


def _from_add(expr: Add) -> SumForm:
    return SumForm.from_expr(expr.a).add(SumForm.from_expr(expr.b))


def _from_sub(expr: Sub) -> SumForm:
    return SumForm.from_expr(expr.a).add(SumForm.from_expr(expr.b), -1)


def _from_mul(expr: Mul) -> SumForm:
    return SumForm.from_expr(expr.a).mul(SumForm.from_expr(expr.b))


def _from_int(expr: IntImm) -> SumForm:
    return SumForm.constant(expr.value, expr.dtype)


_FROM_EXPR = {Add: _from_add, Sub: _from_sub, Mul: _from_mul, IntImm: _from_int}

__all__ = ["SumForm", "expr_key", "same_key"]
