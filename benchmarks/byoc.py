"""BYOC on whole models: Ingot native vs Ingot with dense/matmul on the cblas backend (all, and the
cost policy's choice) vs ONNX Runtime, and a model with one op taken from Ingot's converter table run
with ``fallback="onnxruntime"``.

Each model (ONNX, from ``--workdir``; exported from ingot.testing's model zoo when missing) is
compiled three ways for one core — native, ``byoc=["cblas"]``, ``byoc=["cblas"], byoc_policy="cost"`` —
and timed beside an ONNX Runtime session with one intra-op thread. Figures are one-thread CPU time
(``time.thread_time``, the minimum over ``--rounds`` interleaved rounds; see benchmarks/cpu_time.py
for why: they hold on a busy 2-core machine). Every variant's output is checked against ONNX Runtime
first; the partition report says how many candidate ops each variant sent to the backend.

``--fallback-op OP`` imports the first model that has ``OP`` with its converter removed, so every
``OP`` node stays an opaque ONNX node run by ONNX Runtime, compiles it with ``fallback="onnxruntime"``
and checks it against ONNX Runtime on the whole model. The default, ``GlobalAveragePool``, has no ONNX
function body (an op with one, such as ``Relu`` or ``Clip``, would be expanded into its body instead).

    python benchmarks/byoc.py --models resnet50,mobilenet_v2,bert --rounds 8
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS (the cblas backend's) on one thread
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from cpu_time import host_description, min_thread_time  # noqa: E402

VARIANTS = {"native": {}, "cblas": {"byoc": ["cblas"]}, "cblas-cost": {"byoc": ["cblas"], "byoc_policy": "cost"}}


def offloaded(package) -> str:
    """``"r regions (k/n ops)"``: external regions in the build (after the cost policy's choice), and
    candidate ops the backend's patterns accepted / candidates (``package.partition_report``)."""
    rows = getattr(package, "partition_report", None) or []
    regions = len(package.executable.external)
    return f"{regions} regions ({sum(1 for r in rows if r['accepted'])}/{len(rows)} ops)" if rows else "-"


def model_rows(name: str, workdir: str, rounds: int, target: str) -> list:
    """One row per variant: (model, variant, Ingot ms, ORT ms, offloaded, max |err|)."""
    import onnxruntime as ort

    import ingot
    from kernel_sources import export_model

    path = export_model(name, workdir)
    model = ingot.load(path)
    inp = model.inputs[0]
    x = np.random.default_rng(0).standard_normal(tuple(inp.shape)).astype("float32")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    expected = sess.run(None, {inp.name: x})[0]
    fns, args, info = {"ort": lambda v: sess.run(None, {inp.name: v})}, {"ort": (x,)}, {}
    for variant, kwargs in VARIANTS.items():
        package = ingot.compile(model, target=f"{target} -num-cores=1", **kwargs)
        got = list(ingot.run(package, {inp.name: x}).values())[0]
        info[variant] = (offloaded(package), float(np.max(np.abs(got - expected))))
        fns[variant], args[variant] = package.executor()["main"], (x,)
    best = min_thread_time(fns, args, rounds)
    return [(name, v, best[v] * 1e3, best["ort"] * 1e3, *info[v]) for v in VARIANTS]


def fallback_row(name: str, workdir: str, op: str, target: str) -> str:
    """Compile ``name`` with ``op``'s converter removed and ``fallback="onnxruntime"``; compare with ORT."""
    import onnxruntime as ort

    import ingot
    from ingot.frontend.onnx import importer
    from kernel_sources import export_model

    path = export_model(name, workdir)
    importer._load_converters()
    saved = importer._CONVERTERS.pop(op)
    try:
        model = ingot.load(path, fallback="onnxruntime")
    finally:
        importer._CONVERTERS[op] = saved
    package = ingot.compile(model, target=f"{target} -num-cores=1", fallback="onnxruntime")
    inp = model.inputs[0]
    x = np.random.default_rng(0).standard_normal(tuple(inp.shape)).astype("float32")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    err = float(np.max(np.abs(list(ingot.run(package, {inp.name: x}).values())[0] - sess.run(None, {inp.name: x})[0])))
    return (f"{name} without Ingot's {op} converter: {len(package.fallback_ops)} {op} node(s) on ONNX Runtime, "
            f"the rest native; max |Ingot - ORT| {err:.1e}")


def main(argv=None) -> int:
    from common import load_average

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet50,mobilenet_v2,bert")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--target", default="llvm")
    p.add_argument("--workdir", default="/tmp/ingot-models")
    p.add_argument("--fallback-op", default="GlobalAveragePool")
    args = p.parse_args(argv)
    print(f"host: {host_description()}; target {args.target}; load average before: {load_average()}")
    print("| model | Ingot variant | Ingot ms | ONNX Runtime ms | Ingot / ORT | offloaded | max abs err vs ORT |\n"
          "|---|---|---:|---:|---:|---:|---:|")
    names = [m for m in args.models.split(",") if m]
    for name in names:
        for model, variant, ti, to, taken, err in model_rows(name, args.workdir, args.rounds, args.target):
            print(f"| {model} | {variant} | {ti:.2f} | {to:.2f} | {ti / to:.2f}x | {taken} | {err:.1e} |", flush=True)
    if args.fallback_op:
        import onnx
        from kernel_sources import export_model

        holders = [n for n in names if any(node.op_type == args.fallback_op
                                           for node in onnx.load(export_model(n, args.workdir)).graph.node)]
        print(fallback_row(holders[0], args.workdir, args.fallback_op, args.target) if holders
              else f"no model of {names} has a {args.fallback_op} node")
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
