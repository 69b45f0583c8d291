"""ConvertBlocksToLoops (alias LowerBlocks): replace blocks by their bodies, bindings substituted.

Note: below the block level the C code generator only understands loops and stores. Each
`BlockRealize` becomes the block body with

* every iteration variable replaced by the expression it is bound to (``vi -> i0 * 16 + i1``),
* the predicate turned into ``if predicate: body`` (how non-divisible splits stay exact),
* ``match_buffers`` resolved: an access ``M[idx]`` to a buffer matched to ``S[m0:.., m1:..]`` becomes
  ``S[m0 + idx0, m1 + idx1]`` (the region's minimum added to each index; when the matched
  buffer has fewer dimensions than the source, the leading source dimensions are fixed at their minimum),
* ``alloc_buffers`` turned into `Allocate` statements at the block's position (the root block's
  intermediates are therefore allocated around the whole function body; `CompactBufferAllocation`
  later sinks and shrinks them),
* read/write regions and annotations dropped — except `storage_align`'s ``"buffer_dim_align"``
  requests, which move to a function attribute of that name for `FlattenBuffer`
  (`ingot.tir.transform.storage_align`).

A remaining ``init`` is lowered first (`lower_init_block`), so the pass is correct even when
`LowerInitBlock` did not run. Blocks are rewritten innermost first: an inner block's bindings may
use outer iteration variables, which the outer substitution then replaces.

Example (TVMScript):

    before:  for i0, i1 in T.grid(7, 16):
                 with T.block("B"):
                     vi = T.axis.spatial(100, i0 * 16 + i1)
                     T.where(i0 * 16 + i1 < 100)
                     B[vi] = A[vi] + 1.0
    after:   for i0, i1 in T.grid(7, 16):
                 if i0 * 16 + i1 < 100:
                     B[i0 * 16 + i1] = A[i0 * 16 + i1] + 1.0
"""
from __future__ import annotations

from typing import Any

from ingot.ir.buffer import Buffer, MatchBufferRegion
from ingot.ir.error import IRError
from ingot.ir.expr import BufferLoad, IntImm, as_const_int
from ingot.ir.functor import Mutator, substitute

from ..function import PrimFunc
from ..stmt import Allocate, Block, BlockRealize, BufferStore, IfThenElse, Stmt
from .base import prim_func_pass
from .lower_init_block import lower_init_block
from .storage_align import DIM_ALIGN_ATTR, collect_dim_aligns

__all__ = ["ConvertBlocksToLoops", "LowerBlocks", "convert_blocks_to_loops"]


class _MatchBufferRewriter(Mutator):
    """Rewrite accesses of matched buffers into accesses of their source regions."""

    def __init__(self, matches: "dict[Buffer, MatchBufferRegion]"):
        self.matches = matches

    def _map(self, buffer: Buffer, indices: tuple) -> "tuple[Buffer, tuple]":
        match = self.matches.get(buffer)
        if match is None:
            return buffer, indices
        source = match.source
        mins = [r.min for r in source.region]
        lead = len(mins) - len(indices)
        if lead < 0:
            raise IRError(
                f"match_buffer {buffer.name!r} has {len(indices)} dims but its source region of "
                f"{source.buffer.name!r} has only {len(mins)}; match a region with at least as many dims"
            )
        new_indices = tuple(mins[:lead]) + tuple(m + i for m, i in zip(mins[lead:], indices))
        return source.buffer, new_indices

    def visit_BufferLoad(self, node: BufferLoad) -> Any:
        node = self.generic_visit(node)
        buffer, indices = self._map(node.buffer, node.indices)
        return node if buffer is node.buffer else BufferLoad(buffer, indices)

    def visit_BufferStore(self, node: BufferStore) -> Any:
        node = self.generic_visit(node)
        buffer, indices = self._map(node.buffer, node.indices)
        return node if buffer is node.buffer else BufferStore(buffer, node.value, indices)


def _is_true(expr: Any) -> bool:
    return isinstance(expr, IntImm) and as_const_int(expr) == 1


class _Converter(Mutator):
    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        # Step 1. Convert the nested blocks first (their bindings may use our iteration variables).
        block: Block = lower_init_block(realize.block)
        body = self.visit(block.body)
        # Step 2. Resolve match_buffers (their source regions are in our iteration variables too).
        if block.match_buffers:
            body = _MatchBufferRewriter({m.buffer: m for m in block.match_buffers}).visit(body)
        # Step 3. Substitute the bindings.
        vmap = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
        body = substitute(body, vmap)
        # Step 4. Allocate the block's buffers here (first buffer outermost).
        for buffer in reversed(block.alloc_buffers):
            body = Allocate(buffer, body)
        # Step 5. The predicate guards everything the block does.
        if not _is_true(realize.predicate):
            body = IfThenElse(substitute(realize.predicate, vmap), body)
        return body

    def visit_Block(self, block: Block) -> Stmt:
        raise IRError(
            f"block {block.name_hint!r} is not under a BlockRealize; every block must be realized "
            "(wrap it in tir.BlockRealize(iter_values, predicate, block))"
        )


def convert_blocks_to_loops(stmt: Stmt) -> Stmt:
    """``stmt`` with every block replaced by its body (see module docstring).

    Example:
        >>> from ingot.tir import Evaluate
        >>> convert_blocks_to_loops(Evaluate(0)).value.value
        0
    """
    return _Converter().visit(stmt)


def ConvertBlocksToLoops():  # noqa: N802
    """The pass converting blocks to plain loop bodies in every PrimFunc.

    Example:
        >>> ConvertBlocksToLoops().info.name
        'ConvertBlocksToLoops'
    """

    def transform(func: PrimFunc, mod, ctx) -> PrimFunc:
        aligns = collect_dim_aligns(func.body)
        if aligns:  # the blocks carrying them are about to go (module note)
            func = func.with_attr(DIM_ALIGN_ATTR, tuple(func.attrs.get(DIM_ALIGN_ATTR, ())) + aligns)
        return func.with_body(convert_blocks_to_loops(func.body))

    return prim_func_pass(transform, opt_level=0, name="ConvertBlocksToLoops")


# TVM's name for the same lowering step.
LowerBlocks = ConvertBlocksToLoops
