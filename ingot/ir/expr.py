"""Scalar expressions (``PrimExpr``) shared by TensorIR, TE and the integer analyzer.

Note: expressions live in `ingot.ir` (not `ingot.tir`) so that `ingot.arith` can analyze them
while `ingot.tir` uses `ingot.arith` for lowering; `ingot.tir` re-exports every name here.

Python operators build expressions, following TVM: ``+ - *`` build `Add`/`Sub`/`Mul`; ``/`` builds
`Div` (true division for floats, C truncation for integers); ``//`` and ``%`` build `FloorDiv` and
`FloorMod`; comparisons build `LT`, `LE`, ...; ``a == b`` builds an `EqualOp` that acts as
``a.same_as(b)`` in ``if`` and as the `EQ` node when used as an expression. Constants are folded
when both sides are constants, and mixed types are promoted (int → float, narrow → wide).

Example:
    >>> i = Var("i", "int32")
    >>> str(i * 4 + 2)
    'i * 4 + 2'
    >>> str((i // 4) % 8)
    'i // 4 % 8'
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

from .dtype import DataType
from .node import Node


class PrimExpr(Node):
    """Base of scalar expressions; every expression has a ``dtype``."""

    __slots__ = ("dtype",)

    # -- arithmetic ------------------------------------------------------------------------------
    def __add__(self, other):
        return _arith(Add, self, other)

    def __radd__(self, other):
        return _arith(Add, other, self)

    def __sub__(self, other):
        return _arith(Sub, self, other)

    def __rsub__(self, other):
        return _arith(Sub, other, self)

    def __mul__(self, other):
        return _arith(Mul, self, other)

    def __rmul__(self, other):
        return _arith(Mul, other, self)

    def __truediv__(self, other):
        return _arith(Div, self, other)

    def __rtruediv__(self, other):
        return _arith(Div, other, self)

    def __floordiv__(self, other):
        return _arith(FloorDiv, self, other)

    def __rfloordiv__(self, other):
        return _arith(FloorDiv, other, self)

    def __mod__(self, other):
        return _arith(FloorMod, self, other)

    def __rmod__(self, other):
        return _arith(FloorMod, other, self)

    def __neg__(self):
        if isinstance(self, IntImm):
            return IntImm(self.dtype, -self.value)
        if isinstance(self, FloatImm):
            return FloatImm(self.dtype, -self.value)
        return _arith(Sub, _const_like(0, self.dtype), self)

    # -- comparison ------------------------------------------------------------------------------
    def __lt__(self, other):
        return _compare(LT, self, other)

    def __le__(self, other):
        return _compare(LE, self, other)

    def __gt__(self, other):
        return _compare(GT, self, other)

    def __ge__(self, other):
        return _compare(GE, self, other)

    def __eq__(self, other):
        return EqualOp(self, other)

    def __ne__(self, other):
        return NotEqualOp(self, other)

    __hash__ = Node.__hash__

    # -- logic and bits ----------------------------------------------------------------------------
    def __and__(self, other):
        a, b = _promote(self, other)
        if a.dtype.is_bool:
            return And(a, b)
        return Call(a.dtype, "bitwise_and", (a, b))

    def __rand__(self, other):
        return convert(other).__and__(self)

    def __or__(self, other):
        a, b = _promote(self, other)
        if a.dtype.is_bool:
            return Or(a, b)
        return Call(a.dtype, "bitwise_or", (a, b))

    def __ror__(self, other):
        return convert(other).__or__(self)

    def __xor__(self, other):
        a, b = _promote(self, other)
        return Call(a.dtype, "bitwise_xor", (a, b))

    def __invert__(self):
        if self.dtype.is_bool:
            return Not(self)
        return Call(self.dtype, "bitwise_not", (self,))

    def __lshift__(self, other):
        a, b = _promote(self, other)
        return Call(a.dtype, "shift_left", (a, b))

    def __rshift__(self, other):
        a, b = _promote(self, other)
        return Call(a.dtype, "shift_right", (a, b))

    def __bool__(self):
        raise ValueError(
            f"cannot use the expression `{self}` as a Python bool; build a condition with "
            "ingot.tir.all/any/if_then_else, or compare structure with ingot.ir.structural_equal"
        )

    def __index__(self):
        if isinstance(self, IntImm):
            return self.value
        raise TypeError(f"expression `{self}` is not a constant integer")

    def astype(self, dtype: "str | DataType") -> "PrimExpr":
        """Cast to ``dtype`` (no-op if the type already matches).

        Example:
            >>> str(Var("i").astype("float32"))
            'T.Cast("float32", i)'
        """
        return cast(self, dtype)


# --------------------------------------------------------------------------------------------
# Leaves
# --------------------------------------------------------------------------------------------


class Var(PrimExpr):
    """A scalar variable: loop variable, shape symbol, block iteration variable, or parameter.

    Example:
        >>> n = Var("n", "int64")
        >>> str(n.dtype)
        'int64'
    """

    __slots__ = ("name",)
    _fields = ("name", "dtype")
    _attr_fields = ("dtype",)
    _ignored_fields = ("name",)

    def __init__(self, name: str = "v", dtype: "str | DataType" = "int32"):
        self._init(name=str(name), dtype=DataType(dtype))


class SizeVar(Var):
    """A variable known to be non-negative (a symbolic tensor dimension).

    Example:
        >>> m = SizeVar("m")
    """

    __slots__ = ()


class IntImm(PrimExpr):
    """An integer (or bool) constant.

    Example:
        >>> IntImm("int64", 3).value
        3
    """

    __slots__ = ("value",)
    _fields = ("dtype", "value")
    _attr_fields = ("dtype", "value")

    def __init__(self, dtype: "str | DataType", value: int):
        dtype = DataType(dtype)
        if not (dtype.is_integer or dtype.is_bool):
            raise TypeError(f"IntImm needs an integer or bool dtype, got {dtype}")
        self._init(dtype=dtype, value=int(value))


class FloatImm(PrimExpr):
    """A floating-point constant.

    Example:
        >>> FloatImm("float32", 0.5).value
        0.5
    """

    __slots__ = ("value",)
    _fields = ("dtype", "value")
    _attr_fields = ("dtype", "value")

    def __init__(self, dtype: "str | DataType", value: float):
        dtype = DataType(dtype)
        if not dtype.is_float:
            raise TypeError(f"FloatImm needs a float dtype, got {dtype}")
        self._init(dtype=dtype, value=float(value))


class StringImm(PrimExpr):
    """A string constant (an argument of extern calls)."""

    __slots__ = ("value",)
    _fields = ("value",)
    _attr_fields = ("value",)

    def __init__(self, value: str):
        self._init(value=str(value), dtype=DataType("handle"))


# --------------------------------------------------------------------------------------------
# Operations
# --------------------------------------------------------------------------------------------


class Cast(PrimExpr):
    """Convert ``value`` to ``dtype``."""

    __slots__ = ("value",)
    _fields = ("dtype", "value")
    _attr_fields = ("dtype",)

    def __init__(self, dtype: "str | DataType", value: PrimExpr):
        self._init(dtype=DataType(dtype), value=convert(value))


class BinaryOp(PrimExpr):
    """Base of two-operand arithmetic; ``a`` and ``b`` have the same dtype, which is the result's."""

    __slots__ = ("a", "b")
    _fields = ("a", "b")
    symbol = "?"

    def __init__(self, a: PrimExpr, b: PrimExpr):
        a, b = convert(a), convert(b)
        if a.dtype != b.dtype:
            raise TypeError(
                f"{type(self).__name__} operands must have the same dtype, got {a.dtype} ({a}) and "
                f"{b.dtype} ({b}); cast one side with .astype()"
            )
        self._init(a=a, b=b, dtype=a.dtype)


