"""LowerInitBlock: turn a reduction block's ``init`` into a statement that runs before the reduction.

Note: when the loops binding the reduce iteration variables are the innermost loops around the
block (the usual nest ``for i: for k: C[i] += ...``), the init is *hoisted* before them as its own
block ``<name>_init`` (bound to the spatial iteration variables only), like
``decompose_reduction`` does: it then runs even when the reduce loops have zero trips (a reduce
axis whose run-time size is 0 gives the identity, not uninitialised memory). Otherwise (a reduce
loop outside a spatial loop, reduce bindings mixing loops, a predicate reading reduce loops) the
init falls back to the guard below, which does not run for zero-trip reduce loops.

Guard fallback: a reduction block's ``init`` runs when every reduce iteration variable is at the minimum of
its domain (the first step of the reduction for each output element). Lowering it in place keeps
the block's iteration structure: ``init`` becomes ``if (k == k_min and ...): init`` placed before
the body. After `ConvertBlocksToLoops` substitutes the bindings, the guard reads in loop
variables (``k0 * 4 + k1 == 0``) and `Simplify` cleans it. A reduction that has been split by
``decompose_reduction`` has no ``init`` left, so this pass does not touch it.

Example (TVMScript):

    before:  with T.block("C"):
                 vi, vk = T.axis.remap("SR", [i, k])
                 with T.init(): C[vi] = 0.0
                 C[vi] = C[vi] + A[vi, vk]
    after (hoisted, loops i / k):
             for i:
                 with T.block("C_init"):
                     vi = T.axis.spatial(..., i)
                     C[vi] = 0.0
                 for k:
                     with T.block("C"):
                         vi, vk = T.axis.remap("SR", [i, k])
                         C[vi] = C[vi] + A[vi, vk]
    after (guard fallback):
             with T.block("C"):
                 vi, vk = T.axis.remap("SR", [i, k])
                 if vk == 0: C[vi] = 0.0
                 C[vi] = C[vi] + A[vi, vk]
"""
from __future__ import annotations

from ingot.ir.functor import Mutator, collect_vars

from .. import op
from ..function import PrimFunc
from ..stmt import Block, BlockRealize, For, IfThenElse, SeqStmt
from .base import prim_func_pass

__all__ = ["LowerInitBlock", "lower_init_block"]


def lower_init_block(block: Block) -> Block:
    """``block`` with its ``init`` moved into the body under the first-reduction-step guard.

    Example:
        >>> # see the module docstring for before/after IR
    """
    if block.init is None:
        return block
    reduce_vars = [iv for iv in block.iter_vars if iv.kind == "R"]
    conds = [iv.var == iv.dom.min for iv in reduce_vars]
    init = block.init if not conds else IfThenElse(op.all(*conds), block.init)
    return block.replace(init=None, body=SeqStmt.flatten(init, block.body))


def _hoist_init(loops: "list[For]", realize: BlockRealize):
    """The loop nest ``loops`` around ``realize`` with the init hoisted before the reduce loops.

    None when the reduce loops are not the innermost ones (see the module docstring).
    """
    block = realize.block
    loop_vars = [f.loop_var for f in loops]
    spatial_uses: set = set()
    reduce_uses: set = set()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        (reduce_uses if iv.kind == "R" else spatial_uses).update(collect_vars(value))
    spatial_uses.update(collect_vars(realize.predicate))
    # Step 1: the suffix of loops to run after the init: from the outermost loop a reduce
    # binding reads, down to the block; none of them may feed a spatial binding or the predicate.
    first = next((d for d, v in enumerate(loop_vars) if v in reduce_uses), None)
    if first is None or any(v in spatial_uses for v in loop_vars[first:]):
        return None
    # Step 2: every loop variable a reduce binding reads must be in that suffix (a reduce
    # binding reading an outer loop, e.g. k = ko * 4 + ki with ko outside, would re-init per ko).
    if any(v in reduce_uses for v in loop_vars[:first]):
        return None
    spatial = [(iv, value) for iv, value in zip(block.iter_vars, realize.iter_values) if iv.kind != "R"]
    init_block = Block([iv for iv, _ in spatial], (), block.writes, block.name_hint + "_init", block.init)
    init = BlockRealize([value for _, value in spatial], realize.predicate, init_block)
    # Step 3: rebuild the nest: prefix loops / (init; suffix loops / block without init).
    inner = realize.replace(block=block.replace(init=None))
    for f in reversed(loops[first:]):
        inner = f.replace(body=inner)
    stmt = SeqStmt.flatten(init, inner)
    for f in reversed(loops[:first]):
        stmt = f.replace(body=stmt)
    return stmt


class _Lower(Mutator):
    def visit_For(self, node: For):
        # A perfect loop nest ending in a reduction block: try to hoist its init (module docstring).
        loops, body = [node], node.body
        while isinstance(body, For):
            loops.append(body)
            body = body.body
        if isinstance(body, BlockRealize) and body.block.init is not None:
            hoisted = _hoist_init(loops, body)
            if hoisted is not None:
                return self.generic_visit(hoisted)
        return self.generic_visit(node)

    def visit_Block(self, block: Block) -> Block:
        block = self.generic_visit(block)
        return lower_init_block(block)


def LowerInitBlock():  # noqa: N802 - TVM's pass names are CamelCase factories
    """The pass lowering every reduction ``init`` of every PrimFunc (see module docstring).

    Example:
        >>> p = LowerInitBlock()
        >>> p.info.name
        'LowerInitBlock'
    """

    def transform(func: PrimFunc, mod, ctx) -> PrimFunc:
        return func.with_body(_Lower().visit(func.body))

    return prim_func_pass(transform, opt_level=0, name="LowerInitBlock")
