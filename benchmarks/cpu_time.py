"""One-thread CPU time of Ingot beside ONNX Runtime / OpenBLAS: figures that hold on a busy machine.

Wall-clock medians on a shared 2-core machine move by 2-10x with the load; the CPU time a single
thread spends in a call (``time.thread_time``) barely moves: preemption does not count. So this
script compares one-thread kernels: each model (ONNX, from ``--workdir``; exported from
ingot/testing/architectures.py when missing) is compiled by Ingot for ``--target`` with one core and
run beside an ONNX Runtime session with one intra-op thread on the calling thread; ``--gemm N``
times an N^3 fp32 matmul (Ingot's default schedule) beside numpy/OpenBLAS on one thread. Calls are
interleaved, the minimum over ``--rounds`` rounds is kept, and the ratio is from the same run. The
host CPU and the target's ISA are printed with the figures; the fraction of the FMA peak needs a
quiet machine (`benchmarks/peak_fma.py`).

``--repo DIR`` times the Ingot of another checkout (e.g. ``git worktree add /tmp/base <commit>``)
with this script, for before/after figures taken the same way.

Usage:
    python benchmarks/cpu_time.py --models resnet50,mobilenet_v2,bert --gemm 1024 [--target "llvm -mcpu=haswell"]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS on the calling thread: set before numpy loads it
import numpy as np  # noqa: E402

if "--repo" in sys.argv:  # another checkout's ingot, imported before this one's
    sys.path.insert(0, os.path.abspath(sys.argv[sys.argv.index("--repo") + 1]))
else:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def min_thread_time(fns: dict, args: dict, rounds: int) -> dict:
    """``{name: min seconds of thread CPU time}`` over ``rounds`` interleaved calls of each ``fns[name](*args[name])``.

    Example:
        >>> min_thread_time({"sum": sum}, {"sum": ([1, 2],)}, 2)["sum"] >= 0
        True
    """
    best = {k: float("inf") for k in fns}
    for _ in range(2):
        for k, f in fns.items():
            f(*args[k])
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.thread_time()
            f(*args[k])
            best[k] = min(best[k], time.thread_time() - t)
    return best


def model_row(name: str, workdir: str, target: str, rounds: int, winograd: bool = True) -> "tuple[str, float, float]":
    """(model, Ingot ms, ONNX Runtime ms) of one model, one thread, CPU time (``winograd``: the
    ``graph.winograd`` pass config of Ingot's build)."""
    import onnxruntime as ort

    import ingot
    from kernel_sources import export_model

    path = export_model(name, workdir)
    model = ingot.load(path)
    inp = model.inputs[0]
    x = np.random.default_rng(0).standard_normal(tuple(inp.shape)).astype("float32")
    from ingot.ir.transform import PassContext

    with PassContext(config={"graph.winograd": winograd}):
        package = ingot.compile(model, target=f"{target} -num-cores=1")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    expected = sess.run(None, {inp.name: x})[0]
    got = list(ingot.run(package, {inp.name: x}).values())[0]
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)
    fn = package.executor()["main"]
    best = min_thread_time({"ingot": fn, "ort": lambda v: sess.run(None, {inp.name: v})},
                           {"ingot": (x,), "ort": (x,)}, rounds)
    return name, best["ingot"] * 1e3, best["ort"] * 1e3


def gemm_row(n: int, target: str, rounds: int) -> "tuple[str, float, float]":
    """(shape, Ingot GFLOP/s, numpy GFLOP/s) of an n^3 matmul on one thread (numpy's OpenBLAS is
    limited to one thread by OPENBLAS_NUM_THREADS, set when this module loads)."""
    import ingot
    from ingot import ops, te
    from ingot.ops.schedule import schedule_blocks
    from ingot.target import Target
    from ingot.tir.schedule import Schedule

    A, B = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    sch = schedule_blocks(Schedule(te.create_prim_func([A, B, ops.matmul(A, B)])), Target(f"{target} -num-cores=1"))
    lib = ingot.build(sch.mod, f"{target} -num-cores=1")
    a, b = np.random.rand(n, n).astype("float32"), np.random.rand(n, n).astype("float32")
    c1, c2 = np.empty_like(a), np.empty_like(a)
    lib["main"](a, b, c1)
    np.testing.assert_allclose(c1, a @ b, rtol=1e-3)
    best = min_thread_time({"ingot": lib["main"], "numpy": lambda x, y, z: np.matmul(x, y, out=z)},
                           {"ingot": (a, b, c1), "numpy": (a, b, c2)}, rounds)
    flops = 2 * n ** 3 / 1e9
    return f"gemm {n}^3", flops / best["ingot"], flops / best["numpy"]


def host_description() -> str:
    """The host CPU's model name and widest vector ISA, from /proc/cpuinfo (any checkout's ingot).

    Example:
        >>> "cores" in host_description()   # doctest: +SKIP
        True
    """
    name, flags = "?", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and name == "?":
                name = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return f"{name}, {isa}, {os.cpu_count()} cores"


def main(argv=None) -> int:
    from common import load_average

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet50,mobilenet_v2,bert")
    p.add_argument("--gemm", type=int, nargs="*", default=[1024])
    p.add_argument("--target", default="llvm")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--workdir", default="/tmp/ingot-models")
    p.add_argument("--repo", default=None, help="time the ingot package of this checkout instead")
    p.add_argument("--no-winograd", action="store_true", help="build without Winograd convs (graph.winograd)")
    args = p.parse_args(argv)
    import ingot

    print(f"ingot from {os.path.dirname(ingot.__file__)}; host: {host_description()}; target {args.target}; "
          f"load average before: {load_average()}")
    print("| workload (1 thread, CPU time) | Ingot | reference | Ingot / reference |\n|---|---:|---:|---:|")
    for n in args.gemm:
        shape, gi, gn = gemm_row(n, args.target, args.rounds)
        print(f"| {shape} (GFLOP/s; numpy/OpenBLAS) | {gi:.1f} | {gn:.1f} | {gi / gn:.2f}x of OpenBLAS |", flush=True)
    for name in [m for m in args.models.split(",") if m]:
        model, ti, to = model_row(name, args.workdir, args.target, args.rounds, not args.no_winograd)
        print(f"| {model} (ms; ONNX Runtime) | {ti:.2f} | {to:.2f} | {ti / to:.2f}x the time |", flush=True)
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
