"""TensorIR statements: stores, loops, blocks, and their structure.

Note: the semantics every schedule primitive respects are in ../shared/TENSORIR.md (copied to
docs/tensorir.md). In short: a `Block` has iteration variables with domains and kinds (``"S"``
spatial, ``"R"`` reduce), read/write regions, an optional ``init`` and a body that only uses its
own iteration variables; a `BlockRealize` places the block under loops by binding each iteration
variable to an expression of the loop variables, under an optional predicate.

Example:
    >>> from ingot.ir import Var, decl_buffer
    >>> A = decl_buffer((8,), "float32", "A")
    >>> i = Var("i")
    >>> loop = For(i, 0, 8, ForKind.SERIAL, BufferStore(A, A[i] + 1.0, [i]))
    >>> loop.extent.value
    8
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ingot.ir.buffer import Buffer, BufferRegion, MatchBufferRegion
from ingot.ir.error import IRError
from ingot.ir.expr import IntImm, IterVar, PrimExpr, Var, _promote, convert, const
from ingot.ir.node import FrozenDict, Node


class Stmt(Node):
    """Base of statements."""

    __slots__ = ()


class BufferStore(Stmt):
    """``buffer[indices] = value``.

    Example:
        >>> from ingot.ir import decl_buffer
        >>> B = decl_buffer((4,), "int32", "B")
        >>> str(BufferStore(B, 7, [0]).value)
        '7'
    """

    __slots__ = ("buffer", "value", "indices")
    _fields = ("buffer", "value", "indices")

    def __init__(self, buffer: Buffer, value: Any, indices: Sequence[Any]):
        indices = tuple(convert(i) for i in indices)
        if len(indices) != buffer.ndim:
            raise IRError(f"store to buffer {buffer.name!r} has {len(indices)} indices, buffer has {buffer.ndim} dims")
        value = _value_of_type(value, buffer.dtype)
        self._init(buffer=buffer, value=value, indices=indices)


def _value_of_type(value: Any, dtype) -> PrimExpr:
    if not isinstance(value, PrimExpr):
        value = convert(value) if isinstance(value, (PrimExpr,)) else _const_or_convert(value, dtype)
    if value.dtype.element_of() != dtype.element_of():
        raise IRError(
            f"stored value `{value}` has dtype {value.dtype}, the buffer holds {dtype}; "
            f"cast it with .astype(\"{dtype}\")"
        )
    return value


def _const_or_convert(value: Any, dtype) -> PrimExpr:
    if isinstance(value, (bool, int, float)) and not isinstance(value, PrimExpr):
        return const(value, dtype)
    return convert(value)


class Evaluate(Stmt):
    """Evaluate an expression for its side effect (e.g. an extern call)."""

    __slots__ = ("value",)
    _fields = ("value",)

    def __init__(self, value: Any):
        self._init(value=convert(value))


class LetStmt(Stmt):
    """``var = value`` visible in ``body``."""

    __slots__ = ("var", "value", "body")
    _fields = ("var", "value", "body")
    _def_fields = ("var",)

    def __init__(self, var: Var, value: Any, body: Stmt):
        self._init(var=var, value=convert(value), body=body)


class AssertStmt(Stmt):
    """Check ``condition`` at run time; fail with ``message`` otherwise."""

    __slots__ = ("condition", "message", "body")
    _fields = ("condition", "message", "body")
    _attr_fields = ("message",)

    def __init__(self, condition: Any, message: str, body: Stmt):
        self._init(condition=convert(condition), message=str(message), body=body)


class IfThenElse(Stmt):
    """``if condition: then_case else: else_case`` (``else_case`` may be None)."""

    __slots__ = ("condition", "then_case", "else_case")
    _fields = ("condition", "then_case", "else_case")

    def __init__(self, condition: Any, then_case: Stmt, else_case: "Stmt | None" = None):
        self._init(condition=convert(condition), then_case=then_case, else_case=else_case)


class ForKind:
    """How a loop runs: serial, parallel (OpenMP), vectorized (SIMD), unrolled, or bound to a thread."""

    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unroll"
    THREAD_BINDING = "thread_binding"
    ALL = (SERIAL, PARALLEL, VECTORIZED, UNROLLED, THREAD_BINDING)


class For(Stmt):
    """A loop ``for loop_var in range(min, min + extent)``.

    ``thread_binding`` names the GPU thread axis (``"threadIdx.x"``) when ``kind`` is
    ``ForKind.THREAD_BINDING``; ``annotations`` carry pragmas (``"pragma_auto_unroll_max_step"``...).

    Example:
        >>> from ingot.ir import Var
        >>> f = For(Var("i"), 0, 4, ForKind.UNROLLED, Evaluate(0))
        >>> f.kind
        'unroll'
    """

    __slots__ = ("loop_var", "min", "extent", "kind", "thread_binding", "annotations", "body")
    _fields = ("loop_var", "min", "extent", "kind", "thread_binding", "annotations", "body")
    _attr_fields = ("kind", "thread_binding")
    _def_fields = ("loop_var",)

    def __init__(
        self,
        loop_var: Var,
        min: Any,
        extent: Any,
        kind: str,
        body: Stmt,
        thread_binding: "str | None" = None,
        annotations: "Mapping[str, Any] | None" = None,
    ):
        if kind not in ForKind.ALL:
            raise IRError(f"loop {loop_var.name!r}: unknown kind {kind!r}; expected one of {ForKind.ALL}")
        if kind == ForKind.THREAD_BINDING and not thread_binding:
            raise IRError(f"loop {loop_var.name!r}: a thread_binding loop needs a thread tag like 'threadIdx.x'")
        lo = _const_like_var(min, loop_var)
        ext = _const_like_var(extent, loop_var)
        self._init(
            loop_var=loop_var, min=lo, extent=ext, kind=kind, thread_binding=thread_binding,
            annotations=FrozenDict(annotations or {}), body=body,
        )


def _const_like_var(value: Any, var: Var) -> PrimExpr:
    if isinstance(value, int) and not isinstance(value, bool):
        return IntImm(var.dtype, value)
    value = convert(value)
    if value.dtype != var.dtype:
        from ingot.ir.expr import cast

        value = cast(value, var.dtype)
    return value


class SeqStmt(Stmt):
    """Statements run in order. Use `SeqStmt.flatten` to build one without nesting or singletons.

    Example:
        >>> s = SeqStmt.flatten(Evaluate(0), SeqStmt([Evaluate(1), Evaluate(2)]))
        >>> len(s.seq)
        3
    """

    __slots__ = ("seq",)
    _fields = ("seq",)

    def __init__(self, seq: Sequence[Stmt]):
        seq = tuple(seq)
        if not seq:
            raise IRError("SeqStmt needs at least one statement")
        self._init(seq=seq)

    @staticmethod
    def flatten(*stmts: "Stmt | Sequence[Stmt] | None") -> Stmt:
        flat: list[Stmt] = []

        def add(s):
            if s is None:
                return
            if isinstance(s, SeqStmt):
                for x in s.seq:
                    add(x)
            elif isinstance(s, (list, tuple)):
                for x in s:
                    add(x)
            else:
                flat.append(s)

        add(stmts)
        if not flat:
            return Evaluate(0)
        return flat[0] if len(flat) == 1 else SeqStmt(flat)


class Allocate(Stmt):
    """Storage for ``buffer`` (in its scope) live during ``body``; produced by lowering."""

    __slots__ = ("buffer", "body")
    _fields = ("buffer", "body")
    _def_fields = ("buffer",)

    def __init__(self, buffer: Buffer, body: Stmt):
        self._init(buffer=buffer, body=body)


class Block(Stmt):
    """A unit of computation with iteration variables, regions, optional init and body.

    Example: see `ingot.te.create_prim_func` or the TVMScript parser for building blocks.
    """

    __slots__ = ("iter_vars", "alloc_buffers", "match_buffers", "reads", "writes", "init", "body",
                 "name_hint", "annotations")
    _fields = ("iter_vars", "alloc_buffers", "match_buffers", "reads", "writes", "init", "body",
               "name_hint", "annotations")
    _attr_fields = ("name_hint",)
    _def_fields = ("iter_vars", "alloc_buffers", "match_buffers")

    def __init__(
        self,
        iter_vars: Sequence[IterVar],
        reads: Sequence[BufferRegion],
        writes: Sequence[BufferRegion],
        name_hint: str,
        body: Stmt,
        init: "Stmt | None" = None,
        alloc_buffers: Sequence[Buffer] = (),
        match_buffers: Sequence[MatchBufferRegion] = (),
        annotations: "Mapping[str, Any] | None" = None,
    ):
        self._init(
            iter_vars=tuple(iter_vars), alloc_buffers=tuple(alloc_buffers), match_buffers=tuple(match_buffers),
            reads=tuple(reads), writes=tuple(writes), init=init, body=body, name_hint=str(name_hint),
            annotations=FrozenDict(annotations or {}),
        )


class BlockRealize(Stmt):
    """Executes ``block`` with its iteration variables bound to ``iter_values`` when ``predicate``.

    Example:
        >>> # with T.block("C"): vi = T.axis.spatial(128, i * 16 + j); T.where(i * 16 + j < 100)
    """

    __slots__ = ("iter_values", "predicate", "block")
    _fields = ("iter_values", "predicate", "block")

    def __init__(self, iter_values: Sequence[Any], predicate: Any, block: Block):
        values = []
        if len(iter_values) != len(block.iter_vars):
            raise IRError(
                f"block {block.name_hint!r} has {len(block.iter_vars)} iteration variables, "
                f"bound to {len(iter_values)} values"
            )
        for value, iv in zip(iter_values, block.iter_vars):
            value = convert(value)
            if value.dtype != iv.var.dtype:
                a, _ = _promote(value, iv.var)
                from ingot.ir.expr import cast

                value = cast(value, iv.var.dtype)
            values.append(value)
        pred = convert(True if predicate is None else predicate)
        self._init(iter_values=tuple(values), predicate=pred, block=block)


def stmt_children(stmt: Stmt) -> list[Stmt]:
    """The statements directly nested in ``stmt`` (the body of a loop, the items of a sequence...)."""
    if isinstance(stmt, SeqStmt):
        return list(stmt.seq)
    if isinstance(stmt, (For, LetStmt, AssertStmt, Allocate)):
        return [stmt.body]
    if isinstance(stmt, IfThenElse):
        return [s for s in (stmt.then_case, stmt.else_case) if s is not None]
    if isinstance(stmt, BlockRealize):
        return [stmt.block]
    if isinstance(stmt, Block):
        return [s for s in (stmt.init, stmt.body) if s is not None]
    return []
