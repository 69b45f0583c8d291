"""BERT with a run-time (batch, sequence) against its constant-shape build (#17).

Exports the BERT-base encoder (`ingot.testing.architectures` "bert", first ``--layers`` layers)
twice with torch's dynamo exporter — once with constant shapes (batch 1, ``--seq``) and once with a
dynamic batch and sequence — compiles both for ``--target``, checks the dynamic build against ONNX
Runtime, prints the rule each GEMM / reduction block got in both, and times the two builds
interleaved in one process (``--repeat`` rounds; medians of wall time and of process CPU time).
``--unswitch-ab`` adds a third build, the dynamic one with ``tir.disable_unswitch`` (guarded tail
tiles everywhere, the form before UnswitchRuntimeGuards), timed in the same rounds.

Usage:
    python benchmarks/dynamic_sequence.py --layers 2 --seq 128 --repeat 20
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def export(module, x, path: str, dynamic: bool) -> str:
    """Export ``module`` on example ``x`` to ``path`` (dynamic batch and sequence when ``dynamic``).

    Example:
        >>> # export(module, x, "/tmp/bert_dyn.onnx", dynamic=True)
    """
    import torch

    torch.backends.mha.set_fastpath_enabled(False)  # the fused attention path has no ONNX export
    shapes = ({0: torch.export.Dim("batch", min=1, max=64), 1: torch.export.Dim("seq", min=2, max=512)},) \
        if dynamic else None
    with torch.no_grad():
        torch.onnx.export(module.eval(), (torch.from_numpy(x),), path, input_names=["data"], dynamo=True,
                          dynamic_shapes=shapes, external_data=False)
    return path


def compute_rules(path: str, target: str) -> list:
    """Sorted rules of the GEMM / reduction blocks of the default schedule of ``path``'s kernels.

    Example:
        >>> # compute_rules("/tmp/bert_dyn.onnx", "llvm -num-cores=2") -> ['blocked_gemm_rule', ...]
    """
    import ingot
    from ingot.graph.transform import default_build_pipeline
    from ingot.ops.schedule.default import schedule_blocks
    from ingot.target import Target
    from ingot.tir.function import PrimFunc
    from ingot.tir.schedule import Schedule

    tgt = Target(target)
    mod = default_build_pipeline(tgt, "auto")(ingot.load(path).mod)
    found = []
    for func in mod.functions.values():
        if isinstance(func, PrimFunc):
            log: list = []
            schedule_blocks(Schedule(func), tgt, log=log)
            found += [r for _, r, _ in log if r not in ("elementwise_rule", "inline_injective", None)]
    return sorted(found)


def main() -> None:
    import numpy as np

    import ingot
    from ingot.testing.architectures import build

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--target", default="llvm -num-cores=2")
    ap.add_argument("--unswitch-ab", action="store_true", help="also time the dynamic build with tir.disable_unswitch")
    args = ap.parse_args()
    module, x = build("bert", "full")
    module.enc.layers = module.enc.layers[:args.layers]
    x = np.random.default_rng(0).standard_normal((1, args.seq, x.shape[-1])).astype("float32")
    work = tempfile.mkdtemp(prefix="ingot-dynseq-")
    # a batch-1 example lets torch.export specialize the batch: export the dynamic one at batch 2
    dyn = export(module, np.concatenate([x, x]), os.path.join(work, "dyn.onnx"), True)
    static = export(module, x, os.path.join(work, "static.onnx"), False)
    print("static rules :", compute_rules(static, args.target))
    print("dynamic rules:", compute_rules(dyn, args.target))
    pkgs = {name: ingot.compile(ingot.load(p), target=args.target) for name, p in (("static", static), ("dynamic", dyn))}
    if args.unswitch_ab:
        with ingot.transform.PassContext(config={"tir.disable_unswitch": True}):
            pkgs["dyn-guarded"] = ingot.compile(ingot.load(dyn), target=args.target)
    import onnxruntime as ort

    ref = ort.InferenceSession(dyn, providers=["CPUExecutionProvider"]).run(None, {"data": x})[0]
    got = next(iter(ingot.run(pkgs["dynamic"], {"data": x}).values()))
    print(f"dynamic vs ONNX Runtime at seq {args.seq}: max abs err {np.abs(got - ref).max():.2e}")
    wall = {k: [] for k in pkgs}
    cpu = {k: [] for k in pkgs}
    for _ in range(args.repeat):
        for name, pkg in pkgs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            ingot.run(pkg, {"data": x})
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    for name in pkgs:
        print(f"{name:8s} wall median {statistics.median(wall[name]) * 1e3:8.2f} ms   "
              f"cpu median {statistics.median(cpu[name]) * 1e3:8.2f} ms")
    ratio = statistics.median(wall["dynamic"]) / statistics.median(wall["static"])
    cratio = statistics.median(cpu["dynamic"]) / statistics.median(cpu["static"])
    if args.unswitch_ab:
        g = statistics.median(cpu["dyn-guarded"]) / statistics.median(cpu["static"])
        print(f"dyn-guarded / static: cpu {g:.2f}x (tir.disable_unswitch)")
    print(f"dynamic / static: wall {ratio:.2f}x, cpu {cratio:.2f}x ({args.layers} layers, seq {args.seq}, "
          f"{args.target!r})")


if __name__ == "__main__":
    main()
