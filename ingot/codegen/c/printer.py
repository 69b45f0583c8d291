"""Printing lowered TensorIR as C11 (GCC/clang dialect): expressions and statements.

Note: `CPrinter` has one small method per node kind (``expr_Add`` ..., ``stmt_For`` ...), found by
walking the node class's MRO, and writes statements into an indented `CodeWriter`. Operator and
intrinsic text lives in tables (`_BINARY`, `ingot.codegen.c.intrinsics.INTRINSICS`).

Conventions of the emitted C:

* every expression is fully parenthesized; each variable and buffer pointer is a sanitized,
  unique identifier (`ingot.codegen.sanitize.NameTable`); names never appear in comments;
* arithmetic on narrow types is rounded after each operation (``(int8_t)(a + b)``,
  ``(_Float16)(a * b)``, ``ingot_bf16_round(a + b)``) so C's integer promotion and excess
  precision do not change results;
* vector values (lanes > 1) are GCC vector types; ``+ - * /`` and casts use the native vector
  operations, contiguous loads/stores go through an unaligned ``may_alias`` vector type, and
  everything else (min/max, select, calls, strided access) is applied lane by lane inside a
  statement expression, which GCC turns back into SIMD code at -O3;
* run-time failures (a workspace that cannot be allocated, a failed assertion) cannot ``return``
  from inside an OpenMP region, so they set ``ingot_fail`` to a message number, skip the guarded
  body, and the kernel reports the message once all loops are done.

Example:
    >>> from ingot.ir import Var, decl_buffer
    >>> from ingot.tir import For, ForKind, BufferStore
    >>> from ingot.codegen.sanitize import NameTable
    >>> from ingot.codegen.c.types import CHelpers
    >>> A = decl_buffer((8,), "float32", "A")
    >>> i = Var("i")
    >>> p = CPrinter(CHelpers(), NameTable(), "main")
    >>> _ = p.bind_buffer(A)
    >>> p.print_stmt(For(i, 0, 8, ForKind.SERIAL, BufferStore(A, A[i] * 2.0, [i])))
    >>> print(p.writer.text(), end="")
    for (int32_t i = 0; i < 8; ++i) {
      A[i] = (A[i] * 2.0f);
    }
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

from ingot.codegen.prelude import c_string_literal
from ingot.codegen.sanitize import NameTable
from ingot.ir.buffer import Buffer
from ingot.ir.dtype import DataType
from ingot.ir.transform import PassContext
from ingot.ir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, And, Broadcast, BufferLoad, Call, Cast, CmpOp, Div, FloatImm, FloorDiv,
    FloorMod, IntImm, Let, Max, Min, Mod, Mul, Not, Or, PrimExpr, Ramp, Select, SizeVar, StringImm, Sub,
    Var, as_const_int, cast,
)
from ingot.tir.stmt import (
    Allocate, AssertStmt, Block, BlockRealize, BufferStore, Evaluate, For, ForKind, IfThenElse, LetStmt,
    SeqStmt, Stmt,
)

from .intrinsics import intrinsic_text
from .types import CHelpers, elem_value_type, storage_type, value_type

__all__ = ["CPrinter", "CodeWriter", "CodegenError"]

#: Constant-size allocations up to this many bytes live on the stack; larger ones use the heap.
STACK_LIMIT_BYTES = 64 * 1024
#: Clauses of every `omp parallel for`: the team size is the library's thread count
#: (``ingot_team_size()`` in the prelude, set by ``Module.set_num_threads``; the runtime's
#: policy is ``ingot.runtime.threads``), whichever thread calls the kernel.
PARALLEL_CLAUSES = "num_threads(ingot_team_size())"
#: A parallel loop nest whose stores (loop iterations times vector lanes, all extents constant)
#: number fewer than this runs on the calling thread alone (``if(0)``): forking costs a wake-up per thread and
#: a barrier, and on a busy machine the barrier waits for a descheduled thread's next time slice
#: (milliseconds). The smallest work a second thread pays for here: the 784x128 dense layer of the
#: 784-128-10 MLP (1e5 stores) is faster and steadier on one thread beside a busy core
#: (BENCHMARKS.md "Busy machine").
PARALLEL_MIN_STORES = 1 << 17
#: Pass config (registered in `ingot.ir.transform`) naming how parallel loops run: "pool" (default;
#: the prelude's `ingot_parallel_for`, which never waits for a thread that has not started) or
#: "openmp" (`omp parallel for`).
PARALLEL_RUNTIME_CONFIG = "codegen.parallel_runtime"


class CodegenError(ValueError):
    """The IR cannot be printed as C (not lowered, unknown variable, unsupported construct)."""


class CodeWriter:
    """Lines of C with indentation.

    Example:
        >>> w = CodeWriter()
        >>> w.line("{"); w.indent += 1; w.line("x = 1;"); w.indent -= 1; w.line("}")
        >>> w.text()
        '{\\n  x = 1;\\n}\\n'
    """

    def __init__(self, indent: int = 0) -> None:
        self.lines: list[str] = []
        self.indent = indent

    def line(self, text: str) -> None:
        self.lines.append("  " * self.indent + text if text else "")

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def _resolve_method(cache: dict, owner: type, cls: type, prefix: str) -> "Callable | None":
    # Keyed by the printer class too: a subclass (the CUDA printer) overrides some methods.
    key = (owner, cls)
    if key not in cache:
        cache[key] = next(
            (getattr(owner, prefix + k.__name__) for k in cls.__mro__ if hasattr(owner, prefix + k.__name__)),
            None,
        )
    return cache[key]


_CMP = {EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">="}


class CPrinter:
    """Prints the statements and expressions of one lowered PrimFunc body as C.

    ``names`` is the function's identifier table; ``bind_buffer``/``bind_var`` give parameters
    their C names before printing. ``failures`` collects the run-time failure messages (see the
    module note); ``in_parallel`` tracks OpenMP nesting.
    """

    _expr_cache: dict = {}
    _stmt_cache: dict = {}

    def __init__(self, helpers: CHelpers, names: NameTable, func_name: str) -> None:
        self.helpers = helpers
        self.names = names
        self.func_name = func_name
        self.writer = CodeWriter()
        self.failures: list[str] = []
        self.in_parallel = 0
        self.in_simd = 0
        self._pointer_dtype: dict[int, tuple[Var, DataType]] = {}  # id(data var) -> storage dtype
        self._nonneg: set[int] = set()
        self._keep: list[Any] = []  # keeps keys of id()-maps alive
        self._tmp = 0
        # Parallel loop bodies outlined into restrict-pointer functions (see `_outline_parallel`):
        # a list of C function definitions the caller emits before the kernel (None: disabled).
        self.outlined: "list[str] | None" = None
        self.outline_prefix = "ingot_outlined"
        # How outlined parallel loops run: "pool", the prelude's ingot_parallel_for (the default),
        # or "openmp", an `omp parallel for` (pass config `codegen.parallel_runtime`, for A/B runs).
        self.parallel_runtime = PassContext.current().get_config(PARALLEL_RUNTIME_CONFIG, "pool")
        if self.parallel_runtime not in ("pool", "openmp"):
            raise CodegenError(f"pass config {PARALLEL_RUNTIME_CONFIG!r} must be 'pool' or 'openmp', "
                               f"got {self.parallel_runtime!r}")
        self.noalias = False
        self._allocated: set[int] = set()  # data vars of Allocate (never aliased by anything)

    # ------------------------------------------------------------------ naming and context
    def bind_buffer(self, buffer: Buffer) -> str:
        """Name the data pointer of ``buffer`` (a parameter or an allocation); returns it."""
        self._pointer_dtype[id(buffer.data)] = (buffer.data, buffer.dtype)
        return self.names.get(buffer.name, buffer.data)

    def bind_var(self, var: Var, nonneg: bool = False) -> str:
        """Name the scalar ``var``; ``nonneg`` records that it is never negative (shape sizes)."""
        if nonneg:
            self._mark_nonneg(var)
        return self.names.get(var.name, var)

    def _mark_nonneg(self, var: Var) -> None:
        self._keep.append(var)
        self._nonneg.add(id(var))

    def fresh(self, prefix: str = "t") -> str:
        """A new temporary identifier (in the reserved ``ingot_`` namespace)."""
        self._tmp += 1
        return f"ingot_{prefix}{self._tmp}"

    def value_type(self, dtype: "str | DataType") -> str:
        return value_type(dtype, self.helpers)

    def wrap_narrow(self, dtype: DataType, text: str) -> str:
        """Round the result of an operation to ``dtype`` when C would compute it wider."""
        dtype = DataType(dtype)
        if dtype.lanes > 1:
            return text
        if dtype.code == "bfloat":
            return f"{self.helpers.require('ingot_bf16_round')}({text})"
        if dtype.is_sub_byte_int:
            return f"{self.helpers.require('wrap_sub_byte', str(dtype))}({text})"
        if (dtype.is_integer and dtype.bits < 32) or (dtype.code == "float" and dtype.bits == 16):
            return f"(({elem_value_type(dtype)}){text})"
        return text

    def _guard(self, failed: str, message: str, body: Stmt, cleanup: "str | None" = None) -> None:
        """``if (failed) <record message> else { body; cleanup }`` (see the module note)."""
        self.failures.append(message)
        code = len(self.failures)
        self.writer.line(f"if ({failed}) {{")
        if self.in_parallel and not self.in_simd:
            self.writer.line("#pragma omp atomic write")
        self.writer.line(f"  ingot_fail = {code};")
        self.writer.line("} else {")
        self._block(body)
        if cleanup:
            self.writer.line(f"  {cleanup}")
        self.writer.line("}")

    # ------------------------------------------------------------------ expressions
    def expr(self, node: PrimExpr) -> str:
        """C text of ``node``."""
        method = _resolve_method(CPrinter._expr_cache, type(self), type(node), "expr_")
        if method is None:
            raise CodegenError(f"{self.func_name}: the C backend cannot print {type(node).__name__} `{node}`")
        return method(self, node)

    def expr_IntImm(self, node: IntImm) -> str:
        v, dtype = node.value, node.dtype
        if dtype.lanes > 1:
            raise CodegenError(f"vector IntImm `{node}`: use Broadcast")
        if dtype.is_bool:
            return "1" if v else "0"
        if dtype.is_uint:
            return f"UINT64_C({v})" if dtype.bits == 64 else (f"{v}U" if dtype.bits == 32 else f"((uint{dtype.bits}_t){v})")
        if dtype.bits == 64:
            return "INT64_MIN" if v == -(2**63) else f"INT64_C({v})"
        if dtype.bits == 32:
            if v == -(2**31):
                return "(-2147483647 - 1)"
            return f"({v})" if v < 0 else str(v)
        return f"((int{dtype.bits}_t){v})"

    def expr_FloatImm(self, node: FloatImm) -> str:
        v, dtype = node.value, node.dtype
        if math.isnan(v):
            text = "NAN"
        elif math.isinf(v):
            text = "INFINITY" if v > 0 else "(-INFINITY)"
        else:
            text = repr(float(v))
            if "e" not in text and "." not in text:
                text += ".0"
        if dtype.bits == 64:
            return text if not text.startswith("-") else f"({text})"
        if text[0].isdigit() or text.startswith("-"):
            text += "f"
        if dtype.code == "float" and dtype.bits == 16:
            return f"((_Float16){text})"
        return f"({text})" if text.startswith("-") else text

    def expr_StringImm(self, node: StringImm) -> str:
        return c_string_literal(node.value)

    def expr_Var(self, node: Var) -> str:
        name = self.names.lookup(node)
        if name is None:
            raise CodegenError(
                f"{self.func_name}: variable {node.name!r} ({node.dtype}) is used but never defined; "
                "a lowered function may only use its parameters, the symbolic dimensions of its "
                "parameter buffers, loop variables and LetStmt variables"
            )
        return name

    def expr_Cast(self, node: Cast) -> str:
        src, dst = node.value.dtype, node.dtype
        if dst.lanes > 1:
            plain = lambda t: (t.code in ("int", "uint", "float") and not (t.code == "float" and t.bits == 16)
                               and not t.is_sub_byte_int)
            if plain(src) and plain(dst):
                return f"__builtin_convertvector({self.expr(node.value)}, {self.value_type(dst)})"
            return self._lanewise(dst, [node.value], lambda a: self._cast_text(src, dst, a[0]))
        return self._cast_text(src, dst, self.expr(node.value))

    def _cast_text(self, src: DataType, dst: DataType, text: str) -> str:
        src, dst = src.element_of(), dst.element_of()
        if dst.is_bool:
            return f"(({text}) != 0)"
        target = elem_value_type(dst)
        if src.is_bool:
            return self.wrap_narrow(dst, f"(({target})(({text}) != 0))")
        if dst.code == "bfloat":
            return f"{self.helpers.require('ingot_bf16_round')}((float)({text}))"
        if dst.is_sub_byte_int:
            if src.is_float:
                text = f"{self.helpers.require('ingot_f2i32_or_zero')}((double)({text}))"
            return self.wrap_narrow(dst, text)
        return f"(({target})({text}))"

    # -- arithmetic --------------------------------------------------------------------------
    def expr_BinaryOp(self, node) -> str:
        dtype = node.dtype
        if dtype.lanes > 1:
            native = type(node) in (Add, Sub, Mul, Div) or (type(node) is Mod and not dtype.is_float)
            if native and dtype.code != "bfloat":
                return f"({self.expr(node.a)} {_BINARY_SYMBOL[type(node)]} {self.expr(node.b)})"
            if type(node) in (Min, Max) and dtype.code == "float" and dtype.bits in (32, 64):
                return self._vector_minmax(node)
            return self._lanewise(dtype, [node.a, node.b], lambda a: self._binary_text(node, a[0], a[1]))
        return self._binary_text(node, self.expr(node.a), self.expr(node.b))

    def _vector_minmax(self, node) -> str:
        """Float vector min/max (``b < a ? b : a`` / ``b > a ? b : a`` per lane, as the scalar
        helpers) as a compare mask and a bit blend: GCC scalarizes the lane loop of `_lanewise`
        inside unrolled register-tile epilogues (relu/clip after a conv: ~60 instructions a vector)."""
        dtype = node.dtype
        vt = self.value_type(dtype)
        it = self.value_type(DataType(f"int{dtype.bits}x{dtype.lanes}"))
        t = self.fresh("mm")
        op = ">" if type(node) is Max else "<"
        return (f"({{ {vt} {t}_a = {self.expr(node.a)}; {vt} {t}_b = {self.expr(node.b)}; "
                f"{it} {t}_m = ({t}_b {op} {t}_a); "
                f"({vt})((({it}){t}_b & {t}_m) | (({it}){t}_a & ~{t}_m)); }})")

    def _binary_text(self, node, a: str, b: str) -> str:
        return _BINARY[type(node)](self, node, node.dtype.element_of(), a, b)

    def is_nonneg(self, e: PrimExpr) -> bool:
        """Whether ``e`` is provably >= 0 (constants, sizes, loop variables from >= 0, and
        sums/products/quotients of such); lets FloorDiv/FloorMod use plain ``/`` and ``%``."""
        if isinstance(e, IntImm):
            return e.value >= 0
        if isinstance(e, Var):
            return isinstance(e, SizeVar) or id(e) in self._nonneg
        if isinstance(e, (Add, Mul, Min, Max, FloorDiv, Div)):
            return self.is_nonneg(e.a) and self.is_nonneg(e.b)
        if isinstance(e, (FloorMod, Mod)):
            return (isinstance(e, FloorMod) and _positive_const(e.b)) or (self.is_nonneg(e.a) and self.is_nonneg(e.b))
        if isinstance(e, Cast):
            return e.value.dtype.is_integer and e.dtype.bits >= e.value.dtype.bits and self.is_nonneg(e.value)
        if isinstance(e, Ramp):
            return self.is_nonneg(e.base) and self.is_nonneg(e.stride)
        if isinstance(e, Broadcast):
            return self.is_nonneg(e.value)
        return e.dtype.is_uint

    def expr_CmpOp(self, node: CmpOp) -> str:
        op = _CMP[type(node)]
        if node.dtype.lanes > 1:
            mask = f"({self.expr(node.a)} {op} {self.expr(node.b)})"
            return f"__builtin_convertvector({mask}, {self.value_type(node.dtype)})"
        return f"({self.expr(node.a)} {op} {self.expr(node.b)})"

    def expr_And(self, node: And) -> str:
        return self._logic(node, lambda a: f"(({a[0]}) && ({a[1]}))", "&&")

    def expr_Or(self, node: Or) -> str:
        return self._logic(node, lambda a: f"(({a[0]}) || ({a[1]}))", "||")

    def _logic(self, node, fmt, op: str) -> str:
        if node.dtype.lanes > 1:
            return self._lanewise(node.dtype, [node.a, node.b], fmt)
        return f"({self.expr(node.a)} {op} {self.expr(node.b)})"

    def expr_Not(self, node: Not) -> str:
        if node.dtype.lanes > 1:
            return self._lanewise(node.dtype, [node.a], lambda a: f"(!({a[0]}))")
        return f"(!{self.expr(node.a)})"

    def expr_Select(self, node: Select) -> str:
        if node.dtype.lanes > 1:
            ops = [node.condition, node.true_value, node.false_value]
            return self._lanewise(node.dtype, ops, lambda a: f"(({a[0]}) ? ({a[1]}) : ({a[2]}))")
        return f"({self.expr(node.condition)} ? {self.expr(node.true_value)} : {self.expr(node.false_value)})"

    def expr_Let(self, node: Let) -> str:
        value = self.expr(node.value)
        name = self.bind_var(node.var, nonneg=self.is_nonneg(node.value))
        return f"({{ {self.value_type(node.var.dtype)} {name} = {value}; {self.expr(node.body)}; }})"

    def expr_Call(self, node: Call) -> str:
        if node.dtype.lanes > 1 and node.op not in ("call_extern", "call_pure_extern"):
            scalar = node.replace(dtype=node.dtype.element_of())
            return self._lanewise(node.dtype, list(node.args), lambda a: intrinsic_text(self, scalar, a))
        args = [c_string_literal(a.value) if isinstance(a, StringImm) else self.expr(a) for a in node.args]
        return intrinsic_text(self, node, args)

    def expr_Ramp(self, node: Ramp) -> str:
        t = self.fresh("ramp")
        et = elem_value_type(node.base.dtype)
        return (f"({{ {et} {t}_b = {self.expr(node.base)}, {t}_s = {self.expr(node.stride)}; "
                f"{self.value_type(node.dtype)} {t}; for (int32_t {t}_l = 0; {t}_l < {node.lanes}; ++{t}_l) "
                f"{t}[{t}_l] = ({et})({t}_b + {t}_l * {t}_s); {t}; }})")

    def expr_Broadcast(self, node: Broadcast) -> str:
        # A brace initializer with the scalar in every lane is what GCC recognizes as a splat
        # (one vbroadcastss); the lane loop of `_lanewise` is vectorized at the preferred width
        # and round-trips through the stack, which spills GEMM micro-kernels.
        t = self.fresh("bc")
        lanes = ", ".join([t] * node.dtype.lanes)
        return (f"({{ {self.value_type(node.value.dtype)} {t} = {self.expr(node.value)}; "
                f"({self.value_type(node.dtype)}){{{lanes}}}; }})")

    def _lanewise(self, dtype: DataType, operands: Sequence[PrimExpr], fmt: Callable[[list[str]], str]) -> str:
        """Apply the scalar formula ``fmt`` to each lane: a statement expression with a loop."""
        t = self.fresh("v")
        decls, lanes_text = [], []
        for k, op in enumerate(operands):
            decls.append(f"{self.value_type(op.dtype)} {t}_{k} = {self.expr(op)};")
            lanes_text.append(f"{t}_{k}[{t}_l]" if op.dtype.lanes > 1 else f"{t}_{k}")
        return (f"({{ {' '.join(decls)} {self.value_type(dtype)} {t}; "
                f"for (int32_t {t}_l = 0; {t}_l < {dtype.lanes}; ++{t}_l) {t}[{t}_l] = {fmt(lanes_text)}; {t}; }})")

    # -- memory ------------------------------------------------------------------------------
    def _pointer(self, buffer: Buffer) -> str:
        """C expression of ``buffer``'s element pointer (cast when its dtype differs from the
        storage the pointer was declared with)."""
        entry = self._pointer_dtype.get(id(buffer.data))
        name = self.names.lookup(buffer.data)
        if entry is None or name is None:
            raise CodegenError(
                f"{self.func_name}: buffer {buffer.name!r} is accessed but its storage is neither a "
                "parameter nor allocated (a lowered function needs an Allocate for every local buffer)"
            )
        if buffer.dtype.lanes > 1:
            raise NotImplementedError(f"buffer {buffer.name!r} has vector element dtype {buffer.dtype}; "
                                      "declare scalar buffers and access them with Ramp indices")
        if storage_type(entry[1]) != storage_type(buffer.dtype):
            return f"(({storage_type(buffer.dtype)}*){name})"
        return name

    def flat_index(self, buffer: Buffer, indices: Sequence[PrimExpr]) -> PrimExpr:
        """The element offset of ``buffer[indices]`` (row-major or explicit strides, plus
        ``elem_offset``); a vector index in the last dimension stays a `Ramp`."""
        if len(indices) == 1 and as_const_int(buffer.elem_offset) == 0 and not buffer.strides:
            return indices[0]
        strides = buffer.compact_strides()
        base: PrimExpr = buffer.elem_offset
        ramp = None
        for k, (idx, stride) in enumerate(zip(indices, strides)):
            if isinstance(idx, Ramp) and k == len(indices) - 1 and ramp is None:
                ramp = idx
                base = base + idx.base * stride
                ramp_stride = idx.stride * stride
            else:
                base = base + idx * stride
        if ramp is not None and base.dtype.lanes == 1:
            return Ramp(base, ramp_stride, ramp.lanes)
        return base

    def _load_conv(self, dtype: DataType, text: str) -> str:
        if dtype.code == "bfloat":
            return f"{self.helpers.require('ingot_bf16_to_f32')}({text})"
        if dtype.is_bool:
            return f"((int32_t){text})"
        if dtype.is_sub_byte_int:  # the stored low bits, sign-extended (see codegen.c.types)
            return self.wrap_narrow(dtype, text)
        return text

    def _store_conv(self, dtype: DataType, text: str) -> str:
        if dtype.code == "bfloat":
            return f"{self.helpers.require('ingot_f32_to_bf16')}({text})"
        if dtype.is_bool:
            return f"((int8_t)(({text}) != 0))"
        if dtype.is_sub_byte_int:
            return f"((uint8_t)(({text}) & {(1 << dtype.bits) - 1}))"
        return text

    def _contiguous(self, index: PrimExpr, dtype: DataType) -> bool:
        return (isinstance(index, Ramp) and as_const_int(index.stride) == 1
                and dtype.code != "bfloat" and not dtype.is_bool and not dtype.is_sub_byte_int)

    def expr_BufferLoad(self, node: BufferLoad) -> str:
        ptr = self._pointer(node.buffer)
        index = self.flat_index(node.buffer, node.indices)
        elem = node.buffer.dtype
        if node.dtype.lanes == 1:
            return self._load_conv(elem, f"{ptr}[{self.expr(index)}]")
        if self._contiguous(index, elem):
            utype = self.helpers.vector_type(elem.with_lanes(node.dtype.lanes), unaligned=True)
            return f"(*(const {utype}*)({ptr} + {self.expr(index.base)}))"
        return self._lanewise(node.dtype, [index], lambda a: self._load_conv(elem, f"{ptr}[{a[0]}]"))

    # ------------------------------------------------------------------ statements
    def print_stmt(self, node: Stmt) -> None:
        """Write the C of ``node`` into ``self.writer``."""
        method = _resolve_method(CPrinter._stmt_cache, type(self), type(node), "stmt_")
        if method is None:
            raise CodegenError(f"{self.func_name}: the C backend cannot print statement {type(node).__name__}")
        method(self, node)

    def _block(self, body: Stmt) -> None:
        self.writer.indent += 1
        self.print_stmt(body)
        self.writer.indent -= 1

    def stmt_SeqStmt(self, node: SeqStmt) -> None:
        for s in node.seq:
            self.print_stmt(s)

    def stmt_Evaluate(self, node: Evaluate) -> None:
        if isinstance(node.value, (IntImm, FloatImm)):
            return  # Evaluate(0) is a no-op placeholder
        self.writer.line(f"(void)({self.expr(node.value)});")

    def stmt_BufferStore(self, node: BufferStore) -> None:
        ptr = self._pointer(node.buffer)
        index = self.flat_index(node.buffer, node.indices)
        elem = node.buffer.dtype
        lanes = node.value.dtype.lanes
        if index.dtype.lanes == 1 and lanes == 1:
            self.writer.line(f"{ptr}[{self.expr(index)}] = {self._store_conv(elem, self.expr(node.value))};")
            return
        if self._contiguous(index, elem) and lanes == index.dtype.lanes:
            utype = self.helpers.vector_type(elem.with_lanes(lanes), unaligned=True)
            self.writer.line(f"*({utype}*)({ptr} + {self.expr(index.base)}) = {self.expr(node.value)};")
            return
        # Scatter: lane by lane (strided or indirect indices, bf16/bool conversion).
        t = self.fresh("st")
        n = index.dtype.lanes
        value = f"{t}_v[{t}_l]" if lanes > 1 else f"{t}_v"
        self.writer.line(f"{{ {self.value_type(node.value.dtype)} {t}_v = {self.expr(node.value)};")
        self.writer.line(f"  {self.value_type(index.dtype)} {t}_i = {self.expr(index)};")
        self.writer.line(f"  for (int32_t {t}_l = 0; {t}_l < {n}; ++{t}_l) "
                         f"{ptr}[{t}_i[{t}_l]] = {self._store_conv(elem, value)}; }}")

    def stmt_LetStmt(self, node: LetStmt) -> None:
        value = self.expr(node.value)
        name = self.bind_var(node.var, nonneg=self.is_nonneg(node.value))
        self.writer.line("{")
        self.writer.indent += 1
        self.writer.line(f"{self.value_type(node.var.dtype)} {name} = {value};")
        self.print_stmt(node.body)
        self.writer.indent -= 1
        self.writer.line("}")

    def stmt_IfThenElse(self, node: IfThenElse) -> None:
        self.writer.line(f"if ({self.expr(node.condition)}) {{")
        self._block(node.then_case)
        if node.else_case is not None:
            self.writer.line("} else {")
            self._block(node.else_case)
        self.writer.line("}")

    def stmt_AssertStmt(self, node: AssertStmt) -> None:
        self._guard(f"!({self.expr(node.condition)})", f"{self.func_name}: assertion failed: {node.message}",
                    node.body)

    def stmt_For(self, node: For) -> None:
        if node.kind == ForKind.THREAD_BINDING:
            raise CodegenError(
                f"{self.func_name}: loop {node.loop_var.name!r} is bound to {node.thread_binding!r}, "
                "which a CPU target cannot run; build for target 'cuda' or remove the binding"
            )
        lo = self.expr(node.min)
        ext = self.expr(node.extent)
        nonneg = self.is_nonneg(node.min)
        name = self.bind_var(node.loop_var, nonneg=nonneg)
        end = ext if as_const_int(node.min) == 0 else f"({lo} + {ext})"
        parallel = node.kind == ForKind.PARALLEL and self.in_parallel == 0 and self.in_simd == 0
        if parallel and self._outline_parallel(node, name, lo, end):
            return
        if parallel:
            self.writer.line(_parallel_pragma(node))
        elif node.kind == ForKind.VECTORIZED and self.in_simd == 0:
            # A constant extent of 2..16 is the vector length the schedule asked for (split by
            # the lanes); simdlen makes GCC use it (16 floats = one zmm) where its cost model
            # would otherwise prefer 256-bit vectors on AVX-512 hosts.
            extent = as_const_int(node.extent)
            if extent is not None and 2 <= extent <= 16 and extent & (extent - 1) == 0:
                self.writer.line(f"#pragma omp simd simdlen({extent})")
            else:
                self.writer.line("#pragma omp simd")
        elif node.kind == ForKind.UNROLLED:
            extent = as_const_int(node.extent)
            factor = extent if extent is not None and 0 < extent <= 1024 else 8
            self.writer.line(f"#pragma GCC unroll {factor}")
        # Nested parallel loops run serially inside the outer team (no nested parallelism).
        self.writer.line(f"for ({self.value_type(node.loop_var.dtype)} {name} = {lo}; {name} < {end}; ++{name}) {{")
        self.in_parallel += int(parallel)
        simd = node.kind == ForKind.VECTORIZED
        self.in_simd += int(simd)
        self._block(node.body)
        self.in_simd -= int(simd)
        self.in_parallel -= int(parallel)
        self.writer.line("}")

    def _outline_parallel(self, node: For, name: str, lo: str, end: str) -> bool:
        """Emit the body of the outermost parallel loop ``node`` as a separate function whose
        pointer parameters are ``restrict`` and call it from the ``omp parallel for``; returns
        False (nothing written) when the body cannot be outlined.

        Why: GCC outlines an OpenMP region into a function that receives the pointers through a
        struct, which drops their ``restrict``. Without it GCC cannot keep an accumulator that
        lives in an output buffer (``C[i, j] += ...`` over a k loop, the KC-blocked GEMM and the
        convolutions) in registers: every FMA gets a load and a store of C. A real function
        with restrict parameters restores the no-alias facts (it is ``noinline`` so the facts are
        not lost again when GCC would inline it back into the region).

        A failure inside the body (a heap workspace, an assertion) sets the function's own
        ``ingot_fail``, which it returns; the loop copies it into the kernel's flag.
        """
        if self.outlined is None:
            return False
        free = []
        for var in _used_vars(node.body):
            if var is node.loop_var or self.names.lookup(var) is None:
                continue  # defined inside the body (or the loop variable itself)
            entry = self._pointer_dtype.get(id(var))
            cname = self.names.lookup(var)
            if entry is not None:
                restrict = " INGOT_RESTRICT" if (self.noalias or id(var) in self._allocated) else ""
                free.append(f"{storage_type(entry[1])}*{restrict} {cname}")
            elif DataType(var.dtype).is_handle:
                return False  # an opaque pointer: its C type is not known here
            else:
                free.append(f"{self.value_type(var.dtype)} {cname}")
            free[-1] = (free[-1], cname)
        n_fail, saved = len(self.failures), self.writer
        self.writer = CodeWriter(indent=0)
        self.in_parallel += 1
        try:
            self._block(node.body)
        finally:
            self.in_parallel -= 1
            body, self.writer = self.writer.text(), saved
        fn = f"{self.outline_prefix}_par{len(self.outlined)}"
        params = [decl for decl, _ in free] + [f"{self.value_type(node.loop_var.dtype)} {name}"]
        args = [cname for _, cname in free] + [name]
        # The function has its own failure flag (set by guards in the body, see the module
        # note) and returns it; the loop copies a failure into the kernel's flag.
        attrs = "noinline" + _tune_attribute(node)
        self.outlined.append(f"static __attribute__(({attrs})) int32_t {fn}({', '.join(params)}) {{\n"
                             f"  int32_t ingot_fail = 0;\n{body.rstrip()}\n  return ingot_fail;\n}}\n")
        if self.parallel_runtime == "pool":
            if _stores_in(node) >= PARALLEL_MIN_STORES:
                self._call_parallel_for(node, fn, free, name, lo, end, fails=len(self.failures) != n_fail)
                return True
        else:
            self.writer.line(_parallel_pragma(node))
        self.writer.line(f"for ({self.value_type(node.loop_var.dtype)} {name} = {lo}; {name} < {end}; ++{name}) {{")
        if len(self.failures) != n_fail:
            t = self.fresh("f")
            self.writer.line(f"  int32_t {t} = {fn}({', '.join(args)});")
            self.writer.line(f"  if ({t} != 0) {{")
            self.writer.line("  #pragma omp atomic write")
            self.writer.line(f"    ingot_fail = {t};")
            self.writer.line("  }")
        else:
            self.writer.line(f"  (void){fn}({', '.join(args)});")
        self.writer.line("}")
        return True

    def _call_parallel_for(self, node: For, fn: str, free: list, name: str, lo: str, end: str, fails: bool) -> None:
        """Run outlined body ``fn`` over ``[lo, end)`` with the prelude's ``ingot_parallel_for``: the
        body's free variables go into a context struct that a task function unpacks (see
        `_outline_parallel` for the body, the prelude's parallel-loop note for why not OpenMP)."""
        fields = [decl.replace(" INGOT_RESTRICT", "") for decl, _ in free] or ["char unused"]
        ctx_t, task = f"{fn}_ctx", f"{fn}_task"
        loop_t = self.value_type(node.loop_var.dtype)
        unpack = ", ".join([f"c->{cname}" for _, cname in free] + [f"({loop_t})i"])
        # A body that cannot fail has its status ignored, as the OpenMP loop does: GCC then drops the
        # return value (an .isra clone), which keeps the micro-kernel's registers as they were.
        call = f"return {fn}({unpack});" if fails else f"(void){fn}({unpack});\n  return 0;"
        self.outlined.append(f"typedef struct {{ {'; '.join(fields)}; }} {ctx_t};\n"
                             f"static int32_t {task}(void* ctx, int64_t i) {{\n"
                             f"  const {ctx_t}* c = (const {ctx_t}*)ctx;\n  (void)c;\n"
                             f"  {call}\n}}\n")
        values = ", ".join(cname for _, cname in free) or "0"
        ctx = self.fresh("ctx")
        self.writer.line("{")
        self.writer.line(f"  {ctx_t} {ctx} = {{{values}}};")
        call = f"ingot_parallel_for((int64_t)({lo}), (int64_t)({end}), {task}, &{ctx})"
        if fails:
            t = self.fresh("f")
            self.writer.line(f"  int32_t {t} = {call};")
            self.writer.line(f"  if ({t} != 0) ingot_fail = {t};")
        else:
            self.writer.line(f"  (void){call};")
        self.writer.line("}")

    def stmt_Allocate(self, node: Allocate) -> None:
        buffer = node.buffer
        name = self.bind_buffer(buffer)
        self._allocated.add(id(buffer.data))
        self._keep.append(buffer.data)
        elem = storage_type(buffer.dtype)
        count: PrimExpr = IntImm("int64", 1)
        for dim in buffer.shape:
            count = count * cast(dim, "int64")
        nbytes = as_const_int(count)
        if nbytes is not None and nbytes * max(buffer.dtype.bits, 8) // 8 <= STACK_LIMIT_BYTES:
            self.writer.line("{")
            self.writer.line(f"  {elem} {name}[{max(nbytes, 1)}] __attribute__((aligned(64)));")
            self._block(node.body)
            self.writer.line("}")
            return
        size = f"(size_t)({self.expr(count)}) * sizeof({elem})"
        self.writer.line("{")
        self.writer.indent += 1
        self.writer.line(f"{elem}* {name} = ({elem}*)ingot_alloc_workspace({size});")
        shape = ", ".join(str(d) for d in buffer.shape)
        self._guard(f"{name} == NULL", f"{self.func_name}: cannot allocate the workspace of buffer "
                    f"{buffer.name!r} ({buffer.dtype}[{shape}]): out of memory", node.body,
                    cleanup=f"ingot_free_workspace({name});")
        self.writer.indent -= 1
        self.writer.line("}")

    def stmt_Block(self, node: Block) -> None:
        raise CodegenError(
            f"{self.func_name}: found block {node.name_hint!r}; the C backend prints lowered functions "
            "only (no Block/BlockRealize). Run ingot.lower(mod) first, or use ingot.build, which lowers"
        )

    def stmt_BlockRealize(self, node: BlockRealize) -> None:
        self.stmt_Block(node.block)