class Add(BinaryOp):
    __slots__ = ()
    symbol = "+"


class Sub(BinaryOp):
    __slots__ = ()
    symbol = "-"


class Mul(BinaryOp):
    __slots__ = ()
    symbol = "*"


class Div(BinaryOp):
    """Division: true division for floats, truncation toward zero for integers (as C)."""

    __slots__ = ()
    symbol = "/"


class Mod(BinaryOp):
    """Remainder with the sign of the dividend (as C's ``%``)."""

    __slots__ = ()
    symbol = "truncmod"


class FloorDiv(BinaryOp):
    """Division rounding toward negative infinity (Python's ``//``)."""

    __slots__ = ()
    symbol = "//"


class FloorMod(BinaryOp):
    """Remainder with the sign of the divisor (Python's ``%``)."""

    __slots__ = ()
    symbol = "%"


class Min(BinaryOp):
    __slots__ = ()
    symbol = "min"


class Max(BinaryOp):
    __slots__ = ()
    symbol = "max"


class CmpOp(PrimExpr):
    """Base of comparisons; the result is bool (with the operands' lanes)."""

    __slots__ = ("a", "b")
    _fields = ("a", "b")
    symbol = "?"

    def __init__(self, a: PrimExpr, b: PrimExpr):
        a, b = convert(a), convert(b)
        if a.dtype != b.dtype:
            raise TypeError(f"{type(self).__name__} operands differ in dtype: {a.dtype} vs {b.dtype}")
        self._init(a=a, b=b, dtype=DataType("bool").with_lanes(a.dtype.lanes))


