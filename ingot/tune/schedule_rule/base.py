"""`ScheduleRule`: transforms one block of a schedule into one or more candidate schedules.

Note: rules are applied by `PostOrderApply` to each block; a rule may branch (return several
schedules, e.g. with and without a cache) and must record every choice as a sampling
instruction so that the result is a stochastic schedule (a design space). Rules ask the
`Schedule` for the primitives they need; when a primitive is not available in this Ingot the
rule skips that step and logs a note once (``missing_primitive``), so spaces degrade instead of
failing.

Example:
    >>> # class MyRule(ScheduleRule):
    >>> #     def apply(self, sch, block): sch.parallel(sch.get_loops(block)[0]); return [sch]
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from ingot.tir.stmt import BlockRealize

logger = logging.getLogger("ingot.tune")
_NOTED: set = set()


def missing_primitive(rule: str, primitive: str, what: str) -> None:
    """Log once that ``rule`` skips ``what`` because ``Schedule.<primitive>`` is missing."""
    if (rule, primitive) not in _NOTED:
        _NOTED.add((rule, primitive))
        logger.info("%s: Schedule.%s is not available in this Ingot; %s is skipped", rule, primitive, what)


def has_primitive(sch: Any, name: str) -> bool:
    """Whether the schedule offers primitive ``name`` (compute_at, compute_inline, ...)."""
    return callable(getattr(sch, name, None))


class ScheduleRule:
    """Base class: ``apply(sch, block) -> list[Schedule]`` (return ``[sch]`` to leave it).

    ``initialize_with_tune_context(ctx)`` gives the rule the target (cores, vector width).

    Example:
        >>> # rule.apply(sch, sch.get_block("C"))
    """

    def initialize_with_tune_context(self, context: Any) -> None:
        self.context = context

    def apply(self, sch: Any, block: Any) -> "list[Any]":
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__


def find_realize(sch: Any, block: Any) -> "Optional[BlockRealize]":
    """The BlockRealize of a block handle (for its bindings), or None."""
    from ingot.ir.functor import Visitor

    target = sch.get(block)
    realize = getattr(sch.get_sref(block), "realize", None)  # kept current by the schedule state
    if realize is not None and realize.block is target:
        return realize
    func = sch.mod[sch.get_sref(block).func_name]
    found: list = []

    class _Find(Visitor):
        def visit_BlockRealize(self, node):
            if node.block is target:
                found.append(node)
            elif not found:
                self.generic_visit(node)

        def generic_visit(self, node):
            if not found:
                super().generic_visit(node)

    _Find().visit(func.body)
    return found[0] if found else None


def loop_iter_kinds(sch: Any, block: Any, loops: "Optional[list]" = None, strict: bool = True) -> "Optional[list]":
    """For each loop above ``block`` (``loops``: its handles, to avoid another lookup): ``"S"``
    or ``"R"`` by the kind of the iteration variables whose bindings use the loop variable, else
    None (unused, or mixed). With ``strict`` the loop variable must be the whole binding of
    exactly one iteration variable (what multi-level tiling needs); otherwise any use counts.

    Example:
        >>> # loop_iter_kinds(sch, sch.get_block("C")) -> ['S', 'S', 'R']
    """
    from ingot.ir.expr import Var
    from ingot.ir.functor import collect_vars

    realize = find_realize(sch, block)
    if realize is None:
        return None
    loops = [sch.get(l) for l in (loops if loops is not None else sch.get_loops(block))]
    pairs = list(zip(realize.block.iter_vars, realize.iter_values))
    used = [{id(u) for u in collect_vars(v)} for _, v in pairs]
    kinds = []
    for loop in loops:
        owners = [(iv, v) for (iv, v), u in zip(pairs, used) if id(loop.loop_var) in u]
        ivkinds = {iv.kind for iv, _ in owners}
        if len(ivkinds) != 1:
            kinds.append(None)
        elif strict and not (len(owners) == 1 and isinstance(owners[0][1], Var) and owners[0][1] is loop.loop_var):
            kinds.append(None)
        else:
            kinds.append(ivkinds.pop())
    return kinds


def is_reduction_block(sch: Any, block: Any) -> bool:
    """Whether ``block`` has a reduce iteration variable."""
    return any(iv.kind == "R" for iv in sch.get(block).iter_vars)


def is_spatial_elementwise(sch: Any, block: Any) -> bool:
    """Whether ``block`` is a spatial block with a single store and no init."""
    from ingot.tir.stmt import BufferStore

    b = sch.get(block)
    return all(iv.kind == "S" for iv in b.iter_vars) and b.init is None and isinstance(b.body, BufferStore)
