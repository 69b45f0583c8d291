"""RemoveNoOp: delete statements that do nothing.

Note: lowering leaves debris — ``Evaluate(0)`` from removed branches, loops whose body became
empty, ``if`` with nothing in either branch, allocations nobody uses, stores of a value into the
place it was loaded from. Removing them keeps the generated C short and readable. Statements with
effects (stores, extern calls) are never removed.

Example:
    before:  for i in range(4): T.evaluate(0)
             B[0] = B[0]
             C[0] = 1.0
    after:   C[0] = 1.0
"""
from __future__ import annotations

from typing import Any

from ingot.ir.expr import BufferLoad
from ingot.ir.functor import Mutator, post_order_visit
from ingot.ir.structural import structural_equal

from ..stmt import Allocate, BufferStore, For, IfThenElse, LetStmt, SeqStmt, Stmt
from .base import is_no_op, no_op, prim_func_pass

__all__ = ["RemoveNoOp", "remove_no_op"]


def _uses_buffer(stmt: Stmt, buffer: Any) -> bool:
    found = []

    def check(node: Any) -> None:
        if isinstance(node, (BufferLoad, BufferStore)) and node.buffer.data is buffer.data:
            found.append(node)

    post_order_visit(stmt, check)
    return bool(found)


class _Remover(Mutator):
    def visit_SeqStmt(self, node: SeqStmt) -> Stmt:
        items = [s for s in (self.visit(x) for x in node.seq) if not is_no_op(s)]
        if not items:
            return no_op()
        return SeqStmt.flatten(items)

    def visit_For(self, node: For) -> Stmt:
        body = self.visit(node.body)
        return no_op() if is_no_op(body) else node.replace(body=body)

    def visit_IfThenElse(self, node: IfThenElse) -> Stmt:
        then_case = self.visit(node.then_case)
        else_case = self.visit(node.else_case) if node.else_case is not None else None
        if is_no_op(else_case):
            else_case = None
        if is_no_op(then_case) and else_case is None:
            return no_op()
        if is_no_op(then_case):
            return IfThenElse(~node.condition, else_case)
        return node.replace(then_case=then_case, else_case=else_case)

    def visit_LetStmt(self, node: LetStmt) -> Stmt:
        body = self.visit(node.body)
        return no_op() if is_no_op(body) else node.replace(body=body)

    def visit_Allocate(self, node: Allocate) -> Stmt:
        body = self.visit(node.body)
        if is_no_op(body):
            return no_op()
        if not _uses_buffer(body, node.buffer):
            return body
        return node.replace(body=body)

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        value = node.value
        if (isinstance(value, BufferLoad) and value.buffer is node.buffer
                and structural_equal(value.indices, node.indices)):
            return no_op()
        return node

    def generic_visit(self, node: Any) -> Any:
        return super().generic_visit(node) if isinstance(node, Stmt) else node


def remove_no_op(stmt: Stmt) -> Stmt:
    """``stmt`` without statements that do nothing.

    Example:
        >>> from ingot.ir import Var
        >>> from ingot.tir import For, ForKind, Evaluate
        >>> is_no_op(remove_no_op(For(Var("i"), 0, 4, ForKind.SERIAL, Evaluate(0))))
        True
    """
    return _Remover().visit(stmt)


def RemoveNoOp():  # noqa: N802
    """The pass removing no-op statements from every PrimFunc.

    Example:
        >>> RemoveNoOp().info.name
        'RemoveNoOp'
    """
    return prim_func_pass(lambda f, m, c: f.with_body(remove_no_op(f.body)), opt_level=0, name="RemoveNoOp")
