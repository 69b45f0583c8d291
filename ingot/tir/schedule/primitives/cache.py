"""`cache_read` / `cache_write`: stage a buffer through a copy in another storage scope.

Note: `cache_read(block, i, scope)` copies the ``i``-th buffer ``block`` reads into a new buffer
``<name>_<scope>`` with a copy block placed in the block's scope before the first consumer (and
after the last producer), and makes the consumers read the copy. `cache_write(block, i, scope)`
makes ``block`` write a new buffer ``<name>_<scope>`` and inserts a write-back block right after
it; it returns that write-back block. The copy covers the whole buffer (a superset of what the
consumers read, always in bounds); `compute_at` then shrinks it to the region a loop needs. The
cache buffer is allocated by the scope block.

Example (cache_read, before/after)::

    with T.block("B"): B[vi] = A[vi] * 2.0      A_shared = T.alloc_buffer((128,), scope="shared")
                                                for ax0 in T.serial(128):
                                             →      with T.block("A_shared"): A_shared[v0] = A[v0]
                                                with T.block("B"): B[vi] = A_shared[vi] * 2.0
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ingot.ir.buffer import Buffer, BufferRegion, decl_buffer
from ingot.ir.expr import IntImm, IterVar, Range, Var
from ingot.ir.functor import Mutator
from ingot.tir.stmt import Block, BlockRealize, BufferStore, For, ForKind, SeqStmt, Stmt

from ..analysis import child_block_realizes, scope_block, writer_counts
from ..instruction import BlockRV, InstructionKind

CACHE_READ = InstructionKind("cache_read", inputs=("block", "read_buffer_index", "storage_scope", "consumer_blocks[]"))
CACHE_WRITE = InstructionKind("cache_write",
                              inputs=("block", "write_buffer_index", "storage_scope", "consumer_blocks[]"))

STORAGE_SCOPES = ("global", "local", "shared", "shared.dyn", "warp", "local.fragment")


class _ReplaceBuffer(Mutator):
    """Replace one buffer by another in loads, stores and regions (not in definitions)."""

    def __init__(self, old: Buffer, new: Buffer):
        self.old, self.new = old, new

    def visit_Buffer(self, node: Buffer) -> Buffer:
        return self.new if node is self.old else node


def replace_buffer(stmt: Any, old: Buffer, new: Buffer) -> Any:
    """``stmt`` with every use of buffer ``old`` (loads, stores, regions) replaced by ``new``.

    Example:
        >>> # replace_buffer(block, A, A_shared)
    """
    return _ReplaceBuffer(old, new).visit(stmt)


def _copy_nest(src: Buffer, dst: Buffer, name: str) -> For:
    """Loops ``ax0, ax1, …`` over ``src``'s shape around a block ``name``: dst[v] = src[v]."""
    loop_vars = [Var(f"ax{d}", s.dtype) for d, s in enumerate(src.shape)]
    iter_vars = [IterVar(Range.from_min_extent(IntImm(s.dtype, 0), s), Var(f"v{d}", s.dtype), "S")
                 for d, s in enumerate(src.shape)]
    idx = [iv.var for iv in iter_vars]
    block = Block(
        iter_vars,
        reads=[BufferRegion.from_point(src, idx)],
        writes=[BufferRegion.from_point(dst, idx)],
        name_hint=name,
        body=BufferStore(dst, src.load(idx), idx),
    )
    stmt: Stmt = BlockRealize(loop_vars, True, block)
    for var, extent in reversed(list(zip(loop_vars, src.shape))):
        stmt = For(var, 0, extent, ForKind.SERIAL, stmt)
    return stmt


def _unique(name: str, taken: Any) -> str:
    if name not in taken:
        return name
    k = 1
    while f"{name}_{k}" in taken:
        k += 1
    return f"{name}_{k}"


def _top_level_index(scope_body: Stmt, realize: BlockRealize) -> int:
    """Index of the top-level statement of a scope body that contains ``realize``."""
    items = scope_body.seq if isinstance(scope_body, SeqStmt) else (scope_body,)
    for k, item in enumerate(items):
        if item is realize or any(r is realize for r in child_block_realizes(item)):
            return k
    raise AssertionError("internal error: block not found in its scope")


def _check_args(sch: Any, primitive: str, sref: Any, regions: Sequence[BufferRegion], index: int, scope: str,
                what: str) -> Buffer:
    if scope not in STORAGE_SCOPES:
        raise ValueError(f"{primitive}: unknown storage scope {scope!r}; use one of {STORAGE_SCOPES}")
    if not isinstance(index, int) or not 0 <= index < len(regions):
        sch._raise(f"{primitive}: block {sref.stmt.name_hint!r} {what} {len(regions)} buffer(s); index {index!r} "
                   "is out of range", f"the buffers it {what.split()[0][:-1]}s are {[r.buffer.name for r in regions]}",
                   sref.func_name, [sref.stmt])
    return regions[index].buffer


def _install(sch: Any, scope: Any, new_body: Stmt, cache: Buffer) -> None:
    block = scope.stmt
    new_block = block.replace(body=new_body, alloc_buffers=block.alloc_buffers + (cache,))
    sch.state.replace(scope.func_name, block, new_block)


