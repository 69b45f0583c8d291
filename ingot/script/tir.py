"""The ``T`` namespace of TVMScript: ``from ingot.script import tir as T``.

Note: the parser never executes a ``@T.prim_func`` body. It evaluates the expressions it meets
(``T.exp(x)``, ``A[vi, vk]``, ``T.grid(4, 8)``) with the real objects of this module, and the
statement-level constructs (``T.block``, ``T.axis.remap``, ``T.reads``, ``T.alloc_buffer``...)
return small *frame* or *declaration* records that the parser turns into IR, so their meaning lives
in one place: the parser (`ingot.script.parser`). Python evaluates parameter annotations when the
``def`` runs, so ``T.Buffer(...)``, ``T.int32`` and ``T.handle`` are ordinary objects too.

Example:
    >>> from ingot.script import tir as T
    >>> @T.prim_func
    ... def add_one(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    ...     for i in range(8):
    ...         with T.block("B"):
    ...             vi = T.axis.spatial(8, i)
    ...             B[vi] = A[vi] + 1.0
    >>> [p.name for p in add_one.params]
    ['A', 'B']
"""
from __future__ import annotations

import re as _re
import sys as _sys
from dataclasses import dataclass, field
from typing import Any, Optional

from ingot.ir.expr import (
    Broadcast as _Broadcast, Call as _Call, Let as _LetExpr, PrimExpr, Ramp as _Ramp, Select as _Select,
    Var as _Var, cast as _cast, const as _const, convert as _convert, max_value, min_value,
)
from ingot.tir import op as _op
from ingot.tir.op import (  # noqa: F401 - re-exported as T.<name>
    abs, acos, acosh, all, any, asin, asinh, atan, atan2, atanh, call_extern, ceil, copysign, cos, cosh, erf,
    exp, exp2, exp10, expm1, floor, floordiv, floormod, fmod, hypot, if_then_else, isfinite, isinf, isnan,
    likely, log, log1p, log2, log10, max, min, nearbyint, pow, reinterpret, round, rsqrt, sigmoid, sin, sinh,
    sqrt, tan, tanh, trunc, truncdiv, truncmod,
)
from ingot.tir.stmt import Evaluate as _Evaluate, ForKind as _ForKind

# --------------------------------------------------------------------------------------------
# Decorator
# --------------------------------------------------------------------------------------------


def prim_func(func: Any = None, *, private: bool = False, check_well_formed: bool = True) -> Any:
    """Parse a Python function written in TVMScript into a `PrimFunc` (its body is not run).

    Inside an ``@I.ir_module`` class the function is returned unchanged and the module parser
    reads it with the rest of the class.

    Example:
        >>> from ingot.script import tir as T
        >>> @T.prim_func
        ... def f(A: T.Buffer((4,), "int32")):
        ...     for i in range(4):
        ...         A[i] = i
        >>> type(f).__name__
        'PrimFunc'
    """

    def decorate(fn: Any) -> Any:
        caller = _sys._getframe(1 if func is None else 2)
        if _is_class_body(caller):
            fn.__ingot_prim_func__ = True
            return fn
        from .parser import parse_function

        return parse_function(fn, caller)

    if func is None:
        return decorate
    return decorate(func)


def _is_class_body(frame: Any) -> bool:
    names = frame.f_locals
    return frame.f_code.co_name != "<module>" and "__module__" in names and "__qualname__" in names


# --------------------------------------------------------------------------------------------
# Types: buffers, handles, scalar dtypes
# --------------------------------------------------------------------------------------------


class _BufferMeta(type):
    def __getitem__(cls, args: Any) -> "Buffer":
        # Old TVMScript spelling: T.Buffer[(128, 128), "float32"]
        if not isinstance(args, tuple):
            args = (args,)
        return cls(*args)


