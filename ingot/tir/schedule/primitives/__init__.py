"""Schedule primitives, one module each: legality checks, transformation, instruction kind.

To add a primitive, see docs/schedule.md ("How to add a primitive").
"""
from . import (  # noqa: F401  (importing registers the instruction kinds)
    add_unit_loop, annotate, cache, fuse, get_block, loop_kind, reorder, sampling, set_scope, split,
    storage_align,
)
from . import (  # noqa: F401  (hard primitives)
    blockize_tensorize, compute_at, compute_inline, decompose_reduction, pad_einsum, rfactor,
    transform_layout,
)

