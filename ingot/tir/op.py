"""Math intrinsics and expression helpers (``exp``, ``sqrt``, ``if_then_else``, ``all``...).

Each builds a `Call` whose ``op`` the code generators map to C/CUDA through their tables.

Example:
    >>> from ingot.ir import Var
    >>> x = Var("x", "float32")
    >>> str(exp(x) + sigmoid(x))
    'T.exp(x) + T.sigmoid(x)'
"""
from __future__ import annotations

from functools import reduce as _reduce
from typing import Any

from ingot.ir.dtype import DataType
from ingot.ir.expr import (
    And, Call, FloorDiv, FloorMod, Div, Max, Min, Mod, Or, PrimExpr, Select, StringImm, _arith, _promote,
    cast, const, convert,
)

# Intrinsics defined on floating-point values: name -> number of arguments.
FLOAT_INTRINSICS = {
    "exp": 1, "exp2": 1, "exp10": 1, "expm1": 1, "log": 1, "log2": 1, "log10": 1, "log1p": 1,
    "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1, "erf": 1, "sin": 1, "cos": 1, "tan": 1,
    "asin": 1, "acos": 1, "atan": 1, "sinh": 1, "cosh": 1, "asinh": 1, "acosh": 1, "atanh": 1,
    "floor": 1, "ceil": 1, "round": 1, "trunc": 1, "nearbyint": 1, "pow": 2, "atan2": 2, "fmod": 2,
    "isnan": 1, "isinf": 1, "isfinite": 1, "copysign": 2, "hypot": 2,
}
# Intrinsics on any numeric type.
GENERIC_INTRINSICS = {"abs": 1, "if_then_else": 3, "likely": 1}
# Intrinsics on integers.
INTEGER_INTRINSICS = {
    "bitwise_and": 2, "bitwise_or": 2, "bitwise_xor": 2, "bitwise_not": 1, "shift_left": 2,
    "shift_right": 2, "popcount": 1, "clz": 1,
}
# Calls with special argument conventions.
SPECIAL_INTRINSICS = {"call_extern", "call_pure_extern", "reinterpret"}
ALL_INTRINSICS = set(FLOAT_INTRINSICS) | set(GENERIC_INTRINSICS) | set(INTEGER_INTRINSICS) | SPECIAL_INTRINSICS
_PREDICATES = {"isnan", "isinf", "isfinite"}


def _float_call(name: str, *args: Any) -> PrimExpr:
    values = [convert(a) for a in args]
    if len(values) == 2:
        values = list(_promote(values[0], values[1]))
    for v in values:
        if not v.dtype.is_float:
            raise TypeError(
                f"T.{name} needs a floating-point argument, got `{v}` of dtype {v.dtype}; "
                f"cast it first, e.g. x.astype(\"float32\")"
            )
    dtype = DataType("bool").with_lanes(values[0].dtype.lanes) if name in _PREDICATES else values[0].dtype
    return Call(dtype, name, values)


def _make_float_intrinsic(name: str, arity: int):
    def intrinsic(*args: Any) -> PrimExpr:
        if len(args) != arity:
            raise TypeError(f"T.{name} takes {arity} argument(s), got {len(args)}")
        return _float_call(name, *args)

    intrinsic.__name__ = name
    intrinsic.__doc__ = f"""``{name}`` of floating-point expressions (a `Call` to the ``{name}`` intrinsic).

    Example:
        >>> from ingot.ir import Var
        >>> str({name}({', '.join(['Var("x", "float32")'] * arity)}).dtype)
        '{'bool' if name in _PREDICATES else 'float32'}'
    """
    return intrinsic


for _name, _arity in FLOAT_INTRINSICS.items():
    globals()[_name] = _make_float_intrinsic(_name, _arity)

power = globals()["pow"]


