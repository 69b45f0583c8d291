"""Latency on a busy machine (issue 18): Ingot and ONNX Runtime, quiet and beside a CPU hog.

For each model (batch 1; random weights; exported to ONNX from plain ``torch.nn``): compile with
Ingot (default thread policy, ``ingot.runtime.threads``), open an ONNX Runtime session with as many
intra-op threads, check the outputs agree, then time single calls (per-call wall times: median and
p99) of each runtime, one runtime at a time, in ``--rounds`` rounds of

1. quiet;
2. loaded: a CPU-hog process (a busy loop that stops by itself after ``--hog-seconds``) pinned to
   CPU 1 with ``os.sched_setaffinity``, started for this round's loaded calls and stopped after them.

Runtimes: ``ingot`` (the thread pool's adaptive team on, the default), ``ingot-fixed`` (the same
library with ``Module.set_adaptive_team(False)``: every parallel loop on the full team, the A/B
baseline) and ``ort``. Each round gives a loaded/quiet ratio of medians per runtime; the table shows
the median of the per-round ratios and their spread (min-max), so that a model of 0.02 ms, whose
quiet and loaded times differ by less than the machine's drift between two blocks, does not give a
coin-flip ratio. Medians and p99 in the table pool every round's calls. Ingot's pool counters over the
loaded calls (late joins, loops run by a smaller team) show what the adaptive team did.
Then 4 Python threads call one Ingot package with different inputs and every output is compared with
the single-threaded output of the same input (must be identical). The load average is printed before
and after: others share this machine, so a disturbed run shows.

    python benchmarks/contention.py                       # MLP 784-128-10 and MobileNetV2
    python benchmarks/contention.py --models mlp --calls 2000 --rounds 10
    python benchmarks/contention.py --models mlp,mobilenet_v2,resnet50,bert
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks.common import load_average  # noqa: E402
from ingot.testing.zoo import export_module  # noqa: E402


def _mlp():
    import torch

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
    return module, np.random.default_rng(0).standard_normal((1, 784)).astype("float32")


def build(name: str):
    """(torch module, example input) of ``name``: ``mlp`` or a `ingot.testing.architectures` model."""
    if name == "mlp":
        return _mlp()
    from ingot.testing import architectures

    return architectures.build(name, "full")


def _hog(seconds: float, cpu: int) -> None:
    """A busy loop pinned to ``cpu`` that stops by itself after ``seconds``."""
    try:
        os.sched_setaffinity(0, {cpu})
    except (AttributeError, OSError):
        pass
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for _ in range(10000):
            x += 1


class Hog:
    """``with Hog(seconds, cpu):`` runs `_hog` in a child process for the block (at most ``seconds``)."""

    def __init__(self, seconds: float, cpu: int):
        self.seconds, self.cpu, self.proc = seconds, cpu, None

    def __enter__(self):
        self.proc = mp.get_context("spawn").Process(target=_hog, args=(self.seconds, self.cpu), daemon=True)
        self.proc.start()
        time.sleep(0.3)  # let it start spinning
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.join(5)


def per_call_ms(fn, calls: int, max_seconds: float) -> np.ndarray:
    """Wall time of each of up to ``calls`` calls (ms), after 3 warm-up calls; stops early after
    ``max_seconds``."""
    for _ in range(3):
        fn()
    out = []
    deadline = time.perf_counter() + max_seconds
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        out.append((t1 - t0) * 1e3)
        if t1 > deadline:
            break
    return np.array(out)


def stats(ms: np.ndarray) -> dict:
    return {"median": float(np.median(ms)), "p99": float(np.percentile(ms, 99)), "n": len(ms)}


def concurrent_check(fn, inputs: list, threads: int = 4, rounds: int = 5) -> int:
    """Mismatches when ``threads`` threads call ``fn`` on every input ``rounds`` times, against
    the single-threaded outputs (0: identical)."""
    expected = [fn(x).copy() for x in inputs]
    bad = []
    start = threading.Barrier(threads)

    def worker(t):
        start.wait()
        for _ in range(rounds):
            for i in list(range(t, len(inputs))) + list(range(t)):
                if not np.array_equal(fn(inputs[i]), expected[i]):
                    bad.append(i)

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return len(bad)


def round_ratios(quiet: list, loaded: list) -> dict:
    """Loaded/quiet ratio of the medians of each round: their median and spread (min, max).

    Example:
        >>> r = round_ratios([np.array([1.0, 1.0]), np.array([2.0])], [np.array([2.0]), np.array([3.0, 3.0])])
        >>> r["median"], r["min"], r["max"]
        (1.75, 1.5, 2.0)
    """
    ratios = [float(np.median(l_) / np.median(q)) for q, l_ in zip(quiet, loaded)]
    return {"median": float(np.median(ratios)), "min": min(ratios), "max": max(ratios), "rounds": ratios}


def bench(name: str, args, workdir: str) -> dict:
    import onnxruntime as ort

    from ingot.workflow import model as M
    from ingot.runtime.threads import default_num_threads

    threads = default_num_threads()
    module, x = build(name)
    path = export_module(module, x, os.path.join(workdir, f"{name}.onnx"))
    t0 = time.perf_counter()
    package = M.compile(M.load(path), target="llvm")
    compile_s = time.perf_counter() - t0
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    in_name = sess.get_inputs()[0].name
    want = sess.run(None, {in_name: x})[0]
    main = package.executor()["main"]
    got = main(x)
    got = (got[0] if isinstance(got, tuple) else got).numpy()
    err = float(np.max(np.abs(got - want)))

    lib = getattr(package.executable, "lib", None)

    def ort_call():
        return sess.run(None, {in_name: x})

    def with_adaptive(on: bool):
        def call():
            return main(x)
        call.adaptive = on
        return call

    runtimes = {"ingot": with_adaptive(True), "ingot-fixed": with_adaptive(False), "ort": ort_call}
    runtimes = {k: runtimes[k] for k in args.runtimes.split(",")}
    rounds = max(1, args.rounds)
    calls, budget = max(1, args.calls // rounds), args.max_seconds / rounds
    row = {"model": name, "threads": threads, "package_threads": package.get_num_threads(), "compile_s": compile_s,
           "max_abs_err": err, "runtimes": list(runtimes)}
    samples = {(k, cond): [] for k in runtimes for cond in ("quiet", "loaded")}
    counters = {k: {} for k in runtimes}
    recover_s = [0.0]

    def timed(label, fn, cond):
        adaptive = getattr(fn, "adaptive", None)
        if adaptive is not None and lib is not None:
            lib.set_adaptive_team(adaptive)
            if adaptive and cond == "quiet":
                # The team a busy core capped comes back at a probe (holds up to 2 s): time the quiet
                # machine once it has, and report how long that took.
                t = time.perf_counter()
                while lib.pool_counters().get("cap", 0) and time.perf_counter() - t < 10:
                    fn()
                recover_s[0] = max(recover_s[0], time.perf_counter() - t)
        before = lib.pool_counters() if lib is not None else {}
        samples[(label, cond)].append(per_call_ms(fn, calls, budget))
        if cond == "loaded" and adaptive is not None:
            after = lib.pool_counters() if lib is not None else {}
            for key in ("loops", "late", "capped", "late_wait_ns"):
                counters[label][key] = counters[label].get(key, 0) + after.get(key, 0) - before.get(key, 0)

    # Quiet and loaded alternate, the hog started and stopped per round, so a drift of the machine over
    # the run moves both sides of a round's ratio alike.
    for _ in range(rounds):
        for label, fn in runtimes.items():
            timed(label, fn, "quiet")
        # The hog outlives the round's loaded calls (each runtime stops after `budget` seconds).
        with Hog(args.hog_seconds or len(runtimes) * budget + 30, args.hog_cpu):
            for label, fn in runtimes.items():
                timed(label, fn, "loaded")
    if lib is not None:
        lib.set_adaptive_team(True)
    for label in runtimes:
        row[f"{label}_quiet"] = stats(np.concatenate(samples[(label, "quiet")]))
        row[f"{label}_loaded"] = stats(np.concatenate(samples[(label, "loaded")]))
        row[f"{label}_ratio"] = round_ratios(samples[(label, "quiet")], samples[(label, "loaded")])
        row[f"{label}_pool"] = counters[label]
    row["recover_s"] = recover_s[0]
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(x.shape).astype(x.dtype) for _ in range(6)]

    def as_np(v):
        return (v[0] if isinstance(v, tuple) else v).numpy()

    row["concurrent_mismatches"] = concurrent_check(lambda v: as_np(main(v)), inputs, rounds=args.concurrent_rounds)
    return row


_SHOWN = {"ingot": "Ingot", "ingot-fixed": "Ingot, full team", "ort": "ONNX Runtime"}


def report(rows: list) -> str:
    lines = ["| model | runtime | quiet median ms | quiet p99 ms | loaded median ms | loaded p99 ms | "
             "loaded/quiet median (per round: median [min-max]) | loaded/quiet p99 | pool while loaded |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for label in r["runtimes"]:
            q, l_, ratio = r[f"{label}_quiet"], r[f"{label}_loaded"], r[f"{label}_ratio"]
            pool = r.get(f"{label}_pool") or {}
            pool_text = (f"{pool['late']} late ({pool.get('late_wait_ns', 0) / 1e6:.1f} ms waited) / "
                         f"{pool['loops']} loops, {pool['capped']} capped" if "loops" in pool else "")
            lines.append(f"| {r['model']} | {_SHOWN.get(label, label)} | {q['median']:.3f} | {q['p99']:.3f} | "
                         f"{l_['median']:.3f} | {l_['p99']:.3f} | {ratio['median']:.2f} [{ratio['min']:.2f}-"
                         f"{ratio['max']:.2f}] | {l_['p99'] / q['p99']:.2f} | {pool_text} |")
    lines.append("")
    for r in rows:
        lines.append(f"{r['model']}: {r['threads']} thread(s) (package {r['package_threads']}), max |Ingot - ORT| "
                     f"{r['max_abs_err']:.2e}, 4 threads x one package: {r['concurrent_mismatches']} mismatching "
                     f"outputs; compile {r['compile_s']:.1f} s; {len(r[r['runtimes'][0] + '_ratio']['rounds'])} "
                     f"rounds; the capped team was whole again {r.get('recover_s', 0):.2f} s (at most) after "
                     f"the hog stopped")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp,mobilenet_v2")
    p.add_argument("--calls", type=int, default=1000, help="timed calls per runtime and condition, over all rounds")
    p.add_argument("--max-seconds", type=float, default=8.0,
                   help="stop timing one runtime and condition after this (over all rounds)")
    p.add_argument("--rounds", type=int, default=5, help="quiet/loaded rounds (the hog runs in each loaded half)")
    p.add_argument("--runtimes", default="ingot,ingot-fixed,ort",
                   help="of ingot (adaptive team), ingot-fixed (full team), ort")
    p.add_argument("--hog-seconds", type=float, default=None,
                   help="the hog stops by itself after this (default: the round's loaded calls plus 30 s)")
    p.add_argument("--hog-cpu", type=int, default=1)
    p.add_argument("--concurrent-rounds", type=int, default=5)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)
    print(f"load average before: {load_average()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.models.split(","):
            rows.append(bench(name.strip(), args, workdir))
            print(report(rows[-1:]), flush=True)
    print()
    print(report(rows))
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
