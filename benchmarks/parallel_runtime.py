"""Ingot's thread pool vs `omp parallel for`: the same model built both ways (pass config
``codegen.parallel_runtime``), per-call wall times in one process, in alternating blocks after a
pause (a block right after the other runtime's calls would share the second core with its spinning
threads). Run it quiet for the pool's cost, and on a loaded machine for what it buys (BENCHMARKS.md
"Session 9: a busy core").

    python benchmarks/parallel_runtime.py --models mobilenet_v2,resnet50,bert --calls 20 --rounds 4
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks.common import load_average  # noqa: E402
from benchmarks.contention import per_call_ms  # noqa: E402

RUNTIMES = ("pool", "openmp")


def compare(name: str, workdir: str, calls: int, rounds: int) -> str:
    """One line: per-call median / p90 / p99 ms of ``name`` under each parallel runtime."""
    import ingot
    from ingot.ir.transform import PassContext
    from ingot.testing import zoo

    path = zoo.onnx_file(name, workdir)
    model = ingot.load(path)
    x = np.random.default_rng(0).standard_normal(tuple(model.inputs[0].shape)).astype("float32")
    mains = {}
    for runtime in RUNTIMES:
        with PassContext(config={"codegen.parallel_runtime": runtime}):
            mains[runtime] = ingot.compile(model, target="llvm").executor()["main"]
    outs = [mains[r](x) for r in RUNTIMES]
    outs = [(o[0] if isinstance(o, tuple) else o).numpy() for o in outs]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-4, atol=1e-4)
    ms = {r: [] for r in RUNTIMES}
    for _ in range(rounds):
        for runtime, fn in mains.items():
            time.sleep(0.2)
            ms[runtime] += list(per_call_ms(lambda fn=fn: fn(x), calls, 10))
    return f"{name}: " + " | ".join(f"{r} median {np.median(v):.3f} p90 {np.percentile(v, 90):.3f} "
                                    f"p99 {np.percentile(v, 99):.3f} ms" for r, v in ms.items())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mobilenet_v2,resnet50,bert")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--workdir", default="/tmp/ingot-models")
    args = p.parse_args(argv)
    print(f"load average before: {load_average()}")
    for name in [m for m in args.models.split(",") if m]:
        print(compare(name, args.workdir, args.calls, args.rounds), flush=True)
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