def cache_read(sch: Any, block: BlockRV, read_buffer_index: int, storage_scope: str,
               consumer_blocks: Optional[Sequence[BlockRV]] = None) -> BlockRV:
    """Read the ``read_buffer_index``-th buffer of ``block`` through a copy in ``storage_scope``;
    returns the copy block. ``consumer_blocks`` (default: every reader in the scope) are redirected.

    Example:
        >>> # A_shared = sch.cache_read(b0, 0, "shared")
        >>> # trace: b4 = sch.cache_read(block=b0, read_buffer_index=0, storage_scope="shared", consumer_blocks=[])
    """
    # Step 1. Checks: the buffer is read by the block; pick the consumers to redirect.
    sref = sch._block(block, "cache_read")
    buffer = _check_args(sch, "cache_read", sref, sref.stmt.reads, read_buffer_index, storage_scope, "reads")
    scope = scope_block(sref)
    body = scope.stmt.body
    realizes = child_block_realizes(body)
    wanted = None if not consumer_blocks else {id(sch._block(b, "cache_read", "consumer_blocks").stmt)
                                               for b in consumer_blocks}
    consumers = [r for r in realizes if any(x.buffer is buffer for x in r.block.reads)
                 and (wanted is None or id(r.block) in wanted or r.block is sref.stmt)]
    for r in consumers:
        if any(w.buffer is buffer for w in r.block.writes):
            sch._raise(f"cache_read: block {r.block.name_hint!r} both reads and writes buffer {buffer.name!r}",
                       "a cache of a buffer updated in place would go stale; use cache_write instead",
                       sref.func_name, [r])
    writers = [r for r in realizes if any(w.buffer is buffer for w in r.block.writes)]
    first = min(_top_level_index(body, r) for r in consumers)
    if writers and max(_top_level_index(body, r) for r in writers) >= first:
        sch._raise(f"cache_read: buffer {buffer.name!r} is written after (or in the same loop nest as) its first "
                   "consumer", "the copy must sit between the last producer and the first consumer; "
                   "split the loop nest or cache a buffer with a clear producer/consumer order",
                   sref.func_name, [consumers[0], writers[-1]])

    # Step 2. The cache buffer and the copy block.
    taken = set(sch.state.blocks(sref.func_name))
    name = _unique(f"{buffer.name}_{storage_scope.replace('.', '_')}", taken)
    cache = decl_buffer(buffer.shape, buffer.dtype, name, scope=storage_scope)
    nest = _copy_nest(buffer, cache, name)

    # Step 3. Redirect the consumers, insert the copy before the first one, allocate the cache.
    changes = {id(r): r.replace(block=replace_buffer(r.block, buffer, cache)) for r in consumers}
    from ..state import _Replacer

    new_body = _Replacer(changes).visit(body)
    items = list(new_body.seq) if isinstance(new_body, SeqStmt) else [new_body]
    items.insert(first, nest)
    _install(sch, scope, SeqStmt(items), cache)
    out = sch._new_rv(BlockRV, sch.state.block_sref(sref.func_name, name))
    sch._record(CACHE_READ, [block, read_buffer_index, storage_scope, *(consumer_blocks or [])], [], [out])
    return out


def cache_write(sch: Any, block: BlockRV, write_buffer_index: int, storage_scope: str,
                consumer_blocks: Optional[Sequence[BlockRV]] = None) -> BlockRV:
    """Make ``block`` write its ``write_buffer_index``-th buffer into a cache in ``storage_scope``
    and copy it back right after; returns the write-back block. ``consumer_blocks`` read the cache.

    Example:
        >>> # C_local = sch.cache_write(b0, 0, "local")
        >>> # trace: b4 = sch.cache_write(block=b0, write_buffer_index=0, storage_scope="local", consumer_blocks=[])
    """
    # Step 1. Checks: the buffer is written by the block, which is its only writer in the scope.
    sref = sch._block(block, "cache_write")
    buffer = _check_args(sch, "cache_write", sref, sref.stmt.writes, write_buffer_index, storage_scope, "writes")
    scope = scope_block(sref)
    if writer_counts(scope).get(id(buffer), 0) != 1:
        sch._raise(f"cache_write: buffer {buffer.name!r} has more than one writer in the scope",
                   "cache_write needs the block to be the only writer of the buffer (apply it before "
                   "decompose_reduction)", sref.func_name, [sref.stmt])
    body = scope.stmt.body
    realize = sref.realize

    # Step 2. The cache buffer; the block writes it; a write-back block follows.
    taken = set(sch.state.blocks(sref.func_name))
    name = _unique(f"{buffer.name}_{storage_scope.replace('.', '_')}", taken)
    cache = decl_buffer(buffer.shape, buffer.dtype, name, scope=storage_scope)
    nest = _copy_nest(cache, buffer, name)
    changes = {id(realize): realize.replace(block=replace_buffer(realize.block, buffer, cache))}
    for b in consumer_blocks or []:
        c = sch._block(b, "cache_write", "consumer_blocks")
        changes[id(c.realize)] = c.realize.replace(block=replace_buffer(c.stmt, buffer, cache))
    position = _top_level_index(body, realize)
    from ..state import _Replacer

    new_body = _Replacer(changes).visit(body)
    items = list(new_body.seq) if isinstance(new_body, SeqStmt) else [new_body]
    items.insert(position + 1, nest)
    _install(sch, scope, SeqStmt(items), cache)
    out = sch._new_rv(BlockRV, sch.state.block_sref(sref.func_name, name))
    sch._record(CACHE_WRITE, [block, write_buffer_index, storage_scope, *(consumer_blocks or [])], [], [out])
    return out
