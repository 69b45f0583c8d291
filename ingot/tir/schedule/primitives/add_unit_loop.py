"""`add_unit_loop`: wrap a block or loop in a new loop of extent 1.

Note: useful to give a block without loops a loop to bind, parallelize or compute at. Always
legal: a loop of one iteration changes nothing.

Example (before/after)::

    with T.block("B"): ...        →     for u in T.serial(1):
                                            with T.block("B"): ...
"""
from __future__ import annotations

from typing import Any

from ingot.ir.expr import Var
from ingot.tir.stmt import Block, For, ForKind

from ..instruction import InstructionKind, LoopRV

ADD_UNIT_LOOP = InstructionKind("add_unit_loop", inputs=("block_or_loop",))


def add_unit_loop(sch: Any, block_or_loop: Any) -> LoopRV:
    """Add a loop of extent 1 right above a block (its realize) or a loop; returns the new loop.

    Example:
        >>> # u = sch.add_unit_loop(b0)       # trace: l1 = sch.add_unit_loop(block_or_loop=b0)
    """
    sref = sch._block_or_loop(block_or_loop, "add_unit_loop")
    target = sref.realize if isinstance(sref.stmt, Block) else sref.stmt
    if isinstance(sref.stmt, Block) and sref.parent is None:
        sch._raise("add_unit_loop: cannot add a loop above the root block", "pass a block inside the function",
                   sref.func_name, [sref.stmt])
    var = Var("u", "int32" if isinstance(sref.stmt, Block) else sref.stmt.loop_var.dtype)
    loop = For(var, 0, 1, ForKind.SERIAL, target)
    sch.state.replace(sref.func_name, target, loop)
    out = sch._new_rv(LoopRV, sch.state.loop_sref(sref.func_name, loop))
    sch._record(ADD_UNIT_LOOP, [block_or_loop], [], [out])
    return out
