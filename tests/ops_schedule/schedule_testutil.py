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

#: The host: numbers are checked on code this machine runs.
TARGET = "llvm -num-cores=2"
#: The host's CPU model, for tests that call a rule directly.
CPU = Target(TARGET).cpu
#: An AVX-512 CPU (32 registers, 48 KiB L1d, 2 MiB L2): the tile structure that the exact
#: assertions on default parameters describe; its code compiles on any host (assembly checks).
AVX512_TARGET = "llvm -mcpu=sapphirerapids -num-cores=2"
AVX512_CPU = Target(AVX512_TARGET).cpu
#: The CPUs kernel tests cover: the host, AVX2 (runs on every AVX2 or AVX-512 host) and AVX-512
#: (run where the host has it, else compiled and checked in the assembly only).
CPU_TARGETS = (TARGET, "llvm -mcpu=haswell -num-cores=2", AVX512_TARGET)


def runs_here(target: str) -> bool:
    """Whether code compiled for ``target`` runs on this host.

    Example:
        >>> runs_here("llvm -mcpu=haswell")   # doctest: +SKIP
        True
    """
    from ingot.cpu_model import host_can_run

    return host_can_run(Target(target).cpu)


def schedule(tensors: list, target: str = TARGET) -> tuple:
    """``(schedule, {block name: rule name})`` of the default rules for ``target`` applied to
    ``tensors``' function."""
    log: list = []
    sch = schedule_blocks(Schedule(te.create_prim_func(tensors)), Target(target), log=log)
    return sch, {name: rule for name, rule, _ in log}


def run(sch: Schedule, args: list, out_shape: tuple, target: str = TARGET) -> np.ndarray:
    """Build ``sch.mod`` for ``target`` and run it on ``args`` into a fresh float32 output."""
    out = np.zeros(out_shape, "float32")
    ingot.build(sch.mod, target)["main"](*args, out)
    return out


def kernel_loop(sch: Schedule, target: str = TARGET) -> dict:
    """FMAs, full-width vector FMAs (``vector``: on ``target``'s widest registers), stack accesses
    and vector stores of the innermost assembly loop with the most FMAs, compiled for ``target``."""
    from ingot.codegen.build import hot_loop_report, module_assembly

    return hot_loop_report(module_assembly(ingot.lower(sch.mod), target), Target(target).cpu.vector_bits)


def parallel_tasks(src: str) -> list:
    """Task counts of the parallel loops in generated C: ``ingot_parallel_for(lo, hi, ...)`` calls
    (the thread pool) and ``omp parallel for`` loops (``codegen.parallel_runtime="openmp"``)."""
    import re

    pool = re.findall(r"ingot_parallel_for\(\(int64_t\)\((\d+)\), \(int64_t\)\((\d+)\)", src)
    omp = re.findall(r"#pragma omp parallel for[^\n]*\n\s*for \([^;]*= (\d+); [^;]*< (\d+);", src)
    return [int(hi) - int(lo) for lo, hi in pool + omp]
