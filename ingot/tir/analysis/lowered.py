"""`is_lowered`: whether a TensorIR module is ready for code generation (no blocks left).

Note: the driver (`ingot.driver.build`), the graph's schedule hook and the code generators all
ask this one question, so it lives here, below all of them.

Example:
    >>> from ingot.tir import Evaluate
    >>> from ingot.tir.function import PrimFunc
    >>> is_lowered(PrimFunc([], Evaluate(0)))
    True
"""
from __future__ import annotations

from ingot.ir.functor import Visitor
from ingot.ir.module import IRModule
from ingot.tir.function import PrimFunc
from ingot.tir.stmt import Block, BlockRealize

__all__ = ["is_lowered"]


class _HasBlocks(Visitor):
    def __init__(self) -> None:
        self.found = False

    def visit_Block(self, node: Block) -> None:
        self.found = True

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        self.found = True

    def generic_visit(self, node) -> None:
        if not self.found:
            super().generic_visit(node)


def is_lowered(mod: "IRModule | PrimFunc") -> bool:
    """Whether no PrimFunc of ``mod`` contains a Block/BlockRealize (ready for code generation).

    Example:
        >>> from ingot.tir import Evaluate
        >>> from ingot.tir.function import PrimFunc
        >>> is_lowered(PrimFunc([], Evaluate(0)))
        True
    """
    funcs = [mod] if isinstance(mod, PrimFunc) else [f for _, f in mod.items() if isinstance(f, PrimFunc)]
    for func in funcs:
        v = _HasBlocks()
        v.visit(func.body)
        if v.found:
            return False
    return True
