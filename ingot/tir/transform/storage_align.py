"""The lowering side of `Schedule.storage_align`: padded strides for allocated buffers.

Note: ``sch.storage_align(block, i, axis, factor, offset)`` only annotates the block that writes
the buffer (``"buffer_dim_align"``: ``(buffer_index, axis, factor, offset)`` entries); lowering
gives the effect, as in TVM. The annotation lives on a block, but blocks disappear in
`ConvertBlocksToLoops` while the buffer's final shape is only known after
`CompactBufferAllocation` (which may shrink it to a per-tile region), so the request travels in
between as a PrimFunc attribute:

* `ConvertBlocksToLoops` calls `collect_dim_aligns` and stores the requests under the function
  attribute ``"buffer_dim_align"`` as ``((buffer name, axis, factor, offset), ...)`` — by name,
  because compaction replaces the buffer (and its data variable) by a smaller one of the same name.
* `FlattenBuffer` computes, for each `Allocate` of a buffer named there, `aligned_strides` of the
  (compacted) shape and flattens every access with them, then drops the attribute.

The strides follow TVM's contract (docs/schedule.md): from the innermost dimension out, the stride of
dimension ``d`` starts as ``shape[d + 1] * stride[d + 1]`` and, when ``d`` is aligned, grows to the
smallest ``s`` with ``s % factor == offset``; the outer strides build on the padded one. Only
allocated (never parameter) buffers are aligned, so the padding changes no caller-visible layout.
A dimension with a symbolic extent is left unpadded.

Why: a buffer whose planes are a multiple of 4 KiB apart maps every plane's element ``k`` to the
same L1 set and trips the CPU's 4K-aliasing store/load check; an odd number of cache lines of
padding per plane spreads them (``storage_align(b, 0, axis=0, factor=1024, offset=16)`` on float32).

Example:
    >>> aligned_strides((16, 784, 64), {0: (1024, 16)})
    (50192, 64, 1)
"""
from __future__ import annotations

from typing import Any

from ingot.ir.expr import as_const_int

from ..stmt import Block, Stmt

__all__ = ["DIM_ALIGN_ATTR", "collect_dim_aligns", "aligned_strides", "dim_aligns_by_name"]

#: The block annotation of `Schedule.storage_align`, reused as the PrimFunc attribute key.
DIM_ALIGN_ATTR = "buffer_dim_align"


def _as_int(value: Any) -> int:
    return int(getattr(value, "value", value))


def collect_dim_aligns(body: Stmt) -> "tuple[tuple[str, int, int, int], ...]":
    """Every ``(buffer name, axis, factor, offset)`` requested by a block under ``body`` (blocks still present).

    Example:
        >>> from ingot.tir import Evaluate
        >>> collect_dim_aligns(Evaluate(0))
        ()
    """
    from ingot.ir.functor import Visitor

    found: list = []

    class _Collect(Visitor):
        def visit_Block(self, node: Block) -> None:
            for entry in node.annotations.get(DIM_ALIGN_ATTR, ()):
                index, axis, factor, offset = (_as_int(v) for v in entry)
                found.append((node.writes[index].buffer.name, axis, factor, offset))
            self.generic_visit(node)

    _Collect().visit(body)
    return tuple(found)


def dim_aligns_by_name(entries: Any) -> "dict[str, dict[int, tuple[int, int]]]":
    """``{buffer name: {axis: (factor, offset)}}`` of a ``"buffer_dim_align"`` function attribute.

    Example:
        >>> dim_aligns_by_name((("V", 0, 1024, 16),))
        {'V': {0: (1024, 16)}}
    """
    out: dict = {}
    for entry in entries or ():
        name, axis, factor, offset = entry
        out.setdefault(str(getattr(name, "value", name)), {})[_as_int(axis)] = (_as_int(factor), _as_int(offset))
    return out


def aligned_strides(shape: Any, aligns: "dict[int, tuple[int, int]]") -> "tuple[int, ...] | None":
    """The element strides of ``shape`` with dimension ``axis`` padded to ``s % factor == offset`` for
    each ``aligns[axis] = (factor, offset)`` (module note); None when nothing changes (no request
    applies, or a padded dimension's inner extents are symbolic).

    Example:
        >>> aligned_strides((4, 8), {0: (32, 1)}), aligned_strides((4, 32), {0: (32, 0)})
        ((33, 1), None)
    """
    dims = [as_const_int(d) for d in shape]
    ndim = len(dims)
    aligns = {axis % ndim: fo for axis, fo in aligns.items() if -ndim <= axis < ndim} if ndim else {}
    if not aligns or any(d is None for d in dims[1:]):
        return None
    # Step 1. Innermost first, as TVM: pad each aligned stride, the outer ones build on it.
    strides, compact = [0] * ndim, [0] * ndim
    stride = 1
    for d in range(ndim - 1, -1, -1):
        compact[d] = dims[d + 1] * compact[d + 1] if d < ndim - 1 else 1
        if d in aligns:
            factor, offset = aligns[d]
            stride += (offset - stride) % factor
        strides[d] = stride
        stride *= dims[d] if d else 1
    # Step 2. None when the request was already met (the buffer stays compact).
    return None if strides == compact else tuple(strides)
