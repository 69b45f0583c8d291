"""Kernel times inside a model vs isolated, warm-cache and cold-cache (issue #7: tune whole models).

The tuner times each task's kernel alone. Called repeatedly (warm), its weights and output stay in
cache; inside the model each kernel reads what the previous one wrote and its weights from L3 or
DRAM. Cold-cache timing (`time_evaluator(..., cache_flush=...)`, TVM's ``enable_cpu_cache_flush``)
should match the model; three flush policies are compared (`RunnerConfig.cache_flush`: every
argument but the first as TVM, the kernel's weights only, weights and outputs), with each policy's
spread over kernels (how uniformly it predicts the in-model time). This script
compiles the model untuned, times every kernel call inside the model (`ingot.profile`'s hook, the
fastest of the runs per call), and times each task's default-schedule kernel alone, warm (the tuner's old measurement:
`MODEL_RUNNER_CONFIG` with ``cache_flush=False``) and cold (its new one), interleaved round by round,
the fastest of all rounds kept. With a work dir, the tuner's own ``default_us`` (from
``tasks.json``, measured the way that work dir was) is shown too.

    python benchmarks/experiments/in_model_kernels.py /tmp/tm/resnet50_full.onnx [--work-dir /tmp/tm/tune_resnet50]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # the repository root

from benchmarks.common import load_average, markdown_table  # noqa: E402


def in_model_us(package, inputs: dict, repeat: int) -> "dict[str, tuple[int, float]]":
    """{kernel name: (calls per run, µs per run)} inside the model: each call site's fastest of
    ``repeat`` runs, summed over the kernel's call sites. The fastest, not `ingot.profile`'s
    median: other processes only ever add time, and under load a 2-thread kernel whose second
    thread is descheduled runs 10-100x slower, which a median over a few runs does not hide."""
    from ingot.workflow.model import kernel_timed_main

    samples: dict = {}
    # the same per-step hook as ingot.profile: each kernel step timed around its call
    fn = kernel_timed_main(package, lambda kernel, sec: samples.setdefault(kernel, []).append(sec))
    fn(*inputs.values())  # warm-up (first touch of the workspace)
    samples.clear()
    for _ in range(repeat):
        fn(*inputs.values())
    out = {}
    for name, times in samples.items():
        calls = len(times) // repeat
        sites = [min(times[r * calls + c] for r in range(repeat)) for c in range(calls)]
        out[name] = (calls, sum(sites) * 1e6)
    return out


def tuner_us(work_dir: str) -> dict:
    """{kernel name: the tuner's default-schedule time (µs)} from ``work_dir/tasks.json``."""
    with open(os.path.join(work_dir, "tasks.json")) as f:
        tasks = json.load(f)["tasks"]
    return {k: t["default_us"] for t in tasks if t.get("default_us") for k in t["kernels"]}


#: The flush policies compared (`RunnerConfig.cache_flush`), in column order.
POLICIES = (True, "weights", "weights+outputs")


def isolated_us(tasks: list, target, rounds: int) -> "tuple[dict, dict, dict]":
    """Per task name: warm seconds and, per flush policy (`POLICIES`), cold seconds of its default
    kernel (fastest over ``rounds`` rounds of the tuner's measurements, interleaved), and the
    cold time of the model tuner's policy in the first round only."""
    import ingot
    from ingot.ops.schedule import schedule_blocks
    from ingot.tir.schedule import Schedule
    from ingot.tune.builder.local import build_candidate
    from ingot.tune.database import ArgInfo
    from ingot.tune.model import MODEL_RUNNER_CONFIG
    from ingot.tune.runner import RunnerConfig, RunnerInput
    from ingot.runtime.module import Module

    warm_cfg = RunnerConfig(**{**MODEL_RUNNER_CONFIG, "cache_flush": False}).timing()
    rng = np.random.default_rng(0)
    kernels = []
    for t in tasks:
        lib = Module(build_candidate(schedule_blocks(Schedule(t.mod), target).mod, str(target)))
        lib.set_num_threads(target.num_cores or 0)
        args = [rng.uniform(-1, 1, a.shape).astype(a.dtype) for a in ArgInfo.from_prim_func(t.mod["main"])]
        inp = RunnerInput("", [], weight_args=t.weight_params, output_args=t.output_params)
        cfgs = {p: RunnerConfig(**{**MODEL_RUNNER_CONFIG, "cache_flush": p}).timing(inp) for p in POLICIES}
        kernels.append((t.name, lib, args, cfgs))
    warm, cold, cold_first = {}, {p: {} for p in POLICIES}, {}
    for r in range(rounds):
        for name, lib, args, cfgs in kernels:
            w = lib.time_evaluator("main", ingot.cpu(0), **warm_cfg)(*args).min
            warm[name] = min(warm.get(name, w), w)
            for p in POLICIES:
                c = lib.time_evaluator("main", ingot.cpu(0), **cfgs[p])(*args).min
                cold[p][name] = min(cold[p].get(name, c), c)
                if r == 0 and p == MODEL_RUNNER_CONFIG["cache_flush"]:
                    cold_first[name] = c
    return warm, cold, cold_first


def uniformity(ratios: list) -> str:
    """How uniformly a policy predicts the in-model times: the median over kernels of
    ``|inside / isolated - 1|`` (in log terms; a median, because under load a few in-model calls
    are hit by other processes), the share of kernels within 10 %, and the worst ratio."""
    logs = sorted(abs(np.log2(r)) for r in ratios if r > 0)
    if not logs:
        return ""
    worst = max(ratios, key=lambda r: abs(np.log2(r)))
    within = sum(1 for x in logs if x <= np.log2(1.1)) / len(logs)
    # the spread (std of log ratios) is what matters for ranking schedules: a common offset
    # scales every candidate of a task alike, a kernel-dependent one does not
    spread = float(np.std([np.log(r) for r in ratios if r > 0]))
    return (f"median deviation {100 * (2 ** float(np.median(logs)) - 1):.0f}%, {100 * within:.0f}% of kernels "
            f"within 10%, spread (std of ln ratio) {spread:.3f}, range {min(ratios):.2f}-{max(ratios):.2f}, "
            f"worst {worst:.2f}")


def main(argv: "list | None" = None) -> None:
    import ingot
    from ingot.workflow import model as M
    from ingot.target import as_target
    from ingot.tune.tasks.extract import extract_tasks

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("onnx", help="the model (input 'data', 1x3x224x224 unless --shape)")
    p.add_argument("--work-dir", default=None, help="an ingot.tune work dir of the same model and target")
    p.add_argument("--shape", default="1,3,224,224")
    p.add_argument("--target", default="llvm -num-cores=2")
    p.add_argument("--repeat", type=int, default=20, help="model runs of the in-model timing")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the isolated timings")
    p.add_argument("--rows", type=int, default=12)
    args = p.parse_args(argv)
    before = load_average()
    shape = [int(d) for d in args.shape.split(",")]
    target = as_target(args.target)
    model = ingot.load(args.onnx, shape_dict={"data": shape})
    package = M.compile(model, args.target)
    tasks = extract_tasks(model, target)
    x = np.random.rand(*shape).astype("float32")
    inside_us = in_model_us(package, {"data": x}, args.repeat)
    warm, cold, cold_first = isolated_us(tasks, target, args.rounds)
    task_of = {k: t.name for t in tasks for k in t.kernels}
    tuner = tuner_us(args.work_dir) if args.work_dir else {}
    names = {True: "all but first", "weights": "weights", "weights+outputs": "weights+outputs"}
    rows, ratios, conv_ratios = [], {p: [] for p in POLICIES}, {p: [] for p in POLICIES}
    tot = dict(inside=0.0, warm=0.0, first=0.0, tuner=0.0, **{str(p): 0.0 for p in POLICIES})
    for kernel, (calls, inside) in sorted(inside_us.items(), key=lambda kv: -kv[1][1]):
        name = task_of.get(kernel)
        if name is None:
            continue
        w = warm[name] * 1e6 * calls
        cs = {p: cold[p][name] * 1e6 * calls for p in POLICIES}
        tot["inside"] += inside
        tot["warm"] += w
        for p in POLICIES:
            tot[str(p)] += cs[p]
            ratios[p].append(inside / cs[p])
            if "conv" in kernel:
                conv_ratios[p].append(inside / cs[p])
        tot["first"] += cold_first[name] * 1e6 * calls
        tot["tuner"] += tuner.get(kernel, 0.0) * calls
        row = ([kernel, calls, f"{inside:.0f}", f"{w:.0f}"] + [f"{cs[p]:.0f}" for p in POLICIES]
               + [f"{inside / w:.2f}"] + [f"{inside / cs[p]:.2f}" for p in POLICIES])
        rows.append(row + ([f"{tuner[kernel] * calls:.0f}" if kernel in tuner else ""] if tuner else []))
    total = (["all kernels with a task", "", f"{tot['inside']:.0f}", f"{tot['warm']:.0f}"]
             + [f"{tot[str(p)]:.0f}" for p in POLICIES] + [f"{tot['inside'] / tot['warm']:.2f}"]
             + [f"{tot['inside'] / tot[str(p)]:.2f}" for p in POLICIES])
    rows = rows[: args.rows] + [total + ([f"{tot['tuner']:.0f}"] if tuner else [])]
    header = (["kernel", "calls", "inside the model (µs)", "isolated, warm (µs)"]
              + [f"flushed: {names[p]} (µs)" for p in POLICIES] + ["inside / warm"]
              + [f"inside / {names[p]}" for p in POLICIES] + (["tuner default_us x calls"] if tuner else []))
    print(markdown_table(header, rows))
    from ingot.tune.model import MODEL_RUNNER_CONFIG

    for p in POLICIES:
        mark = " (the model tuner's policy)" if p == MODEL_RUNNER_CONFIG["cache_flush"] else ""
        print(f"- flushed {names[p]}{mark}: inside / flushed over all kernels {tot['inside'] / tot[str(p)]:.2f}, "
              f"per kernel {uniformity(ratios[p])}; convolutions only (the rest is dominated by the "
              f"executor's per-call overhead): {uniformity(conv_ratios[p])}")
    print(f"{args.target}: {sum(v[1] for v in inside_us.values()) / 1e3:.2f} ms of kernels in the model "
          f"(fastest of {args.repeat} runs per call); isolated, the tuner's policy, first round only "
          f"({cold_cfg_repeat()} calls per kernel): {tot['first']:.0f} µs over {args.rounds} "
          f"rounds; load average before: {before}, after: {load_average()}")


def cold_cfg_repeat() -> int:
    from ingot.tune.model import MODEL_RUNNER_CONFIG
    from ingot.tune.runner import RunnerConfig

    return RunnerConfig(**{**MODEL_RUNNER_CONFIG, "cache_flush": True}).timing()["repeat"]


if __name__ == "__main__":
    main()
