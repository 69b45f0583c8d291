"""`storage_align`: ask lowering to pad a buffer's strides (to avoid shared-memory bank conflicts
or to align rows for vector loads).

Note: this is an annotation, consumed by lowering. The block that writes the buffer gets the
annotation ``"buffer_dim_align"``: a tuple of ``(buffer_index, axis, factor, offset)`` entries.
When lowering flattens the buffer it must choose the stride of dimension ``axis`` (in
elements) as the smallest ``s >= compact stride`` with ``s % factor == offset`` — the same
contract as TVM's ``storage_align``. Only buffers the function allocates can be aligned.

Example (before/after)::

    with T.block("B"):      sch.storage_align(b, 0, axis=0, factor=32, offset=1)  →
    with T.block("B"): T.block_attr({"buffer_dim_align": ((0, 0, 32, 1),)})
"""
from __future__ import annotations

from typing import Any

from ..instruction import BlockRV, InstructionKind

STORAGE_ALIGN = InstructionKind("storage_align", inputs=("block", "buffer_index", "axis", "factor", "offset"))

ANNOTATION_KEY = "buffer_dim_align"


def storage_align(sch: Any, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int) -> None:
    """Align dimension ``axis`` of the ``buffer_index``-th buffer written by ``block``:
    its stride becomes ``k * factor + offset`` elements.

    Example:
        >>> # sch.storage_align(sch.get_block("A_shared"), 0, axis=0, factor=32, offset=8)
    """
    sref = sch._block(block, "storage_align")
    node = sref.stmt
    writes = node.writes
    if not isinstance(buffer_index, int) or not 0 <= buffer_index < len(writes):
        sch._raise(f"storage_align: block {node.name_hint!r} writes {len(writes)} buffer(s); index "
                   f"{buffer_index!r} is out of range", "pass the index of a buffer in the block's writes",
                   sref.func_name, [node])
    buffer = writes[buffer_index].buffer
    if any(p is buffer for p in sch.mod[sref.func_name].params):
        sch._raise(f"storage_align: buffer {buffer.name!r} is a function parameter",
                   "only buffers allocated inside the function can be padded", sref.func_name, [node])
    if not isinstance(axis, int) or not -buffer.ndim <= axis < buffer.ndim:
        sch._raise(f"storage_align: axis {axis!r} is out of range for buffer {buffer.name!r} ({buffer.ndim}-D)",
                   "pass an axis in [0, ndim)", sref.func_name, [node])
    axis = axis % buffer.ndim
    if not isinstance(factor, int) or factor <= 0 or not isinstance(offset, int) or not 0 <= offset < factor:
        sch._raise(f"storage_align: factor {factor!r} / offset {offset!r} are invalid",
                   "factor must be a positive int and 0 <= offset < factor", sref.func_name, [node])
    # IR is immutable: the annotation is a tuple of 4-tuples.
    entries = tuple(tuple(e) for e in node.annotations.get(ANNOTATION_KEY, ())
                    if not (e[0] == buffer_index and e[1] == axis)) + ((buffer_index, axis, factor, offset),)
    sch.state.replace(sref.func_name, node, node.replace(annotations=node.annotations.set(ANNOTATION_KEY, entries)))
    sch._record(STORAGE_ALIGN, [block, buffer_index, axis, factor, offset], [], [])