class EQ(CmpOp):
    __slots__ = ()
    symbol = "=="


class NE(CmpOp):
    __slots__ = ()
    symbol = "!="


class LT(CmpOp):
    __slots__ = ()
    symbol = "<"


class LE(CmpOp):
    __slots__ = ()
    symbol = "<="


class GT(CmpOp):
    __slots__ = ()
    symbol = ">"


class GE(CmpOp):
    __slots__ = ()
    symbol = ">="


class And(PrimExpr):
    """Logical and of two bool expressions."""

    __slots__ = ("a", "b")
    _fields = ("a", "b")
    symbol = "and"

    def __init__(self, a: PrimExpr, b: PrimExpr):
        a, b = _as_bool(a), _as_bool(b)
        self._init(a=a, b=b, dtype=a.dtype)


class Or(PrimExpr):
    """Logical or of two bool expressions."""

    __slots__ = ("a", "b")
    _fields = ("a", "b")
    symbol = "or"

    def __init__(self, a: PrimExpr, b: PrimExpr):
        a, b = _as_bool(a), _as_bool(b)
        self._init(a=a, b=b, dtype=a.dtype)


class Not(PrimExpr):
    """Logical negation."""

    __slots__ = ("a",)
    _fields = ("a",)

    def __init__(self, a: PrimExpr):
        a = _as_bool(a)
        self._init(a=a, dtype=a.dtype)


class Select(PrimExpr):
    """``condition ? true_value : false_value``; both branches may be evaluated (use
    ``if_then_else`` when a branch may read out of bounds)."""

    __slots__ = ("condition", "true_value", "false_value")
    _fields = ("condition", "true_value", "false_value")

    def __init__(self, condition: PrimExpr, true_value: PrimExpr, false_value: PrimExpr):
        t, f = _promote(true_value, false_value)
        self._init(condition=_as_bool(condition), true_value=t, false_value=f, dtype=t.dtype)


class Ramp(PrimExpr):
    """The vector ``[base, base + stride, ..., base + (lanes-1) * stride]``."""

    __slots__ = ("base", "stride", "lanes")
    _fields = ("base", "stride", "lanes")
    _attr_fields = ("lanes",)

    def __init__(self, base: PrimExpr, stride: PrimExpr, lanes: int):
        base, stride = _promote(base, stride)
        self._init(base=base, stride=stride, lanes=int(lanes), dtype=base.dtype.with_lanes(int(lanes)))


class Broadcast(PrimExpr):
    """``value`` repeated in ``lanes`` lanes."""

    __slots__ = ("value", "lanes")
    _fields = ("value", "lanes")
    _attr_fields = ("lanes",)

    def __init__(self, value: PrimExpr, lanes: int):
        value = convert(value)
        self._init(value=value, lanes=int(lanes), dtype=value.dtype.with_lanes(int(lanes)))


class Let(PrimExpr):
    """``let var = value in body``."""

    __slots__ = ("var", "value", "body")
    _fields = ("var", "value", "body")
    _def_fields = ("var",)

    def __init__(self, var: Var, value: PrimExpr, body: PrimExpr):
        body = convert(body)
        self._init(var=var, value=convert(value), body=body, dtype=body.dtype)


class Call(PrimExpr):
    """A call of an intrinsic (``op`` names it: ``"exp"``, ``"if_then_else"``, ``"call_extern"``, ...).

    The code generator maps each ``op`` to C through a table; an unknown name is rejected there.

    Example:
        >>> x = Var("x", "float32")
        >>> str(Call("float32", "exp", [x]))
        'T.exp(x)'
    """

    __slots__ = ("op", "args")
    _fields = ("dtype", "op", "args")
    _attr_fields = ("dtype", "op")

    def __init__(self, dtype: "str | DataType", op: str, args: Sequence[Any]):
        self._init(dtype=DataType(dtype), op=str(op), args=tuple(convert(a) for a in args))


