"""Shared helpers of the benchmark scripts: timing, machine load, and Markdown tables.

The machine has 2 cores and is noisy: every figure is a median, every comparison is a ratio
taken in the same run, and each script prints the load average before and after so that a
disturbed run can be spotted (and rerun).
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable, Sequence


def load_average() -> str:
    """The 1-minute load average, as text."""
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:  # pragma: no cover - non-Linux
        return "?"


def timed_calls(fn: Callable[[], object], min_seconds: float, max_calls: int = 1 << 20) -> "tuple[int, float]":
    """Run ``fn`` in batches of 1, 2, 4, ... calls until a batch lasts ``min_seconds`` (or has
    ``max_calls`` calls): (that batch's call count, its mean seconds per call).

    Example:
        >>> calls, per_call = timed_calls(lambda: None, 1e-4)
        >>> calls >= 1 and per_call >= 0
        True
    """
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds or number >= max_calls:
            return number, elapsed / number
        number *= 2


def median_seconds(fn: Callable[[], object], repeat: int = 9, min_seconds: float = 0.05) -> float:
    """Median time of one call of ``fn``: each of ``repeat`` samples runs ``fn`` enough times to
    last at least ``min_seconds``, after one warm-up call.

    Example:
        >>> t = median_seconds(lambda: sum(range(100)), repeat=3, min_seconds=0.001)
    """
    fn()
    number, _ = timed_calls(fn, min_seconds)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def ingot_median_seconds(lib, name: str, args: Sequence, repeat: int = 9, min_repeat_ms: int = 50) -> float:
    """Median time of ``lib[name](*args)`` measured in C by the module's time evaluator."""
    import ingot

    evaluator = lib.time_evaluator(name, ingot.cpu(), number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return evaluator(*args).median


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def banner(title: str) -> None:
    print(f"## {title}")
    print(f"cores: {os.cpu_count()}, load average before: {load_average()}")


def gemm_func(n: int = 1024):
    """The plain fp32 GEMM ``C[i, j] = sum_k A[i, k] * B[k, j]`` (n x n x n) as a PrimFunc, the
    workload the GEMM and tuning benchmarks share (`ingot.testing.kernels.matmul_func`).

    Example:
        >>> len(gemm_func(64).params)
        3
    """
    from ingot.testing.kernels import matmul_func

    return matmul_func(n, n, n)
