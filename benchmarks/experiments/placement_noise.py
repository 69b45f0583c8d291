"""Compile-to-compile latency noise ("placement noise"): compile the same model N times (and give
one package several executors with their own weights/workspace copies), time all of them
interleaved in one process, and print the spread (max/min - 1) of the per-package fastest call,
once with ordinary 4 KiB-page numpy memory and once with 2 MiB-aligned MADV_HUGEPAGE memory
(`ingot.runtime.memory.huge_empty`) for the weights blob and the workspace arena.

    python benchmarks/experiments/placement_noise.py --models resnet50,mobilenetv2 --copies 4 --rounds 20

``--threads 1`` (the default) times one thread: far steadier on a shared 2-core host. Prints a Markdown table and the load average before/after. Min is the robust statistic under
contention; the median is shown to see whether the whole distribution moves.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

import numpy as np

MODELS = {"resnet50": "/tmp/tm6/resnet50.onnx", "mobilenetv2": "/tmp/tm6/mobilenetv2.onnx"}


def loadavg() -> str:
    """The 1/5/15-minute load averages as a string."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@contextlib.contextmanager
def allocator(kind: str):
    """Make the graph layer allocate weights/workspaces with ``kind``: "4k" (plain 64-B aligned numpy
    memory, the pre-session-7 behaviour) or "huge" (2 MiB-aligned MADV_HUGEPAGE)."""
    from ingot.graph import executor as E
    from ingot.runtime import memory
    from ingot.runtime.ndarray import aligned_empty

    saved = getattr(E, "_host_empty", None)
    if saved is None:  # an executor without the hook: only the "4k" path exists
        yield
        return
    E._host_empty = (lambda shape, dtype: memory.huge_empty(shape, dtype)) if kind == "huge" else \
        (lambda shape, dtype: aligned_empty(shape, dtype))
    try:
        yield
    finally:
        E._host_empty = saved


def calls_per_ms(fn, x, total_s: float) -> "list[float]":
    """Per-call times (ms) of ``fn(x)`` for about ``total_s`` seconds (at least 3 calls)."""
    out = []
    end = time.perf_counter() + total_s
    while len(out) < 3 or time.perf_counter() < end:
        t = time.perf_counter()
        fn(x)
        out.append((time.perf_counter() - t) * 1e3)
    return out


def contestants(name: str, copies: int, kinds: "list[str]", threads: int = 0) -> "dict[str, object]":
    """{label: callable}: per allocator kind, ``copies`` separate compiles, plus ``copies`` extra
    executors of the first package each with its own weights copy and workspace."""
    from ingot.workflow import model as M
    from ingot.graph.executor import Executor

    out = {}
    model = M.load(MODELS[name])
    for kind in kinds:
        with allocator(kind):
            first = None
            for i in range(copies):
                t = time.perf_counter()
                pkg = M.compile(model, "llvm")
                print(f"  {name} {kind} compile {i}: {time.perf_counter() - t:.1f} s", file=sys.stderr)
                first = first or pkg
                if threads and getattr(pkg.executable, "lib", None) is not None:
                    pkg.executable.lib.set_num_threads(threads)
                out[f"{kind} pkg{i}"] = pkg.executor()["main"]
            # The control: pkg0's very callable timed a second time under another label; its distance
            # from pkg0 is the measurement's own noise floor (no placement difference at all).
            out[f"{kind} ctl0"] = out[f"{kind} pkg0"]
            for i in range(1, copies):
                ex = first.executable
                import copy

                clone = copy.copy(ex)  # same library, own weights blob at a new address
                from ingot.graph import executor as E

                w = E._host_empty(ex.weights.shape, ex.weights.dtype) if hasattr(E, "_host_empty") else \
                    np.empty_like(ex.weights)
                w[...] = ex.weights
                clone.weights = w
                out[f"{kind} exe{i}"] = Executor(clone, None)["main"]
    return out


def bench(name: str, copies: int, rounds: int, per_round_s: float, kinds: "list[str]", threads: int = 0) -> list:
    """Rows (label, min ms, median ms) after interleaved timing."""
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")
    fns = contestants(name, copies, kinds, threads)
    ref = None
    for label, fn in fns.items():  # every copy computes the same numbers
        out = fn(x)
        out = np.asarray((out[0] if isinstance(out, (list, tuple)) else out).numpy())
        ref = out if ref is None else ref
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=label)
    samples = {k: [] for k in fns}
    mins = {k: float("inf") for k in fns}
    labels = list(fns)
    for r in range(rounds):
        for label in (labels if r % 2 == 0 else labels[::-1]):
            t = calls_per_ms(fns[label], x, per_round_s)
            mins[label] = min(mins[label], min(t))
            samples[label].append(min(t))
    return [(label, mins[label], statistics.median(samples[label])) for label in labels]


def anon_huge_kb() -> "int | None":
    """This process's transparent-huge-page memory (kB), to confirm the "huge" buffers got huge pages."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("AnonHugePages:"))
    except (OSError, StopIteration):
        return None


def spread(rows, kind: str, which: str) -> str:
    vals = [m for label, m, _ in rows if label.startswith(kind + " ") and which in label]
    return f"{(max(vals) / min(vals) - 1) * 100:.1f}%" if len(vals) > 1 else "-"


def main(argv: "list | None" = None) -> None:
    """Run the experiment and print a Markdown table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="resnet50,mobilenetv2")
    p.add_argument("--copies", type=int, default=4)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--per-round-s", type=float, default=0.3)
    p.add_argument("--threads", type=int, default=1, help="threads of the model's parallel loops (0: all cores)")
    p.add_argument("--kinds", default="4k,huge", help="allocators to compare: 4k, huge")
    a = p.parse_args(argv)
    kinds = a.kinds.split(",")
    print(f"load average before: {loadavg()}")
    for name in a.models.split(","):
        rows = bench(name, a.copies, a.rounds, a.per_round_s, kinds, a.threads)
        print(f"\n### {name} ({a.rounds} interleaved rounds, {a.per_round_s} s each, {a.threads or 'all'} thread(s))\n")
        print("| contestant | min ms | median of round-mins ms |\n|---|---|---|")
        for label, m, med in rows:
            print(f"| {label} | {m:.3f} | {med:.3f} |")
        print()
        mins = {label: m for label, m, _ in rows}
        for kind in kinds:
            ctl = abs(mins[f"{kind} ctl0"] / mins[f"{kind} pkg0"] - 1) * 100
            print(f"- {kind}: control (pkg0 timed twice) {ctl:.1f}%; spread of min across packages {spread(rows, kind, 'pkg')}, across executors of one "
                  f"package (pkg0 + exe*) {spread([r for r in rows if 'pkg0' in r[0] or 'exe' in r[0]], kind, '')}; "
                  f"median-of-medians {statistics.median([med for lab, _, med in rows if lab.startswith(kind)]):.3f} ms")
    print(f"\nAnonHugePages of this process: {anon_huge_kb()} kB; load average after: {loadavg()}")


if __name__ == "__main__":
    main()
