"""`ingot.tir.schedule`: TVM's ``tir.Schedule`` — schedule primitives, random variables, traces, sampling.

Example:
    >>> # from ingot.tir import Schedule
    >>> # sch = Schedule(mod, seed=0)
    >>> # b = sch.get_block("C"); i, j, k = sch.get_loops(b)
    >>> # j0, j1 = sch.split(j, factors=[None, 4]); sch.reorder(i, j0, k, j1); sch.vectorize(j1)
    >>> # print(sch.trace)
"""
from .error import ScheduleError, render_outline
from .instruction import BlockRV, ExprRV, Instruction, InstructionKind, LoopRV
from .schedule import Schedule
from .state import ScheduleState, StmtSRef
from .trace import Trace

__all__ = [
    "Schedule", "ScheduleError", "ScheduleState", "StmtSRef", "Trace", "Instruction", "InstructionKind",
    "BlockRV", "LoopRV", "ExprRV", "render_outline",
]