def abs(x: Any) -> PrimExpr:  # noqa: A001 - TVM's name
    """Absolute value (integers and floats).

    Example:
        >>> from ingot.ir import Var
        >>> str(abs(Var("i")))
        'T.abs(i)'
    """
    x = convert(x)
    if x.dtype.is_uint or x.dtype.is_bool:
        return x
    return Call(x.dtype, "abs", [x])


def if_then_else(cond: Any, t: Any, f: Any) -> PrimExpr:
    """``t`` if ``cond`` else ``f``, evaluating only the chosen branch (safe for guarded loads).

    Example:
        >>> from ingot.ir import Var
        >>> i = Var("i")
        >>> str(if_then_else(i < 4, i, 0))
        'T.if_then_else(i < 4, i, 0)'
    """
    cond = convert(cond)
    t, f = _promote(t, f)
    return Call(t.dtype, "if_then_else", [cond, t, f])


def select(cond: Any, t: Any, f: Any) -> PrimExpr:
    """``t`` if ``cond`` else ``f`` (both may be evaluated): a `Select` node."""
    return Select(cond, t, f)


def likely(cond: Any) -> PrimExpr:
    """Mark a condition as usually true (a hint for code generation)."""
    cond = convert(cond)
    return Call(cond.dtype, "likely", [cond])


def min(a: Any, b: Any, *rest: Any) -> PrimExpr:  # noqa: A001
    """Minimum of expressions.

    Example:
        >>> from ingot.ir import Var
        >>> str(min(Var("i"), 4))
        'T.min(i, 4)'
    """
    return _reduce(lambda x, y: _arith(Min, x, y), (b, *rest), a)


def max(a: Any, b: Any, *rest: Any) -> PrimExpr:  # noqa: A001
    """Maximum of expressions."""
    return _reduce(lambda x, y: _arith(Max, x, y), (b, *rest), a)


def floordiv(a: Any, b: Any) -> PrimExpr:
    """``a // b`` rounding toward negative infinity."""
    return _arith(FloorDiv, a, b)


def floormod(a: Any, b: Any) -> PrimExpr:
    """``a % b`` with the sign of ``b``."""
    return _arith(FloorMod, a, b)


def truncdiv(a: Any, b: Any) -> PrimExpr:
    """Integer division rounding toward zero (C's ``/``)."""
    return _arith(Div, a, b)


def truncmod(a: Any, b: Any) -> PrimExpr:
    """Remainder with the sign of ``a`` (C's ``%``)."""
    return _arith(Mod, a, b)


def div(a: Any, b: Any) -> PrimExpr:
    """``a / b`` (true division for floats)."""
    return _arith(Div, a, b)


def all(*conds: Any) -> PrimExpr:  # noqa: A001
    """Logical and of conditions (True for none).

    Example:
        >>> from ingot.ir import Var
        >>> i = Var("i")
        >>> str(all(i < 4, i >= 0))
        'i < 4 and i >= 0'
    """
    conds = [convert(c) for c in conds]
    if not conds:
        return const(True, "bool")
    return _reduce(And, conds[1:], conds[0])


def any(*conds: Any) -> PrimExpr:  # noqa: A001
    """Logical or of conditions (False for none)."""
    conds = [convert(c) for c in conds]
    if not conds:
        return const(False, "bool")
    return _reduce(Or, conds[1:], conds[0])


def call_extern(dtype: "str | DataType", func_name: str, *args: Any) -> PrimExpr:
    """A call to an external C function ``func_name`` returning ``dtype``.

    Example:
        >>> str(call_extern("float32", "my_fn", 1.0).args[0])
        '"my_fn"'
    """
    return Call(dtype, "call_extern", [StringImm(func_name), *args])


def reinterpret(dtype: "str | DataType", value: Any) -> PrimExpr:
    """Reinterpret the bits of ``value`` as ``dtype`` (same width)."""
    return Call(dtype, "reinterpret", [value])


def Cast(dtype: "str | DataType", value: Any) -> PrimExpr:  # noqa: N802 - TVMScript spelling
    """``value`` converted to ``dtype``."""
    return cast(value, dtype)