def _used_vars(stmt: Stmt) -> list:
    """Variables used in ``stmt``, including the data pointers of the buffers it accesses."""
    from ingot.ir.functor import Visitor

    found: dict[int, Var] = {}

    class _Collect(Visitor):
        def visit_Var(self, n: Var) -> None:
            found.setdefault(id(n), n)

        def visit_Buffer(self, n: Buffer) -> None:
            found.setdefault(id(n.data), n.data)
            for dim in n.shape:
                self.visit(dim)

    _Collect().visit(stmt)
    return list(found.values())


#: Loop annotation naming the gcc tuning (``-mtune`` value) of a parallel loop's outlined body: set
#: by schedules whose register tile relies on it (`ingot.cpu_model.CpuModel.fold_tune`).
COMPILER_TUNE_KEY = "compiler_tune"


def _tune_attribute(node: For) -> str:
    """``, target("tune=<cpu>")`` for a loop annotated with `COMPILER_TUNE_KEY`, else empty.

    Example:
        >>> from ingot.ir import Var
        >>> from ingot.tir.stmt import Evaluate, For, ForKind
        >>> loop = For(Var("i", "int32"), 0, 4, ForKind.PARALLEL, Evaluate(0), annotations={COMPILER_TUNE_KEY: "znver3"})
        >>> _tune_attribute(loop)
        ', target("tune=znver3")'
    """
    tune = (getattr(node, "annotations", None) or {}).get(COMPILER_TUNE_KEY)
    if tune is None:
        return ""
    tune = str(getattr(tune, "value", tune))
    if not re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", tune):
        raise ValueError(f"loop {node.loop_var.name!r}: {COMPILER_TUNE_KEY} must name a gcc -mtune CPU such as "
                         f"'znver3', got {tune!r}")
    return f', target("tune={tune}")'


