"""Helpers for the arith tests: evaluate an expression at a point (Python semantics)."""
from __future__ import annotations

from ingot.ir import expr as E


def _truncdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_BIN = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b, E.Div: _truncdiv,
    E.Mod: lambda a, b: a - b * _truncdiv(a, b), E.Min: min, E.Max: max,
    E.LT: lambda a, b: int(a < b), E.LE: lambda a, b: int(a <= b), E.GT: lambda a, b: int(a > b),
    E.GE: lambda a, b: int(a >= b), E.EQ: lambda a, b: int(a == b), E.NE: lambda a, b: int(a != b),
    E.And: lambda a, b: int(bool(a) and bool(b)), E.Or: lambda a, b: int(bool(a) or bool(b)),
}


def evaluate(expr, env: dict) -> int:
    """The integer value of ``expr`` with variables from ``env`` (keyed by the Var object)."""
    if isinstance(expr, E.Var):
        for var, value in env.items():
            if var is expr:
                return value
        raise KeyError(expr.name)
    if isinstance(expr, (E.IntImm, E.FloatImm)):
        return expr.value
    fn = _BIN.get(type(expr))
    if fn is not None:
        return fn(evaluate(expr.a, env), evaluate(expr.b, env))
    if isinstance(expr, E.Not):
        return int(not evaluate(expr.a, env))
    if isinstance(expr, E.Select):
        return evaluate(expr.true_value if evaluate(expr.condition, env) else expr.false_value, env)
    if isinstance(expr, E.Cast):
        return evaluate(expr.value, env)
    if isinstance(expr, E.Call) and expr.op == "if_then_else":
        c, t, f = expr.args
        return evaluate(t if evaluate(c, env) else f, env)
    raise TypeError(f"cannot evaluate {type(expr).__name__}: {expr}")