class Buffer(metaclass=_BufferMeta):
    """``T.Buffer(shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global")``:
    a parameter annotation, or (as a statement) a buffer view over existing ``data``.

    Example:
        >>> from ingot.script import tir as T
        >>> spec = T.Buffer((128, 64), "float16")
        >>> spec.dtype
        'float16'
    """

    def __init__(self, shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None,
                 elem_offset: Any = None, scope: str = "global", align: int = -1, offset_factor: int = 0,
                 buffer_type: str = "", axis_separators: Any = None):
        if isinstance(shape, (int, PrimExpr)):
            shape = (shape,)
        self.shape = tuple(shape)
        self.dtype = str(dtype) if not isinstance(dtype, _DTypeConstructor) else dtype.dtype
        self.data = data
        self.strides = tuple(strides or ())
        self.elem_offset = elem_offset
        self.scope = scope

    def build(self, name: str) -> Any:
        """The `ingot.ir.Buffer` this spec declares, named ``name``."""
        from ingot.ir.buffer import Buffer as _IRBuffer

        data = self.data if self.data is not None else _Var(name, "handle")
        offset = 0 if self.elem_offset is None else self.elem_offset
        return _IRBuffer(data, self.dtype, self.shape, self.strides, offset, name, self.scope)


class _HandleType:
    """``T.handle``: the type of an opaque pointer parameter (bound with ``T.match_buffer``)."""

    dtype = "handle"

    def __call__(self, *args: Any, **kwargs: Any) -> "_HandleType":
        return self

    def __repr__(self) -> str:
        return "T.handle"


handle = _HandleType()


class _DTypeConstructor:
    """``T.float32``, ``T.int64``...: a scalar type annotation and a constant constructor.

    ``T.int32()`` declares a symbolic variable; ``T.float32(0)`` is a constant; ``T.float32("inf")``
    an infinity; ``T.float32(x)`` casts an expression.
    """

    def __init__(self, dtype: str):
        self.dtype = dtype
        self.__name__ = dtype

    def __call__(self, value: Any = None, *, is_size_var: bool = False) -> Any:
        if value is None:
            from ingot.ir.expr import SizeVar

            return SizeVar("v", self.dtype) if is_size_var else _Var("v", self.dtype)
        if isinstance(value, str):
            return _const(float(value), self.dtype)
        if isinstance(value, PrimExpr):
            return _cast(value, self.dtype)
        return _const(value, self.dtype)

    def __repr__(self) -> str:
        return f"T.{self.dtype}"


_DTYPE_NAME = _re.compile(r"^(int|uint)(8|16|32|64)(x\d+)?$|^(float|bfloat)(16|32|64)(x\d+)?$|^bool(x\d+)?$")

for _bits in (8, 16, 32, 64):
    globals()[f"int{_bits}"] = _DTypeConstructor(f"int{_bits}")
    globals()[f"uint{_bits}"] = _DTypeConstructor(f"uint{_bits}")
for _name in ("float16", "float32", "float64", "bfloat16", "bool"):
    globals()[_name] = _DTypeConstructor(_name)


def var(dtype: Any, name: str = "v") -> _Var:
    """``n = T.var("int32")``: declare a symbolic scalar variable.

    Example:
        >>> from ingot.script import tir as T
        >>> str(T.var("int64").dtype)
        'int64'
    """
    return _Var(name, getattr(dtype, "dtype", dtype))


def __getattr__(name: str) -> Any:
    # Vector types such as T.float32x4 on first use.
    if _DTYPE_NAME.match(name):
        ctor = _DTypeConstructor(name)
        globals()[name] = ctor
        return ctor
    raise AttributeError(
        f"unknown TVMScript construct T.{name}; see docs/tvmscript.md for the supported T.* names"
    )


# --------------------------------------------------------------------------------------------
# Declaration records (turned into IR by the parser, which knows the target name)
# --------------------------------------------------------------------------------------------


@dataclass
class BufferDecl:
    """Result of ``T.alloc_buffer`` / ``T.decl_buffer`` / ``T.allocate`` / ``T.match_buffer``."""

    kind: str  # "alloc_buffer" | "decl_buffer" | "allocate" | "match_buffer"
    spec: Buffer
    source: Any = None  # match_buffer: the handle parameter or the matched region