def _parallel_pragma(node: For) -> str:
    """The ``omp parallel for`` of parallel loop ``node``: the library's team size, and
    ``if(0)`` (one thread, no fork, no barrier) when the nest is smaller than
    `PARALLEL_MIN_STORES`."""
    small = " if(0)" if _stores_in(node) < PARALLEL_MIN_STORES else ""
    return f"#pragma omp parallel for schedule(static) {PARALLEL_CLAUSES}{small}"


def _stores_in(stmt: Stmt) -> float:
    """The number of scalar stores ``stmt`` executes (loop extents times vector lanes); ``inf``
    when an extent is not a constant (the size is only known at run time) or a call's work is
    hidden.

    Example:
        >>> from ingot.ir import Var
        >>> from ingot.ir.buffer import decl_buffer
        >>> i = Var("i", "int32")
        >>> b = decl_buffer((64,), "float32", "B")
        >>> _stores_in(For(i, 0, 64, ForKind.PARALLEL, BufferStore(b, 0.0, [i])))
        64
    """
    from ingot.tir.stmt import stmt_children

    if isinstance(stmt, For):
        extent = as_const_int(stmt.extent)
        if extent is None:
            return math.inf
        return extent * _stores_in(stmt.body)
    if isinstance(stmt, BufferStore):
        return max(1, DataType(stmt.value.dtype).lanes)
    if isinstance(stmt, Evaluate):
        return math.inf  # a call (a micro-kernel, an extern): its work is not visible here
    return sum((_stores_in(c) for c in stmt_children(stmt)), 0)


