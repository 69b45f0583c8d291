"""`compute_inline` / `reverse_compute_inline`: fold a block into its consumers (or its producer).

Note: `compute_inline(B)` removes the complete block ``B`` whose body is one store
``X[v0, v1, ...] = f(v)`` (indices: distinct iteration variables) and replaces every load
``X[e0, e1, ...]`` in the scope by ``f`` with ``v_k := e_k``; the buffer ``X`` disappears. Its
output must not be a function parameter (someone outside reads it).

`reverse_compute_inline(C)` is the mirror: the consumer ``C`` has one store
``Y[g(v)] = h(X[v_p0, v_p1, ...], ...)`` that loads the producer's buffer ``X`` exactly once,
with indices that are a permutation of all of ``C``'s iteration variables (a bijection), so each
producer instance ``X[u] = f(u)`` can directly compute ``Y[g(v := u)] = h(f(u), ...)``. The
producer must be a complete block that is the only writer of ``X``, and ``C`` its only reader.

The module also holds the small tree helpers the other hard primitives share (removing a block's
loop nest, refreshing a block's read/write regions after its body changed).

Example (compute_inline of B, before/after)::

    B = T.alloc_buffer((16,))
    for i in range(16):                              for i in range(16):
        with T.block("B"): B[vi] = A[vi] * 2.0   →        with T.block("C"): C[vi] = A[vi] * 2.0 + 1.0
    for i in range(16):
        with T.block("C"): C[vi] = B[vi] + 1.0
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ingot.ir.buffer import Buffer
from ingot.ir.expr import BufferLoad, Var
from ingot.ir.functor import Mutator, Visitor, collect_loads, collect_vars, substitute
from ingot.tir.stmt import Block, BlockRealize, BufferStore, For, Stmt

from ..analysis import block_kind, buffer_is_param, child_block_realizes, scope_block, writer_counts
from ..instruction import BlockRV, InstructionKind
from ..state import StmtSRef, _Replacer

COMPUTE_INLINE = InstructionKind("compute_inline", inputs=("block",))
REVERSE_COMPUTE_INLINE = InstructionKind("reverse_compute_inline", inputs=("block",))


# -- shared helpers (used by compute_at, rfactor, blockize, ...) ------------------------------------
def refresh_regions(block: Block) -> Block:
    """``block`` with reads/writes recomputed from its body (after a primitive rewrote the body).

    Example:
        >>> # new_block = refresh_regions(block.replace(body=new_body))
    """
    from ingot.tir.analysis import infer_block_access_regions

    reads, writes = infer_block_access_regions(block)
    return block.replace(reads=tuple(reads), writes=tuple(writes))


def nest_top(sref: StmtSRef) -> Stmt:
    """The statement to remove to delete block ``sref`` with the loops that hold nothing else:
    its realize, or the outermost loop of the chain of single-child loops above it."""
    stmt: Stmt = sref.realize
    parent = sref.parent
    while parent is not None and isinstance(parent.stmt, For) and parent.stmt.body is stmt:
        stmt = parent.stmt
        parent = parent.parent
    return stmt


def contains(stmt: Stmt, target: Stmt) -> bool:
    """Whether ``target`` (by identity) is ``stmt`` or a statement inside it."""
    found = [False]

    class _Find(Visitor):
        def generic_visit(self, node):
            if node is target:
                found[0] = True
            elif not found[0] and isinstance(node, Stmt):
                super().generic_visit(node)

    _Find().visit(stmt)
    return found[0]


def without_alloc(block: Block, buffer: Buffer) -> Block:
    """``block`` without ``buffer`` among its alloc_buffers."""
    return block.replace(alloc_buffers=tuple(b for b in block.alloc_buffers if b is not buffer))


class LoadRewriter(Mutator):
    """Replace loads of one buffer via ``fn(load) -> expr``; blocks whose bodies change get their
    regions refreshed. Statements listed in ``skip`` (by identity) are left alone."""

    def __init__(self, buffer: Buffer, fn: Callable[[BufferLoad], Any], skip: tuple = ()):
        self.buffer, self.fn, self.skip = buffer, fn, {id(s) for s in skip}
        self.count = 0

    def visit_BufferLoad(self, node: BufferLoad) -> Any:
        node = self.generic_visit(node)
        if node.buffer is self.buffer:
            self.count += 1
            return self.fn(node)
        return node

    def visit_Block(self, node: Block) -> Any:
        if id(node) in self.skip:
            return node
        new = self.generic_visit(node)
        return new if new is node else refresh_regions(new)

    def visit_BlockRealize(self, node: BlockRealize) -> Any:
        if id(node) in self.skip:
            return node
        return self.generic_visit(node)


def check_in_scope_body(sch: Any, sref: StmtSRef, primitive: str) -> None:
    """Raise unless block ``sref`` sits in the body of its scope block (not in the scope's init,
    e.g. the init block that blockize creates), where the dataflow primitives can reason about it."""
    scope = scope_block(sref)
    if not any(r is sref.realize for r in child_block_realizes(scope.stmt.body)):
        sch._raise(f"{primitive}: block {sref.stmt.name_hint!r} is inside the init of block {scope.stmt.name_hint!r}",
                   "schedule the block before blockize moved it into an init", sref.func_name, [sref.stmt])


def _single_store(sch: Any, sref: StmtSRef, primitive: str) -> BufferStore:
    block = sref.stmt
    if not isinstance(block.body, BufferStore):
        sch._raise(f"{primitive}: the body of block {block.name_hint!r} is not a single BufferStore",
                   "only a block whose body is one store can be inlined; split the computation into "
                   "one block per store first", sref.func_name, [block])
    return block.body


def _check_complete(sch: Any, sref: StmtSRef, primitive: str, role: str) -> None:
    check_in_scope_body(sch, sref, primitive)
    scope = scope_block(sref)
    if block_kind(sref.stmt, writer_counts(scope)) != "complete":
        sch._raise(f"{primitive}: {role} block {sref.stmt.name_hint!r} is not a complete block",
                   "a complete block has only spatial iteration variables, no init, is the only writer of its "
                   "output and does not read it (reductions cannot be inlined)", sref.func_name, [sref.stmt])


def _distinct_iter_vars(indices: tuple, block: Block) -> Optional[list[Var]]:
    own = {id(iv.var) for iv in block.iter_vars}
    if not all(isinstance(i, Var) and id(i) in own for i in indices):
        return None
    if len({id(i) for i in indices}) != len(indices):
        return None
    return list(indices)


def _install_scope(sch: Any, scope: StmtSRef, new_body: Stmt, dead: Buffer) -> None:
    block = without_alloc(scope.stmt.replace(body=new_body), dead)
    sch.state.replace(scope.func_name, scope.stmt, block)


# -- compute_inline ---------------------------------------------------------------------------------
def compute_inline(sch: Any, block: BlockRV) -> None:
    """Inline the complete block ``block`` into every consumer; the block and its buffer vanish.

    Example:
        >>> # sch.compute_inline(sch.get_block("B"))    # trace: sch.compute_inline(block=b0)
    """
    # Step 1. Checks: complete, one store with distinct-iter-var indices, intermediate output.
    sref = sch._block(block, "compute_inline")
    blk: Block = sref.stmt
    _check_complete(sch, sref, "compute_inline", "the")
    store = _single_store(sch, sref, "compute_inline")
    buffer = store.buffer
    func = sch.mod[sref.func_name]
    if buffer_is_param(func, buffer):
        sch._raise(f"compute_inline: block {blk.name_hint!r} writes the function output {buffer.name!r}",
                   "an output buffer must be computed; inline blocks that write intermediate buffers only "
                   "(or use reverse_compute_inline on the consumer)", sref.func_name, [blk])
    index_vars = _distinct_iter_vars(store.indices, blk)
    if index_vars is None:
        sch._raise(f"compute_inline: the store of block {blk.name_hint!r} is not indexed by distinct iteration "
                   f"variables ({buffer.name}[{', '.join(map(str, store.indices))}])",
                   "inlining needs each element to be produced from its own index; transform the layout "
                   "first", sref.func_name, [blk])
    if any(id(v) not in {id(x) for x in index_vars} for v in collect_vars(store.value)
           if any(v is iv.var for iv in blk.iter_vars)):
        sch._raise(f"compute_inline: the value stored by block {blk.name_hint!r} uses an iteration variable "
                   "that is not an index of the store", "such a block is not a pure function of its output index",
                   sref.func_name, [blk])
    scope = scope_block(sref)
    if scope.stmt.init is not None and collect_loads(scope.stmt.init, buffer):
        sch._raise("compute_inline: the scope block's init reads the buffer", "not supported", sref.func_name)

    # Step 2. Remove the block's nest; rewrite every load of the buffer in the scope.
    top = nest_top(sref)
    body = _Replacer({id(top): None}).visit(scope.stmt.body)
    if body is None:
        sch._raise(f"compute_inline: block {blk.name_hint!r} has no consumer in its scope",
                   "there is nothing to inline into", sref.func_name, [blk])

    def inline(load: BufferLoad) -> Any:
        return substitute(store.value, {v: i for v, i in zip(index_vars, load.indices)})

    rewriter = LoadRewriter(buffer, inline)
    body = rewriter.visit(body)
    if rewriter.count == 0:
        sch._raise(f"compute_inline: nothing in the scope reads {buffer.name!r} (written by {blk.name_hint!r})",
                   "a block without consumers cannot be inlined; remove it from the computation instead",
                   sref.func_name, [blk])
    _install_scope(sch, scope, body, buffer)
    sch._record(COMPUTE_INLINE, [block], [], [])


# -- reverse_compute_inline ---------------------------------------------------------------------------
def reverse_compute_inline(sch: Any, block: BlockRV) -> None:
    """Inline the consumer ``block`` into its single producer; the consumer and the intermediate
    buffer vanish, the producer writes the consumer's output.

    Example:
        >>> # sch.reverse_compute_inline(sch.get_block("C"))   # trace: sch.reverse_compute_inline(block=b1)
    """
    # Step 1. The consumer: complete, one store, reads exactly one intermediate buffer once.
    sref = sch._block(block, "reverse_compute_inline")
    consumer: Block = sref.stmt
    _check_complete(sch, sref, "reverse_compute_inline", "the consumer")
    store = _single_store(sch, sref, "reverse_compute_inline")
    scope = scope_block(sref)
    realizes = child_block_realizes(scope.stmt.body)
    func = sch.mod[sref.func_name]
    produced = {}
    for r in realizes:
        if r.block is not consumer:
            for w in r.block.writes:
                produced.setdefault(id(w.buffer), []).append(r)
    inputs = [x.buffer for x in consumer.reads if id(x.buffer) in produced]
    if len(inputs) != 1:
        sch._raise(f"reverse_compute_inline: block {consumer.name_hint!r} reads {len(inputs)} buffers produced in "
                   "its scope", "it must read exactly one producer's buffer", sref.func_name, [consumer])
    buffer = inputs[0]
    if buffer_is_param(func, buffer):
        sch._raise(f"reverse_compute_inline: buffer {buffer.name!r} is a function parameter",
                   "only an intermediate buffer can disappear", sref.func_name, [consumer])
    producers = produced[id(buffer)]
    if len(producers) != 1:
        sch._raise(f"reverse_compute_inline: buffer {buffer.name!r} has {len(producers)} writers",
                   "the producer must be the only writer", sref.func_name, [consumer])
    prealize = producers[0]
    psref = sch.state.sref_of(sref.func_name, prealize.block)
    _check_complete(sch, psref, "reverse_compute_inline", "the producer")
    pstore = _single_store(sch, psref, "reverse_compute_inline")
    loads = collect_loads(store.value, buffer)
    if len(loads) != 1:
        sch._raise(f"reverse_compute_inline: block {consumer.name_hint!r} loads {buffer.name!r} {len(loads)} times",
                   "it must load the producer's buffer exactly once", sref.func_name, [consumer])
    load_vars = _distinct_iter_vars(loads[0].indices, consumer)
    if load_vars is None or len(load_vars) != len(consumer.iter_vars):
        sch._raise(f"reverse_compute_inline: the load {loads[0]} in block {consumer.name_hint!r} is not a bijection "
                   "of its iteration variables", "each iteration variable must index the producer's buffer once "
                   "(no broadcast, no offsets)", sref.func_name, [consumer])
    readers = [r for r in realizes if r.block is not consumer and any(x.buffer is buffer for x in r.block.reads)]
    if readers:
        sch._raise(f"reverse_compute_inline: buffer {buffer.name!r} has other consumers "
                   f"{[r.block.name_hint for r in readers]}", "the consumer must be the only reader",
                   sref.func_name, [consumer] + readers)
    pindex = _distinct_iter_vars(pstore.indices, psref.stmt)
    if pindex is None:
        sch._raise(f"reverse_compute_inline: the producer {psref.stmt.name_hint!r} store is not indexed by distinct "
                   "iteration variables", "transform the layout first", sref.func_name, [psref.stmt])

    # Step 2. The producer's store, rewritten: v_consumer := u_producer via the load's indices.
    vmap = {cv: pv for cv, pv in zip(load_vars, pindex)}
    new_value = substitute(store.value, vmap)
    new_value = LoadRewriter(buffer, lambda _load: pstore.value).visit(new_value)
    new_store = BufferStore(store.buffer, new_value, [substitute(i, vmap) for i in store.indices])
    new_producer = refresh_regions(psref.stmt.replace(body=new_store))

    # Step 3. Remove the consumer's nest, install the producer, drop the buffer.
    top = nest_top(sref)
    body = _Replacer({id(top): None, id(psref.stmt): new_producer}).visit(scope.stmt.body)
    _install_scope(sch, scope, body, buffer)
    sch._record(REVERSE_COMPUTE_INLINE, [block], [], [])