def alloc_buffer(shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None,
                 elem_offset: Any = None, scope: str = "global", align: int = -1, offset_factor: int = 0,
                 buffer_type: str = "default", axis_separators: Any = None) -> BufferDecl:
    """``X = T.alloc_buffer((128,), "float32", scope="local")``: a buffer allocated by the enclosing
    block (the hidden root block at function level).

    Example:
        >>> from ingot.script import tir as T
        >>> T.alloc_buffer((4, 4)).kind
        'alloc_buffer'
    """
    return BufferDecl("alloc_buffer", Buffer(shape, dtype, data, strides, elem_offset, scope))


def decl_buffer(shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None,
                elem_offset: Any = None, scope: str = "global", align: int = -1, offset_factor: int = 0,
                buffer_type: str = "", axis_separators: Any = None) -> BufferDecl:
    """``X = T.decl_buffer((16,), "float32", scope="local")``: storage live for the rest of the
    statements (an `Allocate`); with ``data=`` it only declares a view.

    Example:
        >>> from ingot.script import tir as T
        >>> T.decl_buffer((16,), scope="local").spec.scope
        'local'
    """
    return BufferDecl("decl_buffer", Buffer(shape, dtype, data, strides, elem_offset, scope))


def allocate(extents: Any, dtype: Any = "float32", scope: str = "global", condition: Any = True,
             annotations: Any = None) -> BufferDecl:
    """``ptr = T.allocate([n], "float32", "global")``: TVM's lowered allocation; the name is bound
    to the data pointer, to be viewed with ``T.Buffer(shape, dtype, data=ptr)``.

    Example:
        >>> from ingot.script import tir as T
        >>> T.allocate([16], "float32", "local").kind
        'allocate'
    """
    return BufferDecl("allocate", Buffer(extents, dtype, None, None, None, scope))


def match_buffer(param: Any, shape: Any = None, dtype: Any = "float32", data: Any = None, strides: Any = None,
                 elem_offset: Any = None, scope: str = "global", align: int = -1, offset_factor: int = 0,
                 buffer_type: str = "default", axis_separators: Any = None) -> BufferDecl:
    """``A = T.match_buffer(a, (m, n), "float32")``: bind a ``T.handle`` parameter (or, inside a
    block, a region ``B[vi, 0:16]``) to a buffer.

    Example:
        >>> from ingot.script import tir as T
        >>> T.match_buffer(None, (4,)).kind
        'match_buffer'
    """
    return BufferDecl("match_buffer", Buffer(shape if shape is not None else (), dtype, data, strides,
                                             elem_offset, scope), param)


# --------------------------------------------------------------------------------------------
# Function and block frames
# --------------------------------------------------------------------------------------------


@dataclass
class FuncAttr:
    attrs: dict


def func_attr(attrs: dict) -> FuncAttr:
    """``T.func_attr({"global_symbol": "main", "tir.noalias": True})``: the function's attributes.

    Example:
        >>> from ingot.script import tir as T
        >>> T.func_attr({"tir.noalias": True}).attrs
        {'tir.noalias': True}
    """
    return FuncAttr(dict(attrs))


@dataclass
class BlockFrame:
    name: str
    no_realize: bool = False


def block(name: str = "", no_realize: bool = False) -> BlockFrame:
    """``with T.block("C"):`` opens a block.

    Example:
        >>> from ingot.script import tir as T
        >>> T.block("C").name
        'C'
    """
    return BlockFrame(str(name), no_realize)


@dataclass
class InitFrame:
    pass


def init() -> InitFrame:
    """``with T.init():`` inside a block: the statement run before the first reduction step.

    Example:
        >>> from ingot.script import tir as T
        >>> type(T.init()).__name__
        'InitFrame'
    """
    return InitFrame()


@dataclass
class BlockItem:
    """``T.reads`` / ``T.writes`` / ``T.where`` / ``T.block_attr`` inside a block."""

    kind: str
    value: Any


def _regions(args: tuple) -> list:
    items: list = []
    for a in args:
        if isinstance(a, (list, tuple)):
            items.extend(a)
        else:
            items.append(a)
    return items


