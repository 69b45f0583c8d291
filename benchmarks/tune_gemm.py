"""Auto-tuning benchmark: fp32 GEMM 1024³ and a ResNet-50 3×3 conv2d tuned from the default space.

For each workload one evolutionary tuning run of ``max(--trials)`` trials (64 per round) is made;
the figures at 64 / 256 / 1000 trials are read off the same run (an evolutionary run of 64 trials
*is* the first round of a longer one): the best GFLOP/s the tuner measured by then, the tuning
wall time by then, and the best candidate re-timed here beside numpy (GEMM): in C with
``time_evaluator`` on 64-byte-aligned arrays, MIN and median over many short windows, on 2 and on
1 thread (see ``ROUNDS``). ``--conv`` tunes the
NHWC ResNet-50 res2 3×3 layer (fused conv + bias + relu, as the models run it) with
`tune_conv.tune`: tuned vs default vs PyTorch vs ONNX Runtime at each checkpoint.
A random-search run (``ReplayTrace``) of the same space and the same number of trials gives the
"best of equal random samples" column. The tuning curves (best GFLOP/s vs trials) are saved as
``tune_gemm.png``. Apache TVM 0.27's reference on this machine: 299 GFLOP/s after 64 trials,
404 after 256 (307 s of tuning); OpenBLAS ≈ 350 GFLOP/s on 2 threads, FMA peak ≈ 479.

Timed phases wait until the 1-minute load average is below ``--max-load`` (the machine is shared).

Apache TVM in the same run: ``--tvm-python <venv>/bin/python`` (a venv made by
``benchmarks/setup_tvm.sh``) runs ``benchmarks/tvm_reference.py`` in that interpreter as a
subprocess *after* Ingot's tuning of each GEMM (never at the same time), with the same checkpoints;
it saves each checkpoint's best kernel, which ``tvm_reference.py --timer`` then times on request
in alternation with Ingot's (A, B, A, B: one methodology, a burst of load hits both), on 2 and on
1 thread. The table gains TVM's tuner and re-timed GFLOP/s, Ingot / TVM and TVM's tuning wall time,
and the plot gains TVM's curve. ``--mlc`` adds the MLC course's 128³ matmul (``--no-gemm --mlc``:
only that one).

Usage:
    python benchmarks/tune_gemm.py --trials 64                 # GEMM, 64 trials (~10 min)
    python benchmarks/tune_gemm.py --trials 64 256 1000 --conv # the full table (hours)
    python benchmarks/tune_gemm.py --n 256 --trials 64 --no-random   # a quick look
    python benchmarks/tune_gemm.py --trials 64 256 --mlc --tvm-python /work/tvm-venv/bin/python
    python benchmarks/tune_gemm.py --trials 64 256 --no-gemm --mlc --tvm-python /work/tvm-venv/bin/python

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
import statistics
import subprocess
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
    """Random float32 arguments of ``func``, 64-byte aligned (as the tuner's runner, Ingot's
    NDArrays and TVM's tensors are: numpy's own are 16 bytes off, which costs vector loads)."""
    from ingot.runtime.ndarray import aligned_empty

    out = []
    for p in func.params:
        a = aligned_empty(tuple(int(d) for d in p.shape), "float32")
        a[...] = rng.random(a.shape, dtype="float32")
        out.append(a)
    return out


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


#: How every kernel of the table is re-timed (Ingot's and TVM's alike, `time_evaluator` semantics):
#: ROUNDS rounds, each of REPEAT windows of at least WINDOW_MS; Ingot's and TVM's rounds alternate
#: (A, B, A, B, ...), so a burst of load hits both. MIN and median over all windows are reported:
#: other processes only ever add time, so the MIN is the robust figure on a shared machine.
#: Timing in C matters: a Python-side loop adds the ctypes call (about 5-8 us here) to every call,
#: which on a 14 us kernel was most of session 5's gap between the tuner's 292 and the re-timed 188.
ROUNDS, REPEAT, WINDOW_MS = 5, 40, 2


def build_record(func, record):
    """The record's program compiled for TARGET (a runtime Module)."""
    from ingot.tir.schedule import Schedule

    sch = Schedule(func)
    record.trace.apply_to_schedule(sch)
    return ingot.build(sch.mod, TARGET)


def ingot_window_secs(lib, args, threads: int) -> "list[float]":
    """One round: REPEAT windows (seconds per call) of ``lib["main"](*args)`` on ``threads`` threads."""
    lib.set_num_threads(threads)
    ev = lib.time_evaluator("main", ingot.cpu(), number=1, repeat=REPEAT, min_repeat_ms=WINDOW_MS)
    return list(ev(*args).results)


