"""Auto-tuning benchmark: fp32 GEMM 1024³ and a ResNet-50 3×3 conv2d tuned from the default space.

For each workload one evolutionary tuning run of ``max(--trials)`` trials (64 per round) is made;
the figures at 64 / 256 / 1000 trials are read off the same run (an evolutionary run of 64 trials
*is* the first round of a longer one): the best GFLOP/s the tuner measured by then, the tuning
wall time by then, and the best candidate re-timed here beside numpy (GEMM). ``--conv`` tunes the
NHWC ResNet-50 res2 3×3 layer (fused conv + bias + relu, as the models run it) with
`tune_conv.tune`: tuned vs default vs PyTorch vs ONNX Runtime at each checkpoint.
A random-search run (``ReplayTrace``) of the same space and the same number of trials gives the
"best of equal random samples" column. The tuning curves (best GFLOP/s vs trials) are saved as
``tune_gemm.png``. Apache TVM 0.27's reference on this machine: 299 GFLOP/s after 64 trials,
404 after 256 (307 s of tuning); OpenBLAS ≈ 350 GFLOP/s on 2 threads, FMA peak ≈ 479.

Timed phases wait until the 1-minute load average is below ``--max-load`` (the machine is shared).

Usage:
    python benchmarks/tune_gemm.py --trials 64                 # GEMM, 64 trials (~10 min)
    python benchmarks/tune_gemm.py --trials 64 256 1000 --conv # the full table (hours)
    python benchmarks/tune_gemm.py --n 256 --trials 64 --no-random   # a quick look

Besides the table it prints trials/s of the evolutionary run, its time split and the default
schedule's GFLOP/s as the tuner measured it (the tuned column can never be below it: the
default is measured in the first round).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ingot  # noqa: E402
from common import gemm_func, load_average, markdown_table, median_seconds  # noqa: E402

TARGET = "llvm -num-cores=2"


def wait_quiet(max_load: float, enabled: bool) -> None:
    """Sleep until the 1-minute load average drops below ``max_load``."""
    while enabled:
        load = float(load_average())
        if load < max_load:
            return
        print(f"  load {load:.2f} >= {max_load}: waiting", flush=True)
        time.sleep(30)



def random_args(func, rng):
    return [rng.random(tuple(int(d) for d in p.shape), dtype="float32") for p in func.params]


def tune_curve(func, trials: int, strategy: str, work_dir: str, seed: int):
    """Tune; returns (records in measuring order, wall-clock seconds of each round's end, time split)."""
    from ingot import tune as ms

    shutil.rmtree(work_dir, ignore_errors=True)
    t0 = time.time()
    ms.tune_tir(func, TARGET, work_dir, max_trials_global=trials, num_trials_per_iter=64, strategy=strategy,
                seed=seed, verbose=0)
    wall = time.time() - t0
    sched = ms.tune_tasks.last_scheduler
    db = ms.SQLiteDatabase(os.path.join(work_dir, "database.db"))
    records = sorted(db.get_records(ingot.ir.IRModule({"main": func}), TARGET), key=lambda r: r.timestamp)
    return records, t0, wall, dict(sched.time_split)


def best_until(records, k: int):
    valid = [r for r in records[:k] if r.is_valid]
    return min(valid, key=lambda r: r.mean_sec) if valid else None


def retime(func, record, rng) -> float:
    """Seconds per call of the record's program, timed here (median)."""
    from ingot.tir.schedule import Schedule

    sch = Schedule(func)
    record.trace.apply_to_schedule(sch)
    lib = ingot.build(sch.mod, TARGET)
    args = random_args(func, rng)
    return median_seconds(lambda: lib["main"](*args))


def run_workload(name, func, flop, trials, args, reference):
    rng = np.random.default_rng(0)
    wait_quiet(args.max_load, not args.no_wait)
    ref_name, ref_secs = reference()
    print(f"{name}: {ref_name} {flop / ref_secs / 1e9:.1f} GFLOP/s (load {load_average()})", flush=True)
    top = max(trials)
    wait_quiet(args.max_load, not args.no_wait)
    recs, t0, wall, split = tune_curve(func, top, "evolutionary", os.path.join(args.work_dir, name + "_evo"), 0)
    print(f"  evolutionary {top} trials: {wall:.0f} s wall, {len(recs) / wall:.2f} trials/s (search "
          f"{split['search']:.0f} s, build {split['build']:.0f} s, run {split['run']:.0f} s, other "
          f"{split['other']:.0f} s)", flush=True)
    # Does the cost model steer? Round 1 is random samples (untrained model); later rounds are
    # the model's picks (95 %) after evolution: their mean throughput should be far higher.
    means = []
    for k in range(0, len(recs), 64):
        chunk = [flop / r.mean_sec / 1e9 if r.is_valid else 0.0 for r in recs[k:k + 64]]
        means.append(f"{sum(chunk) / len(chunk):.1f}")
    print(f"  mean GFLOP/s of the candidates measured per round of 64: {', '.join(means)}", flush=True)
    # Which BlockedGemm branches ("<order> <MR>x<NVEC>") the search measured, how many distinct
    # tile decisions of each, and the best of each (the seeded one is "panel 8x2").
    per_branch: dict = {}
    for r in recs:
        br = blocked_branch(r.trace_json) or "other (MultiLevelTiling / default)"
        seen, best = per_branch.get(br, (set(), math.inf))
        seen.add(json.dumps(r.trace_json.get("decisions")))
        per_branch[br] = (seen, min(best, r.mean_sec) if r.is_valid else best)
    rows = [[br, len(seen), f"{flop / best / 1e9:.1f}" if math.isfinite(best) else "-"]
            for br, (seen, best) in sorted(per_branch.items())]
    print(markdown_table(["branch", "distinct candidates", "best GFLOP/s (tuner)"], rows), flush=True)
    default = next((r for r in recs if r.is_valid and not r.trace_json.get("decisions")), None)
    if default is not None:
        # the rule-based default schedule is a decision-free member of the space, measured first
        print(f"  default schedule (measured by the tuner): {flop / default.mean_sec / 1e9:.1f} GFLOP/s", flush=True)
    rand = None
    if not args.no_random:
        wait_quiet(args.max_load, not args.no_wait)
        rand = tune_curve(func, top, "replay", os.path.join(args.work_dir, name + "_rand"), 0)[0]
    rows = []
    for k in trials:
        best = best_until(recs, k)
        if best is None:
            rows.append([k, "-", "-", "-", "-", "-"])
            continue
        at = max(r.timestamp for r in recs[:k]) - t0
        wait_quiet(args.max_load, not args.no_wait)
        secs = retime(func, best, rng)
        rb = best_until(rand, k) if rand else None
        rows.append([k, f"{flop / best.mean_sec / 1e9:.1f}", f"{flop / secs / 1e9:.1f}",
                     f"{flop / secs / 1e9 / (flop / ref_secs / 1e9):.2f}",
                     f"{flop / rb.mean_sec / 1e9:.1f}" if rb else "-", f"{at:.0f}"])
    print(markdown_table(["trials", "tuned GFLOP/s (tuner)", "tuned GFLOP/s (re-timed)", f"/ {ref_name}",
                          "best random GFLOP/s", "tuning s"], rows), flush=True)
    curves = {"evolutionary": _curve(recs, flop)}
    if rand:
        curves["random (ReplayTrace)"] = _curve(rand, flop)
    return curves


def blocked_branch(trace_json) -> "str | None":
    """The BlockedGemm branch ("panel 8x2", ...) a stored trace was built in, from its
    ``meta_schedule.blocked_gemm`` annotation; None for other schedules."""
    for kind, inputs, _attrs, _outs in trace_json.get("insts", []):
        if kind == "annotate" and len(inputs) >= 3 and inputs[1] == {"str": "meta_schedule.blocked_gemm"}:
            value = inputs[2]
            return value.get("str", str(value)) if isinstance(value, dict) else str(value)
    return None


def _curve(records, flop):
    best, out = math.inf, []
    for r in records:
        if r.is_valid:
            best = min(best, r.mean_sec)
        out.append(flop / best / 1e9 if math.isfinite(best) else 0.0)
    return out


def save_plot(all_curves, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    fig, axes = plt.subplots(1, len(all_curves), figsize=(6 * len(all_curves), 4), squeeze=False)
    for ax, (name, curves) in zip(axes[0], all_curves.items()):
        for label, ys in curves.items():
            ax.plot(range(1, len(ys) + 1), ys, label=label)
        ax.set_title(name)
        ax.set_xlabel("trials")
        ax.set_ylabel("best GFLOP/s")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"tuning curves: {path}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1024, help="GEMM size (n x n x n)")
    p.add_argument("--trials", type=int, nargs="+", default=[64], help="checkpoints; the run has max(trials)")
    p.add_argument("--conv", action="store_true", help="also tune the ResNet-50 NHWC 3x3 conv layer (vs default, "
                   "PyTorch, ORT: benchmarks/tune_conv.py)")
    p.add_argument("--no-gemm", action="store_true")
    p.add_argument("--no-random", action="store_true", help="skip the random-search comparison run")
    p.add_argument("--work-dir", default="./tune_gemm_tmp")
    p.add_argument("--max-load", type=float, default=1.0)
    p.add_argument("--no-wait", action="store_true", help="do not wait for a quiet machine")
    p.add_argument("--plot", default="tune_gemm.png")
    args = p.parse_args()
    trials = sorted(set(args.trials))
    curves = {}
    if not args.no_gemm:
        n = args.n
        rng = np.random.default_rng(0)
        a, b = rng.random((n, n), dtype="float32"), rng.random((n, n), dtype="float32")
        curves[f"GEMM {n}^3"] = run_workload(f"gemm{n}", gemm_func(n), 2.0 * n ** 3, trials, args,
                                             lambda: ("numpy", median_seconds(lambda: a @ b)))
    if args.conv:
        # the NHWC layer the models run (fused conv + bias + relu, packed weights), through
        # tune_conv's machinery: one run, each checkpoint's best vs default / PyTorch / ORT
        import tune_conv

        wait_quiet(args.max_load, not args.no_wait)
        conv_curves = tune_conv.tune([tune_conv.layer_named("res2 3x3")], trials, 2, 150,
                                     os.path.join(args.work_dir, "conv_nhwc"))
        curves["conv2d NHWC 3x3 56x56x64->64"] = {"evolutionary": conv_curves["res2 3x3"]}
    print(f"load average at the end: {load_average()}", flush=True)
    save_plot(curves, args.plot)


if __name__ == "__main__":
    main()
