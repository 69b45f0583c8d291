"""`annotate` / `unannotate`: attach or remove a key-value annotation on a loop or block.

Note: annotations carry hints to later passes (``"pragma_auto_unroll_max_step"``,
``"meta_schedule.parallel"``, ``"buffer_dim_align"`` from `storage_align`...). They never change
semantics, so they are always legal. An ExprRV value (a sampled decision) is stored as its int.

Example (before/after)::

    for i in T.serial(8):     sch.annotate(i, "pragma_auto_unroll_max_step", 16)  →
    for i in T.serial(8, annotations={"pragma_auto_unroll_max_step": 16}):
"""
from __future__ import annotations

from typing import Any

from ingot.ir.node import freeze
from ingot.tir.stmt import Block

from ..instruction import ExprRV, InstructionKind

ANNOTATE = InstructionKind("annotate", inputs=("block_or_loop", "ann_key", "ann_val"))
UNANNOTATE = InstructionKind("unannotate", inputs=("block_or_loop", "ann_key"))

_ALLOWED = (str, int, float, bool, list, tuple)


def annotate(sch: Any, block_or_loop: Any, ann_key: str, ann_val: Any) -> None:
    """Set annotation ``ann_key`` to ``ann_val`` (str, int, float, bool, list, or ExprRV).

    Example:
        >>> # sch.annotate(b0, "meta_schedule.unroll_explicit", v3)
        >>> # trace: sch.annotate(block_or_loop=b0, ann_key="meta_schedule.unroll_explicit", ann_val=v3)
    """
    sref = sch._block_or_loop(block_or_loop, "annotate")
    if not isinstance(ann_key, str):
        raise TypeError(f"annotate: ann_key must be a str, got {type(ann_key).__name__}")
    value = sch.get(ann_val) if isinstance(ann_val, ExprRV) else ann_val
    if hasattr(value, "item") and not isinstance(value, _ALLOWED):
        value = value.item()
    if not isinstance(value, _ALLOWED):
        raise TypeError(
            f"annotate: value of {ann_key!r} must be a str, int, float, bool, list or ExprRV, "
            f"got {type(value).__name__}: {value!r}")
    node = sref.stmt
    value = freeze(value)  # lists become tuples: IR stays immutable
    sch.state.replace(sref.func_name, node, node.replace(annotations=node.annotations.set(ann_key, value)))
    recorded = list(ann_val) if isinstance(ann_val, tuple) else ann_val
    sch._record(ANNOTATE, [block_or_loop, ann_key, recorded], [], [])


def unannotate(sch: Any, block_or_loop: Any, ann_key: str) -> None:
    """Remove annotation ``ann_key`` (raises if it is not there).

    Example:
        >>> # sch.unannotate(l1, "pragma_auto_unroll_max_step")
    """
    sref = sch._block_or_loop(block_or_loop, "unannotate")
    node = sref.stmt
    if ann_key not in node.annotations:
        what = f"block {node.name_hint!r}" if isinstance(node, Block) else f"loop {node.loop_var.name!r}"
        sch._raise(f"unannotate: {what} has no annotation {ann_key!r}",
                   f"its annotations are {sorted(node.annotations)}", sref.func_name, [node])
    sch.state.replace(sref.func_name, node, node.replace(annotations=node.annotations.without(ann_key)))
    sch._record(UNANNOTATE, [block_or_loop, ann_key], [], [])