def retime(func, record, rng, tvm_lib=None, n=None, tvm_python=None, threads=(2, 1)) -> dict:
    """Re-time the record's program (and, given ``tvm_lib``, TVM's saved n³ kernel in alternation
    with it, through ``tvm_reference.py --timer``): {(who, threads): (min s, median s)}.

    Example:
        >>> # retime(gemm_func(128), best, rng, "/tmp/tg/tvm/mlc128/best_64.so", 128, "/work/tvm-venv/bin/python")
        {('ingot', 2): (1.3e-05, 1.4e-05), ('tvm', 2): (...), ('ingot', 1): (...), ('tvm', 1): (...)}
    """
    lib = build_record(func, record)
    args = random_args(func, rng)
    out = {}
    for t in threads:
        servers = [TvmTimer(tvm_python, tvm_lib, n, t)] if tvm_lib else []
        samples: dict = {"ingot": []}
        try:
            for _ in range(ROUNDS):
                samples["ingot"] += ingot_window_secs(lib, args, t)
                for server in servers:
                    samples.setdefault("tvm", []).extend(server.time(REPEAT, WINDOW_MS))
        finally:
            for server in servers:
                server.close()
        for who, secs in samples.items():
            out[(who, t)] = (min(secs), statistics.median(secs))
    lib.set_num_threads(0)
    return out


