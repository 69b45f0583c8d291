"""LowerInitBlock: turn a reduction block's ``init`` into a guarded statement in its body.

Note: a reduction block's ``init`` runs when every reduce iteration variable is at the minimum of
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
    after:   with T.block("C"):
                 vi, vk = T.axis.remap("SR", [i, k])
                 if vk == 0: C[vi] = 0.0
                 C[vi] = C[vi] + A[vi, vk]
"""
from __future__ import annotations

from ingot.ir.functor import Mutator

from .. import op
from ..function import PrimFunc
from ..stmt import Block, IfThenElse, SeqStmt
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


class _Lower(Mutator):
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
