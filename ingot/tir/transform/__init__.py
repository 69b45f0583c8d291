"""`ingot.tir.transform`: TensorIR passes (TVM's ``tvm.tir.transform``).

Every pass here is a factory returning an `ingot.transform.Pass` that applies to each `PrimFunc`
of a module. The lowering pipeline that `ingot.lower` runs is `get_lowering_pipeline`
(in `ingot.driver.lower`); docs/passes.md describes each pass and the lowered form.

Example:
    >>> from ingot.tir import transform as T
    >>> seq = T.Sequential([T.LowerInitBlock(), T.ConvertBlocksToLoops(), T.Simplify()])
    >>> [p.name for p in seq.passes]
    ['LowerInitBlock', 'ConvertBlocksToLoops', 'Simplify']
"""
from ingot.ir.transform import PassContext, Sequential  # noqa: F401 - convenience re-exports

from .base import prim_func_pass
from .compact_buffer import CompactBufferAllocation
from .flatten_buffer import FlattenBuffer
from .lower_blocks import ConvertBlocksToLoops, LowerBlocks
from .lower_init_block import LowerInitBlock
from .remove_no_op import RemoveNoOp
from .simplify import Simplify
from .software_prefetch import InjectSoftwarePrefetch
from .unroll import UnrollLoop
from .unswitch import UnswitchRuntimeGuards
from .vectorize import VectorizeLoop

__all__ = [
    "prim_func_pass", "LowerInitBlock", "ConvertBlocksToLoops", "LowerBlocks", "CompactBufferAllocation",
    "FlattenBuffer", "InjectSoftwarePrefetch", "Simplify", "VectorizeLoop", "UnrollLoop", "UnswitchRuntimeGuards", "RemoveNoOp", "PassContext", "Sequential",
]


def _register() -> None:
    # Names other passes can list in PassInfo.required (resolved through the pass registry).
    from ingot.ir.transform import register_pass

    for factory in (LowerInitBlock, ConvertBlocksToLoops, CompactBufferAllocation, FlattenBuffer, Simplify,
                    VectorizeLoop, UnrollLoop, RemoveNoOp, InjectSoftwarePrefetch, UnswitchRuntimeGuards):
        register_pass(factory.__name__, factory)


_register()
