"""`ingot.tir`: TensorIR — statements, blocks, `PrimFunc`, intrinsics; re-exports the expression
language of `ingot.ir`.

Example:
    >>> from ingot import tir
    >>> i = tir.Var("i")
    >>> str(tir.exp(tir.Cast("float32", i)))
    'T.exp(T.Cast("float32", i))'
"""
from ingot.ir.buffer import Buffer, BufferRegion, MatchBufferRegion, decl_buffer
from ingot.ir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, And, BinaryOp, Broadcast, BufferLoad, Call, CmpOp, Div, FloatImm, FloorDiv,
    FloorMod, IntImm, IterVar, Let, Max, Min, Mod, Mul, Not, Or, PrimExpr, Ramp, Range, Select, SizeVar,
    StringImm, Sub, Var, as_const_int, const, convert, is_const_int, max_identity, max_value, min_identity,
    min_value,
)
from ingot.ir.dtype import DataType
from ingot.support import lazy_exports

from .function import PrimFunc
from .op import (
    Cast, abs, acos, acosh, all, any, asin, asinh, atan, atan2, atanh, call_extern, ceil, copysign, cos, cosh,
    div, erf, exp, exp2, exp10, expm1, floor, floordiv, floormod, fmod, hypot, if_then_else, isfinite, isinf,
    isnan, likely, log, log1p, log2, log10, max, min, nearbyint, pow, power, reinterpret, round, rsqrt,
    select, sigmoid, sin, sinh, sqrt, tan, tanh, trunc, truncdiv, truncmod,
)
from .stmt import (
    Allocate, AssertStmt, Block, BlockRealize, BufferStore, Evaluate, For, ForKind, IfThenElse, LetStmt,
    SeqStmt, Stmt, stmt_children,
)


# Subpackages load on first use: they import ingot.arith and this package's own statements, so
# importing them here eagerly would be circular.
__getattr__, __dir__ = lazy_exports(__name__, {
    **{name: ("ingot.tir.schedule", name) for name in (
        "Schedule", "ScheduleError", "Trace", "BlockRV", "LoopRV", "ExprRV", "Instruction", "InstructionKind")},
    "TensorIntrin": ("ingot.tir.schedule.tensor_intrin", "TensorIntrin"),
    "IndexMap": ("ingot.arith", "IndexMap"),
}, submodules=("transform", "schedule", "analysis"))
