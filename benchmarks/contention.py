"""Latency on a busy machine (issue 18): Ingot and ONNX Runtime, quiet and beside a CPU hog.

For each model (batch 1; random weights; exported to ONNX from plain ``torch.nn``): compile with
Ingot (default thread policy, ``ingot.runtime.threads``), open an ONNX Runtime session with as many
intra-op threads, check the outputs agree, then time single calls (per-call wall times: median and
p99) of each runtime, one runtime at a time:

1. quiet;
2. loaded: a CPU-hog process (a busy loop that stops by itself after ``--hog-seconds``) pinned to
   CPU 1 with ``os.sched_setaffinity`` runs while the same calls are timed again.

It prints loaded/quiet per runtime (median and p99). Then 4 Python threads call one Ingot package
with different inputs and every output is compared with the single-threaded output of the same
input (must be identical). The load average is printed before and after: others share this
machine, so a disturbed run shows.

    python benchmarks/contention.py                       # MLP 784-128-10 and MobileNetV2
    python benchmarks/contention.py --models mlp --calls 2000
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

    def ingot_call():
        return main(x)

    def ort_call():
        return sess.run(None, {in_name: x})

    calls, budget = args.calls, args.max_seconds
    row = {"model": name, "threads": threads, "package_threads": package.get_num_threads(), "compile_s": compile_s,
           "max_abs_err": err}
    for label, fn in (("ingot", ingot_call), ("ort", ort_call)):
        row[f"{label}_quiet"] = stats(per_call_ms(fn, calls, budget))
    for label, fn in (("ingot", ingot_call), ("ort", ort_call)):
        with Hog(args.hog_seconds, args.hog_cpu):
            row[f"{label}_loaded"] = stats(per_call_ms(fn, calls, budget))
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(x.shape).astype(x.dtype) for _ in range(6)]

    def as_np(v):
        return (v[0] if isinstance(v, tuple) else v).numpy()

    row["concurrent_mismatches"] = concurrent_check(lambda v: as_np(main(v)), inputs, rounds=args.concurrent_rounds)
    return row


def report(rows: list) -> str:
    lines = ["| model | runtime | quiet median ms | quiet p99 ms | loaded median ms | loaded p99 ms | "
             "loaded/quiet median | loaded/quiet p99 |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for label, shown in (("ingot", "Ingot"), ("ort", "ONNX Runtime")):
            q, l_ = r[f"{label}_quiet"], r[f"{label}_loaded"]
            lines.append(f"| {r['model']} | {shown} | {q['median']:.3f} | {q['p99']:.3f} | {l_['median']:.3f} | "
                         f"{l_['p99']:.3f} | {l_['median'] / q['median']:.2f} | {l_['p99'] / q['p99']:.2f} |")
    lines.append("")
    for r in rows:
        lines.append(f"{r['model']}: {r['threads']} thread(s) (package {r['package_threads']}), max |Ingot - ORT| "
                     f"{r['max_abs_err']:.2e}, 4 threads x one package: {r['concurrent_mismatches']} mismatching "
                     f"outputs; compile {r['compile_s']:.1f} s")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp,mobilenet_v2")
    p.add_argument("--calls", type=int, default=1000, help="timed calls per runtime and condition")
    p.add_argument("--max-seconds", type=float, default=8.0, help="stop timing one condition after this")
    p.add_argument("--hog-seconds", type=float, default=20.0, help="the hog stops by itself after this")
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
