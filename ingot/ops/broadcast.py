"""Binary operators with numpy broadcasting (arithmetic, comparisons) and ``where``.

Operands are TE tensors or scalars (Python numbers / `PrimExpr`), which are inlined as constants.

Example:
    >>> from ingot import te
    >>> x = te.placeholder((4, 3), name="x")
    >>> b = te.placeholder((3,), name="b")
    >>> y = add(x, b)
    >>> len(y.shape)
    2
"""
from __future__ import annotations

from typing import Any, Callable

from ingot import tir
from ingot.ir import EQ, NE, PrimExpr, const

from ._util import broadcast_index, broadcast_shape, compute


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "op")


def _dtype_of(a: Any, b: Any) -> str:
    for v in (a, b):
        if _is_tensor(v) or isinstance(v, PrimExpr):
            return str(v.dtype)
    return "float32"


def binary(a: Any, b: Any, f: Callable[[Any, Any], Any], name: str) -> Any:
    """``f(a[i'], b[i''])`` over the broadcast shape of ``a`` and ``b``.

    Example:
        >>> from ingot import te
        >>> y = binary(te.placeholder((2, 1), name="a"), te.placeholder((3,), name="b"), lambda u, v: u * v, "T_mul")
    """
    dtype = _dtype_of(a, b)
    shapes = [v.shape for v in (a, b) if _is_tensor(v)]
    out_shape = broadcast_shape(*shapes) if shapes else ()

    def value(v: Any, idx: tuple) -> Any:
        if _is_tensor(v):
            return v[broadcast_index(v, out_shape, idx)]
        return v if isinstance(v, PrimExpr) else const(v, dtype)

    return compute(out_shape, lambda idx: f(value(a, idx), value(b, idx)), name, tag="broadcast")


def _make(name: str, f: Callable[[Any, Any], Any], doc: str) -> Callable[[Any, Any], Any]:
    def op(a: Any, b: Any) -> Any:
        return binary(a, b, f, f"T_{name}")

    op.__name__ = name
    op.__doc__ = f"""{doc} with numpy broadcasting.

    Example:
        >>> from ingot import te
        >>> y = {name}(te.placeholder((4, 3), name="a"), te.placeholder((3,), name="b"))
    """
    return op


add = _make("add", lambda u, v: u + v, "``a + b``")
subtract = _make("subtract", lambda u, v: u - v, "``a - b``")
multiply = _make("multiply", lambda u, v: u * v, "``a * b``")
divide = _make("divide", lambda u, v: u / v, "``a / b`` (true division for floats, truncation for ints)")
floor_divide = _make("floor_divide", tir.floordiv, "``a // b`` (floor division)")
mod = _make("mod", tir.truncmod, "``fmod(a, b)`` / C's ``a % b`` (the remainder has the sign of ``a``)")
floor_mod = _make("floor_mod", tir.floormod, "Python's ``a % b`` (the remainder has the sign of ``b``)")
power = _make("power", tir.pow, "``a ** b``")
maximum = _make("maximum", tir.max, "``max(a, b)``")
minimum = _make("minimum", tir.min, "``min(a, b)``")
equal = _make("equal", EQ, "``a == b``")
not_equal = _make("not_equal", NE, "``a != b``")
less = _make("less", lambda u, v: u < v, "``a < b``")
less_equal = _make("less_equal", lambda u, v: u <= v, "``a <= b``")
greater = _make("greater", lambda u, v: u > v, "``a > b``")
greater_equal = _make("greater_equal", lambda u, v: u >= v, "``a >= b``")


def where(cond: Any, a: Any, b: Any) -> Any:
    """``a`` where ``cond`` else ``b``, all three broadcast together.

    Example:
        >>> from ingot import te
        >>> c = te.placeholder((4,), name="c", dtype="bool")
        >>> y = where(c, te.placeholder((4,), name="a"), te.placeholder((1,), name="b"))
    """
    dtype = _dtype_of(a, b)
    shapes = [v.shape for v in (cond, a, b) if _is_tensor(v)]
    out_shape = broadcast_shape(*shapes)

    def value(v: Any, idx: tuple) -> Any:
        if _is_tensor(v):
            return v[broadcast_index(v, out_shape, idx)]
        return v if isinstance(v, PrimExpr) else const(v, dtype)

    return compute(out_shape, lambda idx: tir.Select(value(cond, idx), value(a, idx), value(b, idx)),
                   "T_where", tag="broadcast")
