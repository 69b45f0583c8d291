"""Kernel times inside a model vs the tuner's isolated times (issue: tune whole models).

The tuner times each task's kernel alone, calling it repeatedly (its operands stay in cache); inside
the model each kernel reads what the previous one wrote and its weights from further away. This
script compiles the model untuned, times every kernel inside the model with `ingot.profile`
(median over runs) and puts the tuner's default-schedule time of the same kernel beside it
(``default_us`` per task in the work dir's ``tasks.json``, written by `ingot.tune`), times calls.

    python benchmarks/tune_models.py --models resnet50 --budgets 10m --out /tmp/tm
    python benchmarks/in_model_kernels.py /tmp/tm/resnet50.onnx /tmp/tm/tune_resnet50
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import load_average, markdown_table  # noqa: E402


def isolated_us(work_dir: str) -> dict:
    """{kernel name: the tuner's default-schedule time (µs)} from ``work_dir/tasks.json``."""
    with open(os.path.join(work_dir, "tasks.json")) as f:
        tasks = json.load(f)["tasks"]
    return {k: t["default_us"] for t in tasks if t.get("default_us") for k in t["kernels"]}


def main(argv: "list | None" = None) -> None:
    import ingot
    from ingot.driver import model as M

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("onnx", help="the model (input 'data', 1x3x224x224 unless --shape)")
    p.add_argument("work_dir", help="an ingot.tune work dir of the same model and target")
    p.add_argument("--shape", default="1,3,224,224")
    p.add_argument("--target", default="llvm -num-cores=2")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--rows", type=int, default=12)
    args = p.parse_args(argv)
    print(f"load average before: {load_average()}")
    shape = [int(d) for d in args.shape.split(",")]
    package = M.compile(ingot.load(args.onnx, shape_dict={"data": shape}), args.target)
    x = np.random.rand(*shape).astype("float32")
    prof = M.profile(package, {"data": x}, repeat=args.repeat)
    iso = isolated_us(args.work_dir)
    rows, in_model_total, isolated_total = [], 0.0, 0.0
    for k in sorted(prof.kernels, key=lambda k: -k.ms):
        if k.name not in iso:
            continue
        inside, alone = k.ms * 1e3, iso[k.name] * k.calls
        in_model_total, isolated_total = in_model_total + inside, isolated_total + alone
        rows.append([k.name, k.calls, f"{inside:.0f}", f"{alone:.0f}", f"{inside / alone:.2f}"])
    rows = rows[: args.rows] + [["all kernels with a task", "", f"{in_model_total:.0f}", f"{isolated_total:.0f}",
                                 f"{in_model_total / max(isolated_total, 1e-9):.2f}"]]
    print(markdown_table(["kernel", "calls", "inside the model (µs)", "isolated, tuner (µs)", "ratio"], rows))
    print(f"model run (median): {prof.total_ms:.2f} ms of kernels; load average after: {load_average()}")


if __name__ == "__main__":
    main()