def reads(*regions: Any) -> BlockItem:
    """``T.reads(A[vi, 0:128], B[0:128, vj])``: the block's read regions (inferred when omitted).

    Example:
        >>> from ingot.script import tir as T
        >>> T.reads().kind
        'reads'
    """
    return BlockItem("reads", _regions(regions))


def writes(*regions: Any) -> BlockItem:
    """``T.writes(C[vi, vj])``: the block's write regions (inferred when omitted).

    Example:
        >>> from ingot.script import tir as T
        >>> T.writes().kind
        'writes'
    """
    return BlockItem("writes", _regions(regions))


def where(predicate: Any) -> BlockItem:
    """``T.where(i * 16 + j < 100)``: the block runs only where the predicate holds.

    Example:
        >>> from ingot.script import tir as T
        >>> T.where(True).kind
        'where'
    """
    return BlockItem("where", predicate)


def block_attr(attrs: dict) -> BlockItem:
    """``T.block_attr({"meta_schedule.auto_tensorize": "dot"})``: block annotations.

    Example:
        >>> from ingot.script import tir as T
        >>> T.block_attr({"k": 1}).value
        {'k': 1}
    """
    return BlockItem("block_attr", dict(attrs))


@dataclass
class AxisDecl:
    kind: str  # "S" | "R" | "O"
    dom: Any
    value: Any


@dataclass
class AxisRemap:
    kinds: str
    values: list


class axis:  # noqa: N801 - TVMScript spelling: T.axis.spatial(...)
    """``T.axis.spatial/reduce/opaque(dom, value)`` and ``T.axis.remap("SSR", [i, j, k])``.

    ``dom`` is an extent, a ``(begin, end)`` pair or a `Range`.

    Example:
        >>> from ingot.script import tir as T
        >>> T.axis.remap("SR", [0, 1]).kinds
        'SR'
    """

    @staticmethod
    def spatial(dom: Any, value: Any = None, dtype: str = "int32") -> AxisDecl:
        return AxisDecl("S", dom, value)

    @staticmethod
    def reduce(dom: Any, value: Any = None, dtype: str = "int32") -> AxisDecl:
        return AxisDecl("R", dom, value)

    @staticmethod
    def opaque(dom: Any, value: Any = None, dtype: str = "int32") -> AxisDecl:
        return AxisDecl("O", dom, value)

    S = spatial
    R = reduce

    @staticmethod
    def remap(kinds: str, bindings: Any, dtype: str = "int32") -> AxisRemap:
        bindings = list(bindings)
        if len(kinds) != len(bindings):
            raise ValueError(
                f'T.axis.remap: the kinds string "{kinds}" has {len(kinds)} letters but {len(bindings)} '
                f"loop variables are given; write one letter (S or R) per variable"
            )
        bad = [k for k in kinds if k not in "SR"]
        if bad:
            raise ValueError(f'T.axis.remap: unknown axis kind {bad[0]!r} in "{kinds}"; use S (spatial) or R (reduce)')
        return AxisRemap(kinds, bindings)


# --------------------------------------------------------------------------------------------
# Loops
# --------------------------------------------------------------------------------------------


@dataclass
class LoopFrame:
    kind: str
    start: Any
    stop: Any
    has_start: bool
    thread: Optional[str] = None
    annotations: dict = field(default_factory=dict)


def _loop(kind: str, start: Any, stop: Any, annotations: Any, thread: Optional[str] = None) -> LoopFrame:
    if stop is None:
        return LoopFrame(kind, 0, start, False, thread, dict(annotations or {}))
    return LoopFrame(kind, start, stop, True, thread, dict(annotations or {}))


def serial(start: Any, stop: Any = None, *, annotations: Any = None) -> LoopFrame:
    """``for i in T.serial(n)`` or ``T.serial(begin, end, annotations={...})``.

    Example:
        >>> from ingot.script import tir as T
        >>> T.serial(8).kind
        'serial'
    """
    return _loop(_ForKind.SERIAL, start, stop, annotations)