class BufferLoad(PrimExpr):
    """``buffer[indices]``; an index that is a `Ramp` loads a vector.

    Example:
        >>> from ingot.ir.buffer import decl_buffer
        >>> A = decl_buffer((4, 4), "float32", "A")
        >>> str(A[1, Var("j")])
        'A[1, j]'
    """

    __slots__ = ("buffer", "indices")
    _fields = ("buffer", "indices")

    def __init__(self, buffer, indices: Sequence[Any]):
        indices = tuple(convert(i) for i in indices)
        lanes = max([i.dtype.lanes for i in indices] or [1])
        self._init(buffer=buffer, indices=indices, dtype=buffer.dtype.with_lanes(lanes * buffer.dtype.lanes))


# --------------------------------------------------------------------------------------------
# Ranges and iteration variables
# --------------------------------------------------------------------------------------------


class Range(Node):
    """The half-open interval ``[min, min + extent)``.

    Example:
        >>> r = Range.from_min_extent(0, 16)
        >>> r.extent.value
        16
    """

    __slots__ = ("min", "extent")
    _fields = ("min", "extent")

    def __init__(self, begin: Any, end: Any = None):
        if end is None:
            begin, end = 0, begin
        begin, end = _promote(begin, end)
        self._init(min=begin, extent=simplify_const(end - begin))

    @staticmethod
    def from_min_extent(min_value: Any, extent: Any) -> "Range":
        """The range ``[min_value, min_value + extent)``."""
        r = object.__new__(Range)
        a, b = _promote(min_value, extent)
        r._init(min=a, extent=b)
        return r


class IterVar(Node):
    """A variable with a domain and a kind.

    ``kind`` is ``"S"`` (spatial / data parallel), ``"R"`` (reduction), ``"O"`` (opaque) or
    ``"T"`` (thread index, with ``thread_tag`` such as ``"threadIdx.x"``).

    Example:
        >>> k = IterVar(Range.from_min_extent(0, 128), Var("k"), "R")
        >>> k.kind
        'R'
    """

    __slots__ = ("dom", "var", "kind", "thread_tag")
    _fields = ("dom", "var", "kind", "thread_tag")
    _attr_fields = ("kind", "thread_tag")
    _def_fields = ("var",)
    KINDS = ("S", "R", "O", "T")

    def __init__(self, dom: "Range | None", var: Var, kind: str = "S", thread_tag: str = ""):
        if kind not in self.KINDS:
            raise ValueError(f"IterVar kind must be one of {self.KINDS}, got {kind!r}")
        self._init(dom=dom, var=var, kind=kind, thread_tag=thread_tag)

    # Let an IterVar stand for its variable in expressions (as TE's axes do).
    def _as_expr(self) -> Var:
        return self.var


def _forward_to_var(name: str):
    def method(self, *args):
        return getattr(self.var, name)(*args)

    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
              "__rfloordiv__", "__mod__", "__rmod__", "__truediv__", "__lt__", "__le__", "__gt__", "__ge__",
              "__neg__", "astype"):
    setattr(IterVar, _name, _forward_to_var(_name))


# --------------------------------------------------------------------------------------------
# Equality helpers (TVM semantics: ``==`` builds a node that still works in ``if``)
# --------------------------------------------------------------------------------------------


class EqualOp:
    """Result of ``a == b`` on expressions: truthy iff ``a is b``; an `EQ` node as an expression."""

    __slots__ = ("a", "b")
    node_type = EQ

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __bool__(self):
        return self.a is self.b

    def asobject(self) -> PrimExpr:
        return _compare(self.node_type, self.a, self.b)

    def __and__(self, other):
        return self.asobject() & other

    def __or__(self, other):
        return self.asobject() | other

    def __invert__(self):
        return ~self.asobject()

    def __repr__(self):
        return repr(self.asobject())


class NotEqualOp(EqualOp):
    """Result of ``a != b`` on expressions: truthy iff ``a is not b``; an `NE` node as an expression."""

    __slots__ = ()
    node_type = NE

    def __bool__(self):
        return self.a is not self.b


# --------------------------------------------------------------------------------------------
# Construction helpers
# --------------------------------------------------------------------------------------------


def const(value: Any, dtype: "str | DataType | None" = None) -> PrimExpr:
    """A constant of ``dtype`` (inferred from the Python value when omitted).

    Example:
        >>> str(const(1.5).dtype), str(const(3, "int64").dtype)
        ('float32', 'int64')
    """
    if dtype is None:
        return convert(value)
    dtype = DataType(dtype)
    if dtype.lanes > 1:
        return Broadcast(const(value, dtype.element_of()), dtype.lanes)
    if dtype.is_float:
        return FloatImm(dtype, float(value))
    if dtype.is_bool:
        return IntImm(dtype, 1 if value else 0)
    if dtype.is_integer:
        if isinstance(value, float) and not float(value).is_integer():
            raise TypeError(f"cannot make an {dtype} constant from {value}")
        return IntImm(dtype, int(value))
    raise TypeError(f"cannot make a constant of dtype {dtype}")


