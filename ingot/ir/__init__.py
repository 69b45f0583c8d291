"""`ingot.ir`: node base, data types, scalar expressions, buffers, `IRModule`, structural equality.

Example:
    >>> from ingot.ir import Var, structural_equal
    >>> structural_equal(Var("i") + 1, Var("j") + 1, map_free_vars=True)
    True
"""
from .buffer import Buffer, BufferRegion, MatchBufferRegion, decl_buffer
from .dtype import DataType, dtype_of_numpy
from .error import IngotError, IRError
from .expr import (
    EQ, GE, GT, LE, LT, NE, Add, And, Broadcast, BufferLoad, Call, Cast, CmpOp, BinaryOp, Div, EqualOp,
    FloatImm, FloorDiv, FloorMod, IntImm, IterVar, Let, Max, Min, Mod, Mul, Not, NotEqualOp, Or, PrimExpr,
    Ramp, Range, Select, SizeVar, StringImm, Sub, Var, as_const_int, cast, const, convert, is_const_int,
    max_identity, max_value, min_identity, min_value,
)
from .functor import Mutator, Visitor, collect_loads, collect_vars, post_order_visit, substitute
from .module import GlobalVar, IRModule
from .node import FrozenDict, Node
from .printer import expr_to_str, register_node_printer
from .structural import StructuralMismatch, assert_structural_equal, structural_equal, structural_hash
