"""What all-or-nothing primitives cost and save: a refused primitive guarded by a full schedule copy
(the old pattern) against the same refusal called directly (the savepoint/rollback); and a lookup
(get_loops) three ways: as the Schedule method (the cheap `_lookup_only` path, no savepoint),
wrapped in the full savepoint path as it was before, and the bare primitive. Interleaved in one
process, min of many.

    python benchmarks/experiments/schedule_atomic.py [--repeat 200]

Prints a Markdown table and the load average before/after.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # the repository root

from benchmarks.common import load_average  # noqa: E402


def _workload(n: int, stages: int):
    """A chain of ``stages`` elementwise stages over an (n, n) matmul: many loops and blocks."""
    from ingot import te

    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    x = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    for s in range(stages):
        x = te.compute((n, n), lambda i, j, x=x: x[i, j] + 1.0, name=f"E{s}")
    return te.create_prim_func([A, B, x])


def _min_us(fns: dict, repeat: int, inner: "dict | None" = None) -> dict:
    """Min time (µs per call) of each callable, measured interleaved (A, B, A, B, ...); a sample
    of ``name`` times ``inner[name]`` back-to-back calls (default 1), so that calls of a few µs are
    not lost in the timer's resolution."""
    inner = inner or {}
    best = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            n = inner.get(name, 1)
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / n)
    return {name: v * 1e6 for name, v in best.items()}


def _measure(stages: int, repeat: int) -> dict:
    """Min times (µs) of the four calls on a workload with ``stages`` epilogue stages."""
    from ingot.tir.schedule import Schedule, ScheduleError
    from ingot.tir.schedule.schedule import _all_or_nothing

    sch = Schedule(_workload(64, stages), seed=0)
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    sch.split(j, [None, 16])
    out = sch.get_block(f"E{stages - 1}")  # writes the output: compute_inline refuses

    def copy_guard():
        trial = sch.copy()
        try:
            trial.compute_inline(trial.get_block(f"E{stages - 1}"))
        except ScheduleError:
            pass

    def direct():
        try:
            sch.compute_inline(out)
        except ScheduleError:
            pass

    # get_loops records handles: on a separate schedule, so the copies above do not grow.
    sch2 = sch.copy()
    c2 = sch2.get_block("C")
    raw_get_loops = Schedule.get_loops.__wrapped__
    savepoint_get_loops = _all_or_nothing(raw_get_loops)
    t = _min_us({"copy": copy_guard, "direct": direct,
                 "get_loops": lambda: sch2.get_loops(c2),
                 "get_loops_savepoint": lambda: savepoint_get_loops(sch2, c2),
                 "get_loops_raw": lambda: raw_get_loops(sch2, c2)},
                repeat, inner={"get_loops": 20, "get_loops_savepoint": 20, "get_loops_raw": 20})
    return t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=200)
    args = p.parse_args(argv)
    print(f"load average before: {load_average()}")
    rows = [(f"matmul + {stages} stages", _measure(stages, args.repeat)) for stages in (2, 16)]
    print("\n| workload | refusal on a copy (µs) | refusal direct (µs) | speedup | "
          "get_loops, savepoint path (µs) | get_loops, lookup path (µs) | bare primitive (µs) |")
    print("|---|---|---|---|---|---|---|")
    for name, t in rows:
        print(f"| {name} | {t['copy']:.1f} | {t['direct']:.1f} | {t['copy'] / t['direct']:.2f}x | "
              f"{t['get_loops_savepoint']:.1f} | {t['get_loops']:.1f} | {t['get_loops_raw']:.1f} |")
    print(f"\nload average after: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
