"""Ingot and ONNX Runtime on 1 and 2 threads, wall clock, in one process.

Each model (ONNX, from ``--workdir``; exported from ingot/testing/architectures.py when missing) is
compiled by Ingot with ``-num-cores=1`` and ``-num-cores=2`` and opened by ONNX Runtime with 1 and 2
intra-op threads; each runs ``--rounds`` calls in a block of its own (after a pause that lets the
other runtime's worker threads stop spinning: interleaving call by call made each runtime's spinning
pool steal the second core from the other) and the median and minimum of each are printed. Wall clock: quote it only with the load average the script prints (on a shared
machine `benchmarks/cpu_time.py` gives one-thread figures that hold).

Usage:
    python benchmarks/thread_scaling.py --models resnet50,mobilenet_v2,bert --rounds 15 [--target "llvm -mcpu=haswell"]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def scaling_rows(name: str, workdir: str, target: str, rounds: int) -> "list[tuple[str, float, float]]":
    """``[(runner, median ms, min ms)]`` for ingot and ORT on 1 and 2 threads, interleaved.

    Example:
        >>> rows = scaling_rows("mobilenet_v2", "/tmp/ingot-models", "llvm", 5)   # doctest: +SKIP
    """
    import onnxruntime as ort
    from kernel_sources import export_model

    import ingot

    path = export_model(name, workdir)
    model = ingot.load(path)
    inp = model.inputs[0]
    x = np.random.default_rng(0).standard_normal(tuple(inp.shape)).astype("float32")
    fns = {}
    for threads in (1, 2):
        fns[f"Ingot {threads}T"] = ingot.compile(model, target=f"{target} -num-cores={threads}").executor()["main"]
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        fns[f"ORT {threads}T"] = lambda v, s=sess: s.run(None, {inp.name: v})
    times: dict = {k: [] for k in fns}
    for k, f in fns.items():
        time.sleep(0.5)  # idle worker threads of the previous runner stop spinning
        f(x)
        f(x)
        for _ in range(rounds):
            t0 = time.perf_counter()
            f(x)
            times[k].append(time.perf_counter() - t0)
    return [(k, float(np.median(v)) * 1e3, min(v) * 1e3) for k, v in times.items()]


def main(argv=None) -> int:
    from common import load_average

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet50,mobilenet_v2,bert")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--target", default="llvm")
    p.add_argument("--workdir", default="/tmp/ingot-models")
    args = p.parse_args(argv)
    print(f"load average before: {load_average()}; target {args.target}")
    print("| model | runner | median ms | min ms |\n|---|---|---:|---:|")
    for name in args.models.split(","):
        for runner, med, low in scaling_rows(name, args.workdir, args.target, args.rounds):
            print(f"| {name} | {runner} | {med:.2f} | {low:.2f} |", flush=True)
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
