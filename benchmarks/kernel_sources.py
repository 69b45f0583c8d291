"""Fingerprints of the default schedules of real models, per target: did a change move a kernel?

For each model (ingot/testing/architectures.py at full size, exported to ONNX once into ``--workdir``)
and each target, runs the graph pipeline and the rule-based default schedule of every fused kernel
(pure Python: no C compiler, so any target works on any host) and prints one line per kernel:
``<model> <target> <kernel> <sha256 of the scheduled TVMScript>`` plus the rule each block got.
Diff two runs (before / after a change) to see which kernels a change of the rules touched, for
CPUs this host cannot run (``-mcpu=sapphirerapids`` on an AVX2 host).

``--asm`` also compiles each kernel for the target and adds its micro-kernel facts
(`ingot.codegen.build.hot_loop_report`: FMAs, FMAs on full-width registers, stack accesses): a
register tile that spills shows as stack accesses, whatever CPU the tool runs on.

Usage:
    python benchmarks/kernel_sources.py --models resnet50,mobilenet_v2 \
        --targets "llvm -mcpu=sapphirerapids -num-cores=2" --out /tmp/before.txt [--asm]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def export_model(name: str, workdir: str) -> str:
    """The ONNX file of the full-size ``name`` in ``workdir`` (exported on first use;
    `ingot.testing.zoo.onnx_file`).

    Example:
        >>> export_model("resnet50", "/tmp/models")   # doctest: +SKIP
        '/tmp/models/resnet50.onnx'
    """
    from ingot.testing.zoo import onnx_file

    return onnx_file(name, workdir)


def kernel_fingerprints(path: str, target: str, asm: bool = False) -> "list[tuple[str, str, str]]":
    """``(kernel, sha256[:16] of its default-scheduled script, rules per block)`` for each fused
    kernel of the ONNX model at ``path`` built for ``target``.

    Example:
        >>> kernel_fingerprints("/tmp/models/resnet50.onnx", "llvm -mcpu=haswell")[0]  # doctest: +SKIP
        ('fused_conv2d_add_relu', '3f1c...', 'conv2d_nhwc:conv_nhwc_rule')
    """
    import ingot
    from ingot.graph.transform import default_build_pipeline
    from ingot.ops.schedule.default import schedule_blocks
    from ingot.target import Target
    from ingot.tir.function import PrimFunc
    from ingot.tir.schedule import Schedule

    tgt = Target(target)
    mod = default_build_pipeline(tgt, "auto")(ingot.load(path).mod)
    rows = []
    for key, func in sorted(mod.functions.items(), key=lambda kv: str(getattr(kv[0], "name_hint", kv[0]))):
        if not isinstance(func, PrimFunc):
            continue
        log: list = []
        try:
            sch = schedule_blocks(Schedule(func), tgt, log=log)
            text = sch.mod["main"].script()
        except Exception as err:  # a rule crashing is what this tool should show, not hide
            text = f"error: {type(err).__name__}: {err}"
        rules = ",".join(f"{blk}:{rule}" for blk, rule, _ in log if rule)
        if asm and not text.startswith("error"):
            from ingot.codegen.build import hot_loop_report, module_assembly

            rep = hot_loop_report(module_assembly(ingot.lower(sch.mod), tgt), tgt.cpu.vector_bits)
            rules += f"\tfma={rep['fma']} vector={rep['vector']} stack={rep['stack']} vector_stack={rep['vector_stack']}"
        rows.append((str(getattr(key, "name_hint", key)), hashlib.sha256(text.encode()).hexdigest()[:16], rules))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet50,mobilenet_v2,bert")
    p.add_argument("--targets", default="llvm -mcpu=sapphirerapids -num-cores=2;llvm -mcpu=haswell -num-cores=2",
                   help="targets separated by ';'")
    p.add_argument("--workdir", default="/tmp/ingot-models")
    p.add_argument("--out", default=None, help="also write the lines to this file")
    p.add_argument("--asm", action="store_true", help="compile each kernel and report its micro-kernel loop")
    args = p.parse_args(argv)
    lines = []
    for name in args.models.split(","):
        path = export_model(name, args.workdir)
        for target in args.targets.split(";"):
            for kernel, digest, rules in kernel_fingerprints(path, target, args.asm):
                line = f"{name}\t{target}\t{kernel}\t{digest}\t{rules}"
                print(line, flush=True)
                lines.append(line)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
