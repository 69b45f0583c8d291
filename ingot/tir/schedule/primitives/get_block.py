"""Lookup primitives: `get_block`, `get_loops`, `get_child_blocks`, `get_producers`, `get_consumers`.

Note: lookups change nothing; they return handles and are recorded (pure instructions, so
`Trace.simplified` drops the unused ones). Producers/consumers are computed from the blocks'
read/write regions within the block's scope (its enclosing block).

Example:
    >>> # b = sch.get_block("C"); i, j, k = sch.get_loops(b)
"""
from __future__ import annotations

from typing import Any, Optional

from ingot.tir.stmt import Block

from ..analysis import child_block_realizes, enclosing_loops, scope_block
from ..instruction import BlockRV, InstructionKind, LoopRV

GET_BLOCK = InstructionKind("get_block", attrs=("name", "func_name"), is_pure=True)
GET_LOOPS = InstructionKind("get_loops", inputs=("block",), is_pure=True, returns_list=True)
GET_CHILD_BLOCKS = InstructionKind("get_child_blocks", inputs=("block_or_loop",), is_pure=True, returns_list=True)
GET_PRODUCERS = InstructionKind("get_producers", inputs=("block",), is_pure=True, returns_list=True)
GET_CONSUMERS = InstructionKind("get_consumers", inputs=("block",), is_pure=True, returns_list=True)


def get_block(sch: Any, name: str, func_name: Optional[str] = None) -> BlockRV:
    """The block called ``name`` in function ``func_name`` (default: the one being worked on, "main").

    Example:
        >>> # b0 = sch.get_block("C")          # trace: b0 = sch.get_block(name="C", func_name="main")
    """
    func_name = func_name or sch.func_working_on
    if func_name is None or func_name not in sch.state.func_names():
        raise ValueError(
            f"get_block({name!r}): no PrimFunc {func_name!r} in the module; pass func_name= one of "
            f"{sch.state.func_names()}"
        )
    sref = sch.state.block_sref(func_name, name)
    if sref is None or name == "root":
        known = sorted(n for n in sch.state.blocks(func_name) if n != "root")
        sch._raise(f"get_block: no block named {name!r} in function {func_name!r}",
                   f"the function's blocks are {known}", func_name)
    rv = sch._new_rv(BlockRV, sref)
    sch._record(GET_BLOCK, [], [name, func_name], [rv])
    return rv


def get_loops(sch: Any, block: BlockRV) -> list[LoopRV]:
    """The loops above ``block``, outermost first (up to the enclosing block).

    Example:
        >>> # i, j, k = sch.get_loops(b0)      # trace: l1, l2, l3 = sch.get_loops(block=b0)
    """
    sref = sch._block(block, "get_loops")
    outputs = [sch._new_rv(LoopRV, s) for s in enclosing_loops(sref)]
    sch._record(GET_LOOPS, [block], [], outputs)
    return outputs


def get_child_blocks(sch: Any, block_or_loop: Any) -> list[BlockRV]:
    """The blocks directly under a block or loop (not nested inside other blocks), in order.

    Example:
        >>> # sch.get_child_blocks(sch.get_loops(b0)[0])
    """
    sref = sch._block_or_loop(block_or_loop, "get_child_blocks")
    stmt = sref.stmt.body if isinstance(sref.stmt, Block) else sref.stmt
    outputs = [
        sch._new_rv(BlockRV, sch.state.sref_of(sref.func_name, r.block)) for r in child_block_realizes(stmt)
    ]
    sch._record(GET_CHILD_BLOCKS, [block_or_loop], [], outputs)
    return outputs


def _neighbours(sch: Any, block: BlockRV, producers: bool) -> list[Any]:
    sref = sch._block(block, "get_producers" if producers else "get_consumers")
    me = sref.stmt
    mine = me.reads if producers else me.writes
    wanted = {id(r.buffer) for r in mine}
    if producers:  # a reduction reads its own output; that is not a producer relation
        wanted -= {id(w.buffer) for w in me.writes}
    found = []
    for realize in child_block_realizes(scope_block(sref).stmt.body):
        other = realize.block
        if other is me:
            continue
        theirs = other.writes if producers else other.reads
        if any(id(r.buffer) in wanted for r in theirs):
            found.append(sch.state.sref_of(sref.func_name, other))
    return found


def get_producers(sch: Any, block: BlockRV) -> list[BlockRV]:
    """Blocks in the same scope that write a buffer ``block`` reads.

    Example:
        >>> # [sch.get(b).name_hint for b in sch.get_producers(sch.get_block("C"))]
    """
    outputs = [sch._new_rv(BlockRV, s) for s in _neighbours(sch, block, True)]
    sch._record(GET_PRODUCERS, [block], [], outputs)
    return outputs


def get_consumers(sch: Any, block: BlockRV) -> list[BlockRV]:
    """Blocks in the same scope that read a buffer ``block`` writes.

    Example:
        >>> # [sch.get(b).name_hint for b in sch.get_consumers(sch.get_block("B"))]
    """
    outputs = [sch._new_rv(BlockRV, s) for s in _neighbours(sch, block, False)]
    sch._record(GET_CONSUMERS, [block], [], outputs)
    return outputs