def parallel(start: Any, stop: Any = None, *, annotations: Any = None) -> LoopFrame:
    """``for i in T.parallel(n)``: an OpenMP worksharing loop on CPUs.

    Example:
        >>> from ingot.script import tir as T
        >>> T.parallel(8).kind
        'parallel'
    """
    return _loop(_ForKind.PARALLEL, start, stop, annotations)


def vectorized(start: Any, stop: Any = None, *, annotations: Any = None) -> LoopFrame:
    """``for i in T.vectorized(8)``: a SIMD loop.

    Example:
        >>> from ingot.script import tir as T
        >>> T.vectorized(8).kind
        'vectorized'
    """
    return _loop(_ForKind.VECTORIZED, start, stop, annotations)


def unroll(start: Any, stop: Any = None, *, annotations: Any = None) -> LoopFrame:
    """``for i in T.unroll(4)``: an unrolled loop.

    Example:
        >>> from ingot.script import tir as T
        >>> T.unroll(4).kind
        'unroll'
    """
    return _loop(_ForKind.UNROLLED, start, stop, annotations)


def thread_binding(start: Any, stop: Any = None, thread: Optional[str] = None, *, annotations: Any = None) -> LoopFrame:
    """``for tx in T.thread_binding(0, 32, thread="threadIdx.x")``: a loop bound to a GPU thread axis.

    Example:
        >>> from ingot.script import tir as T
        >>> T.thread_binding(32, thread="threadIdx.x").thread
        'threadIdx.x'
    """
    if isinstance(stop, str) and thread is None:
        stop, thread = None, stop
    if not thread:
        raise ValueError('T.thread_binding needs thread="threadIdx.x" (or blockIdx.x, ...)')
    return _loop(_ForKind.THREAD_BINDING, start, stop, annotations, thread)


def grid(*extents: Any) -> list:
    """``for i, j, k in T.grid(128, 128, 128)``: perfectly nested serial loops.

    Example:
        >>> from ingot.script import tir as T
        >>> len(T.grid(4, 8))
        2
    """
    return [LoopFrame(_ForKind.SERIAL, 0, e, False) for e in extents]


# --------------------------------------------------------------------------------------------
# Expressions and statements
# --------------------------------------------------------------------------------------------


def evaluate(value: Any) -> _Evaluate:
    """``T.evaluate(expr)``: run an expression for its side effect.

    Example:
        >>> from ingot.script import tir as T
        >>> type(T.evaluate(0)).__name__
        'Evaluate'
    """
    return _Evaluate(value)


def Cast(dtype: Any, value: Any) -> PrimExpr:  # noqa: N802 - TVMScript spelling
    """``T.Cast("float32", i)``.

    Example:
        >>> from ingot.script import tir as T
        >>> from ingot.ir import Var
        >>> str(T.Cast("float32", Var("i")).dtype)
        'float32'
    """
    return _op.Cast(getattr(dtype, "dtype", dtype), value)


def Select(condition: Any, true_value: Any, false_value: Any) -> PrimExpr:  # noqa: N802
    """``T.Select(cond, a, b)``: both branches may be evaluated.

    Example:
        >>> from ingot.script import tir as T
        >>> from ingot.ir import Var
        >>> type(T.Select(Var("i") < 2, 1, 0)).__name__
        'Select'
    """
    return _Select(condition, true_value, false_value)


def Ramp(base: Any, stride: Any, lanes: int) -> PrimExpr:  # noqa: N802
    """``T.Ramp(base, stride, lanes)``: the vector base + [0, stride, 2*stride, ...].

    Example:
        >>> from ingot.script import tir as T
        >>> str(T.Ramp(0, 1, 4).dtype)
        'int32x4'
    """
    return _Ramp(base, stride, int(lanes))


def Broadcast(value: Any, lanes: int) -> PrimExpr:  # noqa: N802
    """``T.Broadcast(x, lanes)``: ``x`` in every lane.

    Example:
        >>> from ingot.script import tir as T
        >>> str(T.Broadcast(1.0, 8).dtype)
        'float32x8'
    """
    return _Broadcast(value, int(lanes))


