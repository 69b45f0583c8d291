"""Shared helpers of the default-schedule tests: schedule a TE function with the default rules (and
see which rule each block got), build and run it, and read the micro-kernel out of the assembly.

Example:
    >>> # sch, picked = schedule([A, B, C]); out = run(sch, [a, b], (m, n)); kernel_loop(sch)["zmm"]
"""
from __future__ import annotations


import numpy as np

import ingot
from ingot import te
from ingot.ops.schedule import schedule_blocks
from ingot.target import Target
from ingot.tir.schedule import Schedule

TARGET = "llvm -num-cores=2"


def schedule(tensors: list) -> tuple:
    """``(schedule, {block name: rule name})`` of the default rules applied to ``tensors``' function."""
    log: list = []
    sch = schedule_blocks(Schedule(te.create_prim_func(tensors)), Target(TARGET), log=log)
    return sch, {name: rule for name, rule, _ in log}


def run(sch: Schedule, args: list, out_shape: tuple) -> np.ndarray:
    """Build ``sch.mod`` for `TARGET` and run it on ``args`` into a fresh float32 output."""
    out = np.zeros(out_shape, "float32")
    ingot.build(sch.mod, TARGET)["main"](*args, out)
    return out


def kernel_loop(sch: Schedule) -> dict:
    """FMAs, zmm FMAs, stack accesses and zmm stores of the innermost assembly loop with the most FMAs."""
    from ingot.codegen.build import hot_loop_report, module_assembly

    return hot_loop_report(module_assembly(ingot.lower(sch.mod), TARGET))