def convert(value: Any) -> PrimExpr:
    """Turn a Python/numpy scalar (or an `EqualOp`, `IterVar`) into a `PrimExpr`.

    Example:
        >>> str(convert(3).dtype), str(convert(True).dtype)
        ('int32', 'bool')
    """
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, EqualOp):
        return value.asobject()
    if isinstance(value, IterVar):
        return value.var
    if isinstance(value, (bool,)):
        return IntImm("bool", int(value))
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "shape", None) == ():
        return const(value.item(), str(value.dtype))
    if isinstance(value, numbers.Integral):
        v = int(value)
        return IntImm("int32" if -(2**31) <= v < 2**31 else "int64", v)
    if isinstance(value, numbers.Real):
        return FloatImm("float32", float(value))
    if isinstance(value, str):
        return StringImm(value)
    raise TypeError(f"cannot convert {value!r} of type {type(value).__name__} to an expression")


def _const_like(value: Any, dtype: DataType) -> PrimExpr:
    """A Python scalar as a constant that matches ``dtype`` where it can without losing value."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, (EqualOp, IterVar)):
        return convert(value)
    if isinstance(value, bool):
        return IntImm("bool", int(value))
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if dtype.is_integer or dtype.is_float:
            return const(value, dtype.element_of())
    if isinstance(value, numbers.Real) and dtype.is_float:
        return const(value, dtype.element_of())
    return convert(value)


def _unify(a: PrimExpr, b: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
    ta, tb = a.dtype, b.dtype
    if ta == tb:
        return a, b
    ea, eb = ta.element_of(), tb.element_of()
    if ea != eb:
        if ea.is_float and not eb.is_float:
            target = ea
        elif eb.is_float and not ea.is_float:
            target = eb
        elif ea.is_bool:
            target = eb
        elif eb.is_bool:
            target = ea
        else:
            code = "float" if ea.is_float else ("int" if "int" in (ea.code, eb.code) else ea.code)
            if ea.code == eb.code:
                code = ea.code
            target = DataType(f"{code}{max(ea.bits, eb.bits)}")
        if ea != target:
            a = cast(a, target.with_lanes(ta.lanes))
        if eb != target:
            b = cast(b, target.with_lanes(tb.lanes))
    if a.dtype.lanes != b.dtype.lanes:
        if a.dtype.lanes == 1:
            a = Broadcast(a, b.dtype.lanes)
        elif b.dtype.lanes == 1:
            b = Broadcast(b, a.dtype.lanes)
        else:
            raise TypeError(f"operands have different vector lanes: {a.dtype} vs {b.dtype}")
    return a, b


def _promote(a: Any, b: Any) -> tuple[PrimExpr, PrimExpr]:
    if not isinstance(a, PrimExpr) and isinstance(b, PrimExpr):
        a = _const_like(a, b.dtype)
    elif not isinstance(b, PrimExpr) and isinstance(a, PrimExpr):
        b = _const_like(b, a.dtype)
    return _unify(convert(a), convert(b))


def _fold(op: type, a: PrimExpr, b: PrimExpr) -> "PrimExpr | None":
    """Fold two constants; None when not both constant or not foldable."""
    if not (isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm))):
        return None
    x, y = a.value, b.value
    is_int = isinstance(a, IntImm)
    if a.dtype.is_bool:
        return None
    if op is Add:
        r = x + y
    elif op is Sub:
        r = x - y
    elif op is Mul:
        r = x * y
    elif op in (Div, FloorDiv, Mod, FloorMod):
        if y == 0:
            return None
        if not is_int:
            if op is Div:
                r = x / y
            elif op is FloorDiv:
                r = math.floor(x / y)
            else:
                return None
        elif op is FloorDiv:
            r = x // y
        elif op is FloorMod:
            r = x % y
        elif op is Div:
            r = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)
        else:
            r = x - y * (abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1))
    elif op is Min:
        r = min(x, y)
    elif op is Max:
        r = max(x, y)
    else:
        return None
    return IntImm(a.dtype, int(r)) if is_int else FloatImm(a.dtype, float(r))


def _arith(op: type, a: Any, b: Any) -> PrimExpr:
    a, b = _promote(a, b)
    folded = _fold(op, a, b)
    return folded if folded is not None else op(a, b)


def _compare(op: type, a: Any, b: Any) -> PrimExpr:
    a, b = _promote(a, b)
    if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        x, y = a.value, b.value
        result = {EQ: x == y, NE: x != y, LT: x < y, LE: x <= y, GT: x > y, GE: x >= y}[op]
        return IntImm("bool", int(result))
    return op(a, b)


def _as_bool(value: Any) -> PrimExpr:
    value = convert(value)
    if not value.dtype.is_bool:
        raise TypeError(f"expected a bool condition, got `{value}` of dtype {value.dtype}")
    return value


def cast(value: Any, dtype: "str | DataType") -> PrimExpr:
    """``value`` converted to ``dtype`` (constants are converted directly).

    Example:
        >>> str(cast(3, "float32"))
        '3.0'
    """
    dtype = DataType(dtype)
    value = convert(value)
    if value.dtype == dtype:
        return value
    if isinstance(value, (IntImm, FloatImm)) and dtype.lanes == 1:
        return const(value.value, dtype)
    if value.dtype.lanes == 1 and dtype.lanes > 1:
        return Broadcast(cast(value, dtype.element_of()), dtype.lanes)
    return Cast(dtype, value)


def simplify_const(expr: PrimExpr) -> PrimExpr:
    """Return ``expr`` (construction already folds constant operands); kept for readability."""
    return expr


def min_value(dtype: "str | DataType") -> PrimExpr:
    """The smallest finite value of ``dtype`` (the identity of a max-reduction).

    Example:
        >>> min_value("int8").value
        -128
    """
    dtype = DataType(dtype)
    if dtype.is_int:
        return IntImm(dtype, -(2 ** (dtype.bits - 1)))
    if dtype.is_uint or dtype.is_bool:
        return IntImm(dtype, 0)
    if dtype.is_float:
        return FloatImm(dtype, _float_max(dtype) * -1)
    raise TypeError(f"no minimum value for {dtype}")


def max_value(dtype: "str | DataType") -> PrimExpr:
    """The largest finite value of ``dtype`` (the identity of a min-reduction).

    Example:
        >>> max_value("uint8").value
        255
    """
    dtype = DataType(dtype)
    if dtype.is_int:
        return IntImm(dtype, 2 ** (dtype.bits - 1) - 1)
    if dtype.is_uint:
        return IntImm(dtype, 2**dtype.bits - 1)
    if dtype.is_bool:
        return IntImm(dtype, 1)
    if dtype.is_float:
        return FloatImm(dtype, _float_max(dtype))
    raise TypeError(f"no maximum value for {dtype}")


def max_identity(dtype: "str | DataType") -> PrimExpr:
    """The identity of a max-reduction: ``-inf`` for floats (so that the max of a row of ``-inf``
    is ``-inf``, as numpy and ONNX say, not the lowest finite value), `min_value` otherwise.

    Example:
        >>> max_identity("float32").value, max_identity("int8").value
        (-inf, -128)
    """
    dtype = DataType(dtype)
    if dtype.is_float:
        return FloatImm(dtype, -math.inf)
    return min_value(dtype)


def min_identity(dtype: "str | DataType") -> PrimExpr:
    """The identity of a min-reduction: ``+inf`` for floats, `max_value` otherwise (see `max_identity`).

    Example:
        >>> min_identity("float16").value, min_identity("uint8").value
        (inf, 255)
    """
    dtype = DataType(dtype)
    if dtype.is_float:
        return FloatImm(dtype, math.inf)
    return max_value(dtype)


def _float_max(dtype: DataType) -> float:
    if dtype.code == "bfloat":
        return 3.3895313892515355e38
    return {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}[dtype.bits]


def as_const_int(expr: Any) -> "int | None":
    """The Python int of a constant integer expression, else None.

    Example:
        >>> as_const_int(IntImm("int32", 4)), as_const_int(Var("n"))
        (4, None)
    """
    if isinstance(expr, bool):
        return int(expr)
    if isinstance(expr, int):
        return expr
    if isinstance(expr, IntImm):
        return expr.value
    return None


def is_const_int(expr: Any, value: "int | None" = None) -> bool:
    """Whether ``expr`` is a constant integer (equal to ``value`` when given)."""
    v = as_const_int(expr)
    return v is not None and (value is None or v == value)