def Let(body: Any, where: dict) -> PrimExpr:  # noqa: N802
    """``T.Let(x + 1, where={x: value})``: a let expression (the parser defines ``x``).

    Example:
        >>> from ingot.script import tir as T
        >>> from ingot.ir import Var
        >>> x = Var("x")
        >>> type(T.Let(x + 1, where={x: 2})).__name__
        'Let'
    """
    (v, value), = where.items()
    return _LetExpr(v, value, body)


def call_intrin(dtype: Any, op_name: str, *args: Any) -> PrimExpr:
    """``T.call_intrin("float32", "exp", x)``: a call of any intrinsic with an explicit result type.

    Example:
        >>> from ingot.script import tir as T
        >>> T.call_intrin("int32", "popcount", 7).op
        'popcount'
    """
    if op_name not in _op.ALL_INTRINSICS:
        raise ValueError(f"unknown intrinsic {op_name!r}; known: {sorted(_op.ALL_INTRINSICS)}")
    return _Call(getattr(dtype, "dtype", dtype), op_name, args)


def call_pure_extern(dtype: Any, func_name: str, *args: Any) -> PrimExpr:
    """``T.call_pure_extern("float32", "my_fn", x)``: an extern call without side effects.

    Example:
        >>> from ingot.script import tir as T
        >>> T.call_pure_extern("float32", "f", 1.0).op
        'call_pure_extern'
    """
    from ingot.ir.expr import StringImm

    return _Call(getattr(dtype, "dtype", dtype), "call_pure_extern", [StringImm(func_name), *args])


def _integer_intrinsic(name: str, arity: int):
    def intrinsic(*args: Any) -> PrimExpr:
        if len(args) != arity:
            raise TypeError(f"T.{name} takes {arity} argument(s), got {len(args)}")
        values = [_convert(a) for a in args]
        if arity == 2:
            from ingot.ir.expr import _promote

            values = list(_promote(args[0], args[1]))
        return _Call(values[0].dtype, name, values)

    intrinsic.__name__ = name
    intrinsic.__doc__ = f"``T.{name}(...)``: the ``{name}`` intrinsic on integers."
    return intrinsic


for _name, _arity in _op.INTEGER_INTRINSICS.items():
    globals()[_name] = _integer_intrinsic(_name, _arity)


def meta_var(value: Any) -> Any:
    """``T.meta_var(v)``: a Python value used at parse time (returned unchanged).

    Example:
        >>> from ingot.script import tir as T
        >>> T.meta_var(3)
        3
    """
    return value


def ceildiv(a: Any, b: Any) -> PrimExpr:
    """``T.ceildiv(a, b)`` = ``(a + b - 1) // b``.

    Example:
        >>> from ingot.script import tir as T
        >>> T.ceildiv(7, 2)
        4
    """
    return (a + b - 1) // b


infinity = lambda dtype: _const(float("inf"), getattr(dtype, "dtype", dtype))  # noqa: E731
max_value = max_value
min_value = min_value


# --------------------------------------------------------------------------------------------
# Scoped statement frames: `with T.LetStmt(v) as x:` and `with T.Assert(cond, "msg"):`
# (the printer uses them when a let/assert/allocation is followed by sibling statements)
# --------------------------------------------------------------------------------------------


@dataclass
class LetFrame:
    value: Any
    dtype: Optional[str] = None


def LetStmt(value: Any, type_annotation: Any = None) -> LetFrame:  # noqa: N802 - TVMScript spelling
    """``with T.LetStmt(A[i] * 2.0) as x:``: ``x`` bound to the value inside the ``with`` body.

    Example:
        >>> from ingot.script import tir as T
        >>> T.LetStmt(1).value
        1
    """
    return LetFrame(value, getattr(type_annotation, "dtype", type_annotation))


@dataclass
class AssertFrame:
    condition: Any
    message: str


def Assert(condition: Any, message: str = "") -> AssertFrame:  # noqa: N802
    """``with T.Assert(n > 0, "n must be positive"):``: check a condition before the body.

    Example:
        >>> from ingot.script import tir as T
        >>> T.Assert(True, "ok").message
        'ok'
    """
    return AssertFrame(condition, str(message))