class TvmTimer:
    """A ``tvm_reference.py --timer`` process timing TVM's saved kernel on ``threads`` threads
    (``TVM_NUM_THREADS``) on request, so that the caller can alternate it with its own timings.

    Example:
        >>> # t = TvmTimer("/work/tvm-venv/bin/python", "best_64.so", 128, 2); t.time(40, 2); t.close()
    """

    def __init__(self, python: str, lib: str, n: int, threads: int):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tvm_reference.py")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["TVM_NUM_THREADS"] = str(threads)
        self.proc = subprocess.Popen([python, script, "--timer", lib, "--n", str(n)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        ready = self._read()
        if ready.get("threads") != threads:
            self.close()
            raise RuntimeError(f"TVM timer for {lib}: asked for {threads} threads, TVM runs {ready.get('threads')}")

    def _read(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith("{"):
                return json.loads(line)
        raise RuntimeError(f"TVM timer exited (code {self.proc.wait()}): run tvm_reference.py --timer by hand")

    def time(self, repeat: int, window_ms: int) -> "list[float]":
        self.proc.stdin.write(json.dumps({"number": 1, "repeat": repeat, "min_repeat_ms": window_ms}) + "\n")
        self.proc.stdin.flush()
        return self._read()["results"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(30)


def run_tvm(n: int, trials, args) -> "dict | None":
    """Apache TVM's MetaSchedule on the n³ GEMM, via benchmarks/tvm_reference.py in the
    ``--tvm-python`` interpreter: {"rows": {trials: checkpoint dict}, "curve": [...], "info": {...}},
    or None when it failed (its stderr is kept in ``<work-dir>/tvm_<workload>.log``).

    Example:
        >>> run_tvm(128, [8], argparse.Namespace(tvm_python="/work/tvm-venv/bin/python",
        ...         tvm_mcpu=None, work_dir="/tmp/tg"))  # doctest: +SKIP
        {'rows': {8: {'gflops': 99.3, ...}}, 'curve': [...], 'info': {...}}
    """
    workload = "mlc128" if n == 128 else f"gemm{n}"
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tvm_reference.py")
    cmd = [args.tvm_python, script, "--workloads", workload, "--trials", *map(str, trials),
           "--work-dir", os.path.join(os.path.abspath(args.work_dir), "tvm")]
    if args.tvm_mcpu:
        cmd += ["--mcpu", args.tvm_mcpu]
    os.makedirs(args.work_dir, exist_ok=True)
    log_path = os.path.join(args.work_dir, f"tvm_{workload}.log")
    # TVM's venv must not see Ingot's import path (it has its own numpy)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    t0 = time.time()
    with open(log_path, "w") as err:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    if proc.returncode != 0:
        print(f"  TVM failed (exit {proc.returncode}); its log: {log_path}", flush=True)
        return None
    out: dict = {"rows": {}, "curve": [], "info": {}}
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):  # not ours (tvm_reference sends other output to stderr)
            continue
        rec = json.loads(line)
        if rec["kind"] == "checkpoint":
            out["rows"][rec["trials"]] = rec
        elif rec["kind"] == "curve":
            out["curve"] = rec["gflops"]
        else:
            out["info"].update(rec)
    info = out["info"]
    print(f"  TVM {info.get('tvm')} ({info.get('mcpu')}): {time.time() - t0:.0f} s in all, its "
          f"tensor_intrin import (paid again by every builder worker) {info.get('startup_s')} s; "
          f"log {log_path}", flush=True)
    return out


def run_workload(name, func, flop, trials, args, reference, tvm_n=None):
    """Tune ``func`` with Ingot (and, with ``--tvm-python`` and ``tvm_n``, TVM on the tvm_n³ GEMM
    afterwards); print the table; return the tuning curves for the plot."""
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
    tvm, with_tvm = None, bool(args.tvm_python and tvm_n)
    if with_tvm:
        # after Ingot's tuning, never beside it: two things timed at once are both wrong
        wait_quiet(args.max_load, not args.no_wait)
        tvm = run_tvm(tvm_n, trials, args)
    rows = []
    for k in trials:
        best = best_until(recs, k)
        tvm_row = (tvm or {}).get("rows", {}).get(k) or {}
        rb = best_until(rand, k) if rand else None
        if best is None:
            rows.append([k, "-"] * 4 + (["-"] * 6 if with_tvm else []))
            continue
        at = max(r.timestamp for r in recs[:k]) - t0
        wait_quiet(args.max_load, not args.no_wait)
        # Ingot's best and TVM's best at this checkpoint, alternating, one timer (see ROUNDS)
        times = retime(func, best, rng, tvm_row.get("lib"), tvm_n, args.tvm_python)
        g = {key: (flop / lo / 1e9, flop / med / 1e9) for key, (lo, med) in times.items()}
        rows.append([k, f"{flop / best.mean_sec / 1e9:.1f}", f"{g['ingot', 2][0]:.1f} / {g['ingot', 2][1]:.1f}",
                     f"{g['ingot', 1][0]:.1f} / {g['ingot', 1][1]:.1f}",
                     f"{g['ingot', 2][0] / (flop / ref_secs / 1e9):.2f}",
                     f"{flop / rb.mean_sec / 1e9:.1f}" if rb else "-", f"{at:.0f}"])
        if with_tvm:
            rows[-1] += _tvm_cells(tvm_row, g)
    header = ["trials", "Ingot GFLOP/s (tuner)", "Ingot 2 thr min / median", "Ingot 1 thr min / median",
              f"Ingot / {ref_name}", "best random GFLOP/s (tuner)", "tuning s"]
    if with_tvm:
        header += ["TVM GFLOP/s (tuner)", "TVM 2 thr min / median", "TVM 1 thr min / median",
                   "Ingot / TVM (2 thr min)", "TVM tuning s"]
    print(markdown_table(header, rows), flush=True)
    print(f"  re-timed: min / median GFLOP/s over {ROUNDS} x {REPEAT} windows of >= {WINDOW_MS} ms each, "
          f"Ingot and TVM alternating; load average {load_average()}", flush=True)
    curves = {"evolutionary": _curve(recs, flop)}
    if rand:
        curves["random (ReplayTrace)"] = _curve(rand, flop)
    if tvm and tvm["curve"]:
        curves["Apache TVM MetaSchedule"] = tvm["curve"]
    return curves


def _tvm_cells(row: dict, g: dict) -> list:
    """TVM's table cells at one checkpoint from its checkpoint ``row`` (tvm_reference.py) and the
    re-timed GFLOP/s ``g`` ({(who, threads): (min, median)}); dashes when TVM failed."""
    if not row or ("tvm", 2) not in g:
        return ["-"] * 5
    return [f"{row['tuner_gflops']:.1f}", f"{g['tvm', 2][0]:.1f} / {g['tvm', 2][1]:.1f}",
            f"{g['tvm', 1][0]:.1f} / {g['tvm', 1][1]:.1f}", f"{g['ingot', 2][0] / g['tvm', 2][0]:.2f}",
            f"{row['tuning_s']:.0f}"]


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
    p.add_argument("--mlc", action="store_true", help="also tune the MLC course's 128^3 matmul (TVM's 2nd reference)")
    p.add_argument("--tvm-python", default=None, metavar="PYTHON",
                   help="python of an Apache TVM venv (benchmarks/setup_tvm.sh): TVM tunes the same GEMMs after Ingot")
    p.add_argument("--tvm-mcpu", default=None, help="LLVM -mcpu for TVM (default: LLVM's host CPU)")
    args = p.parse_args()
    trials = sorted(set(args.trials))
    curves = {}
    if args.tvm_python and not os.path.exists(args.tvm_python):
        raise SystemExit(f"--tvm-python {args.tvm_python} does not exist: make the venv with "
                         "bash benchmarks/setup_tvm.sh <dir>, then pass <dir>/bin/python")
    sizes = ([] if args.no_gemm else [args.n]) + ([128] if args.mlc and args.n != 128 else [])
    for n in sizes:
        rng = np.random.default_rng(0)
        a, b = rng.random((n, n), dtype="float32"), rng.random((n, n), dtype="float32")
        curves[f"GEMM {n}^3"] = run_workload(f"gemm{n}", gemm_func(n), 2.0 * n ** 3, trials, args,
                                             lambda a=a, b=b: ("numpy", median_seconds(lambda: a @ b)), tvm_n=n)
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
