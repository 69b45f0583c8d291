"""`set_scope`: change the storage scope of a buffer the function allocates.

Note: the buffer (the ``buffer_index``-th write of the block) must be allocated inside the
function (a parameter's memory belongs to the caller). Buffers are definitions compared by
identity, so the buffer is replaced by a copy with the new scope everywhere: the allocating
block's ``alloc_buffers``, every load, store and region.

Example (before/after)::

    B = T.alloc_buffer((128,))      sch.set_scope(b, 0, "local")  →   B = T.alloc_buffer((128,), scope="local")
"""
from __future__ import annotations

from typing import Any

from ..instruction import BlockRV, InstructionKind
from .cache import STORAGE_SCOPES, replace_buffer

SET_SCOPE = InstructionKind("set_scope", inputs=("block", "buffer_index", "storage_scope"))


def set_scope(sch: Any, block: BlockRV, buffer_index: int, storage_scope: str) -> None:
    """Set the storage scope of the ``buffer_index``-th buffer written by ``block``.

    Example:
        >>> # sch.set_scope(sch.get_block("B"), 0, "shared")
        >>> # trace: sch.set_scope(block=b0, buffer_index=0, storage_scope="shared")
    """
    sref = sch._block(block, "set_scope")
    if storage_scope not in STORAGE_SCOPES:
        raise ValueError(f"set_scope: unknown storage scope {storage_scope!r}; use one of {STORAGE_SCOPES}")
    writes = sref.stmt.writes
    if not isinstance(buffer_index, int) or not 0 <= buffer_index < len(writes):
        sch._raise(f"set_scope: block {sref.stmt.name_hint!r} writes {len(writes)} buffer(s); index "
                   f"{buffer_index!r} is out of range", "pass the index of a buffer in the block's writes",
                   sref.func_name, [sref.stmt])
    buffer = writes[buffer_index].buffer
    func = sch.mod[sref.func_name]
    if any(p is buffer for p in func.params):
        sch._raise(f"set_scope: buffer {buffer.name!r} is a parameter of function {sref.func_name!r}",
                   "only buffers allocated inside the function can change scope; use cache_write to stage "
                   "a parameter through another scope", sref.func_name, [sref.stmt])
    if buffer.scope == storage_scope:
        new_func = func
    else:
        new = buffer.replace(scope=storage_scope)
        new_func = func.with_body(replace_buffer(func.body, buffer, new))
    sch.state.set_func(sref.func_name, new_func)
    sch._record(SET_SCOPE, [block, buffer_index, storage_scope], [], [])