def _positive_const(e: PrimExpr) -> bool:
    v = as_const_int(e)
    return v is not None and v > 0


# ----------------------------------------------------------------------------------------------
# Binary operator table: class -> (printer, node, lane dtype, a, b) -> C text
# ----------------------------------------------------------------------------------------------

_BINARY_SYMBOL = {Add: "+", Sub: "-", Mul: "*", Div: "/", Mod: "%"}


def _arith(symbol: str):
    def emit(p: CPrinter, node, dtype: DataType, a: str, b: str) -> str:
        return p.wrap_narrow(dtype, f"({a} {symbol} {b})")

    return emit


def _libm_call(p: CPrinter, base: str, dtype: DataType, args: Sequence[str]) -> str:
    if dtype.code == "float" and dtype.bits == 16:
        return f"((_Float16){base}f({', '.join(f'(float)({x})' for x in args)}))"
    return f"{base}{'' if dtype.bits == 64 else 'f'}({', '.join(args)})"


def _mod(p: CPrinter, node, dtype: DataType, a: str, b: str) -> str:
    if dtype.is_float:
        return p.wrap_narrow(dtype, _libm_call(p, "fmod", dtype, [a, b]))
    return p.wrap_narrow(dtype, f"({a} % {b})")


def _floor_op(kind: str):
    def emit(p: CPrinter, node, dtype: DataType, a: str, b: str) -> str:
        if dtype.is_float:
            if kind == "floordiv":
                return p.wrap_narrow(dtype, _libm_call(p, "floor", dtype, [f"{a} / {b}"]))
            # x - floor(x / y) * y, through a helper so that a and b are evaluated once.
            ct = elem_value_type(dtype)
            fn = p.helpers.require("floormod_float", ct if ct != "_Float16" else "float")
            return p.wrap_narrow(dtype, f"{fn}({a}, {b})")
        symbol = "/" if kind == "floordiv" else "%"
        if dtype.is_uint or (p.is_nonneg(node.a) and p.is_nonneg(node.b)):
            return p.wrap_narrow(dtype, f"({a} {symbol} {b})")
        wide = "int64_t" if dtype.bits == 64 else "int32_t"
        fn = p.helpers.require(kind, wide)
        return p.wrap_narrow(dtype, f"{fn}({a}, {b})")

    return emit


def _minmax(kind: str):
    def emit(p: CPrinter, node, dtype: DataType, a: str, b: str) -> str:
        return f"{p.helpers.require(kind, str(dtype), elem_value_type(dtype))}({a}, {b})"

    return emit


_BINARY: dict[type, Callable[..., str]] = {
    Add: _arith("+"), Sub: _arith("-"), Mul: _arith("*"), Div: _arith("/"), Mod: _mod,
    FloorDiv: _floor_op("floordiv"), FloorMod: _floor_op("floormod"), Min: _minmax("min"), Max: _minmax("max"),
}
