"""Apache TVM 0.27 MetaSchedule as a contestant: tune fp32 GEMMs with ``ms.tune_tir`` and report JSON.

Runs under the *TVM* virtualenv's python (``benchmarks/setup_tvm.sh`` makes one), never Ingot's:
it imports only tvm, numpy and the standard library. ``benchmarks/tune_gemm.py --tvm-python``
runs it as a subprocess after Ingot's own tuning, so that the two are never timed at once.

For each workload one evolutionary MetaSchedule run of ``max(--trials)`` trials is made (default
space, xgb cost model, local builder/runner, 64 trials per round: TVM's defaults); the figures at
every checkpoint are read off that run, as tune_gemm.py does for Ingot: a measure callback records,
after each measured batch, the wall time and the best schedule so far, trial by trial. After tuning
each checkpoint's best schedule is compiled again and re-timed here with ``time_evaluator`` (the
MIN over many repeats as ``gflops``, the median as ``gflops_median``). One JSON object per line on stdout::

    {"kind": "checkpoint", "workload": "gemm1024", "trials": 64, "measured": 64, "valid": 61,
     "tuner_gflops": 290.1, "gflops": 301.5, "gflops_median": 297.0, "tuning_s": 142.3, ...}
    {"kind": "curve", "workload": "gemm1024", "gflops": [12.0, 80.3, ...]}   # best-so-far per trial
    {"kind": "info", ...}                                                      # target, start-up

Workloads: ``gemm<N>`` (C = A @ B, N³, default 1024) and ``mlc128`` (the 128³ matmul of the MLC
course's MetaSchedule chapter). Human-readable progress goes to stderr; TVM's own logs go to
``<work-dir>/<workload>/logs``.

TVM's per-process start-up: each ``LocalBuilder.build`` call starts a fresh pool of worker
processes and the first build in each imports ``tvm.s_tir.tensor_intrin`` (tens of seconds: its
CUDA intrinsics dominate). That is inside TVM's 30 s default build timeout, so on a loaded
machine *every* build of the first batch times out; ``--builder-timeout`` (default 120 s) gives
room. The script reports the import time measured in its own process as ``startup_s``.

Usage (TVM venv):
    /work/tvm-venv/bin/python benchmarks/tvm_reference.py --workloads gemm1024 --trials 64 256
    /work/tvm-venv/bin/python benchmarks/tvm_reference.py --workloads mlc128 --trials 64
    /work/tvm-venv/bin/python benchmarks/tvm_reference.py --workloads gemm256 --trials 8   # smoke test
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


def log(msg: str) -> None:
    """Progress to stderr (stdout carries only the JSON lines)."""
    print(msg, file=sys.stderr, flush=True)


_JSON_OUT = None  # set by keep_stdout_for_json; None: sys.stdout


def emit(obj: dict) -> None:
    """One JSON line on the real stdout (``main`` sends everything else printed there to stderr).

    Example:
        >>> emit({"kind": "info", "x": 1})
        {"kind": "info", "x": 1}
    """
    print(json.dumps(obj), file=_JSON_OUT or sys.stdout, flush=True)


def keep_stdout_for_json() -> None:
    """Point fd 1 at stderr and keep a private copy of the original stdout for ``emit``: TVM's C++
    logging and its workers print to fd 1, and the caller parses stdout line by line as JSON."""
    global _JSON_OUT
    sys.stdout.flush()
    _JSON_OUT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)


def host_mcpu() -> str:
    """LLVM's name for the host CPU (what ``-march=native`` is to gcc; Ingot compiles with that).

    Example:
        >>> host_mcpu()  # doctest: +SKIP
        'rocketlake'
    """
    from tvm.target import codegen

    return str(codegen.llvm_get_system_cpu())


def make_target(mcpu: str, num_cores: int):
    """TVM 0.27's target for the host: the JSON-dict form (0.27 rejects "llvm -mcpu=..." strings).

    Example:
        >>> str(make_target("rocketlake", 2))  # doctest: +SKIP
        '{"kind":"llvm","tag":"","keys":["cpu"],"num-cores":2,"mcpu":"rocketlake"}'
    """
    import tvm

    return tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": num_cores})


def matmul_func(n: int):
    """C[i, j] = sum_k A[i, k] * B[k, j], all (n, n) float32, as a TE-made PrimFunc named main.

    Example:
        >>> f = matmul_func(128)  # doctest: +SKIP
    """
    from tvm import te

    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c]).with_attr("global_symbol", "main")


def parse_workload(name: str) -> int:
    """The matmul size of a workload name: ``gemm<N>`` or ``mlc128``.

    Example:
        >>> parse_workload("gemm1024"), parse_workload("mlc128")
        (1024, 128)
    """
    if name == "mlc128":
        return 128
    if name.startswith("gemm") and name[4:].isdigit():
        return int(name[4:])
    raise SystemExit(f"unknown workload {name!r}: use gemm<N> (e.g. gemm1024) or mlc128")


class Progress:
    """Per-trial log of one tuning run, filled by a MeasureCallback after each measured batch:
    seconds of each trial (inf when it failed), the wall time at the end of its batch, and the
    best module so far at each requested checkpoint."""

    def __init__(self, checkpoints, t0: float):
        self.checkpoints = sorted(checkpoints)
        self.t0 = t0
        self.secs: list[float] = []
        self.batch_end: list[float] = []
        self.best_sec = math.inf
        self.best_mod = None
        self.at_checkpoint: dict[int, tuple] = {}  # k -> (best seconds, best module, wall s)
        self.errors: list[str] = []

    def add_batch(self, candidates, builder_results, runner_results) -> None:
        now = time.time() - self.t0
        for cand, built, ran in zip(candidates, builder_results, runner_results):
            sec = math.inf
            if built.error_msg is None and ran.error_msg is None and ran.run_secs:
                sec = float(np.mean([float(s) for s in ran.run_secs]))
            elif len(self.errors) < 3:  # the first few reasons, for the report
                msg = (built.error_msg or ran.error_msg or "no run_secs").strip()
                self.errors.append(msg.splitlines()[0][:200])
            if sec < self.best_sec:
                self.best_sec, self.best_mod = sec, cand.sch.mod
            self.secs.append(sec)
            self.batch_end.append(now)
            k = len(self.secs)
            if k in self.checkpoints:
                self.at_checkpoint[k] = (self.best_sec, self.best_mod, now)
        log(f"  batch of {len(candidates)} done at {now:.0f} s: {len(self.secs)} trials, best "
            f"{self.best_sec * 1e3:.3f} ms")


def progress_callback(progress: Progress):
    """A TVM ``PyMeasureCallback`` feeding ``progress`` (run after TVM's default callbacks)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class _Record(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            progress.add_batch(measure_candidates, builder_results, runner_results)

    return _Record()


def _checked_operands(lib, n: int, dev) -> tuple:
    """Random (a, b, c) TVM tensors for an n x n matmul ``lib["main"]``, after checking one call
    against numpy (a wrong kernel must not win)."""
    import tvm

    rng = np.random.default_rng(0)
    a_np, b_np = rng.random((n, n), dtype="float32"), rng.random((n, n), dtype="float32")
    a, b = tvm.runtime.tensor(a_np, dev), tvm.runtime.tensor(b_np, dev)
    c = tvm.runtime.empty((n, n), "float32", dev)
    lib["main"](a, b, c)
    np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-3, atol=1e-3 * n)
    return a, b, c


def retime(mod, target, n: int, repeat: int, min_repeat_ms: int) -> "tuple[float, float]":
    """Compile ``mod`` and time its main: (MIN, median) over ``repeat`` time_evaluator samples, in
    seconds. Checks the result against numpy first (a wrong kernel must not win)."""
    import tvm

    lib = tvm.compile(mod, target).jit()  # a runtime Module (has time_evaluator)
    dev = tvm.cpu()
    a, b, c = _checked_operands(lib, n, dev)
    evaluator = lib.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    samples = sorted(float(x) for x in evaluator(a, b, c).results)
    return samples[0], samples[len(samples) // 2]


def save_best(mod, target, stem: str) -> "tuple[str, str]":
    """Compile ``mod`` and write ``<stem>.so`` (``tvm.runtime.load_module`` reads it back; `serve_timer`
    times it) and ``<stem>.py`` (its TIR as TVMScript); returns the two paths.

    Example:
        >>> save_best(best_mod, target, "/tmp/tg/tvm/mlc128/best_64")  # doctest: +SKIP
        ('/tmp/tg/tvm/mlc128/best_64.so', '/tmp/tg/tvm/mlc128/best_64.py')
    """
    import tvm

    tvm.compile(mod, target).export_library(stem + ".so")
    with open(stem + ".py", "w") as f:
        f.write(mod.script())
    return stem + ".so", stem + ".py"


def serve_timer(lib_path: str, n: int) -> None:
    """Time the n³ matmul kernel in ``lib_path`` (written by `save_best`) on request: one JSON
    line on stdin per request, ``{"number": 1, "repeat": 50, "min_repeat_ms": 2}``, answered by
    ``{"kind": "times", "results": [seconds per call of each repeat]}`` on stdout; EOF ends it.
    The thread count is ``TVM_NUM_THREADS`` (read once by TVM's thread pool: the caller starts
    one server per count). `time_evaluator` has the semantics of Ingot's, so a caller that
    alternates requests here with its own timings compares both kernels under one methodology.

    Example:
        >>> # TVM_NUM_THREADS=1 python tvm_reference.py --timer best_64.so --n 128 <<< '{"repeat": 5}'
    """
    import tvm

    lib = tvm.runtime.load_module(lib_path)
    dev = tvm.cpu()
    a, b, c = _checked_operands(lib, n, dev)
    threads = tvm.get_global_func("runtime.NumThreads")()
    emit({"kind": "ready", "threads": threads, "lib": lib_path})
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        evaluator = lib.time_evaluator("main", dev, number=int(req.get("number", 1)),
                                       repeat=int(req.get("repeat", 50)),
                                       min_repeat_ms=int(req.get("min_repeat_ms", 2)))
        emit({"kind": "times", "results": [float(x) for x in evaluator(a, b, c).results]})


def tune_workload(name: str, target, args) -> None:
    """Step 1: tune ``max(trials)``; Step 2: re-time each checkpoint's best; emit JSON lines."""
    from tvm.s_tir import meta_schedule as ms

    n = parse_workload(name)
    flop = 2.0 * n ** 3
    func = matmul_func(n)
    work_dir = os.path.join(args.work_dir, name)
    shutil.rmtree(work_dir, ignore_errors=True)
    top = max(args.trials)
    # Step 1: one tuning run; checkpoints read off it trial by trial.
    t0 = time.time()
    progress = Progress(args.trials, t0)
    callbacks = list(ms.MeasureCallback.create("default")) + [progress_callback(progress)]
    log(f"{name}: tuning {top} trials with TVM MetaSchedule (target {target})")
    ms.tune_tir(
        func, target, work_dir, max_trials_global=top, num_trials_per_iter=min(64, top),
        builder=ms.builder.LocalBuilder(timeout_sec=args.builder_timeout),
        runner=ms.runner.LocalRunner(timeout_sec=args.runner_timeout),
        measure_callbacks=callbacks, seed=args.seed,
    )
    wall = time.time() - t0
    log(f"{name}: {len(progress.secs)} trials in {wall:.0f} s")
    valid = [s for s in progress.secs if math.isfinite(s)]
    if progress.errors:
        log(f"  first errors: {progress.errors}")
    # Step 2: re-time the best of each checkpoint (a run that stopped early counts what it did).
    for k in sorted(args.trials):
        done = min(k, len(progress.secs))
        best_sec, best_mod, at = progress.at_checkpoint.get(
            k, (progress.best_sec, progress.best_mod, progress.batch_end[-1] if progress.batch_end else wall))
        row = {"kind": "checkpoint", "workload": name, "n": n, "trials": k, "measured": done,
               "valid": sum(1 for s in progress.secs[:done] if math.isfinite(s)), "tuning_s": round(at, 1),
               "tuner_gflops": None, "gflops": None}
        if best_mod is not None:
            row["tuner_gflops"] = round(flop / best_sec / 1e9, 1)
            secs, median = retime(best_mod, target, n, args.repeat, args.min_repeat_ms)
            row["gflops"] = round(flop / secs / 1e9, 1)
            row["gflops_median"] = round(flop / median / 1e9, 1)
            row["ms"] = round(secs * 1e3, 4)
            # the kernel itself, for timing beside Ingot's in one methodology (--timer) and reading
            row["lib"], row["tir"] = save_best(best_mod, target, os.path.join(work_dir, f"best_{k}"))
        emit(row)
    best, curve = math.inf, []
    for s in progress.secs:
        best = min(best, s)
        curve.append(round(flop / best / 1e9, 2) if math.isfinite(best) else 0.0)
    emit({"kind": "curve", "workload": name, "gflops": curve, "wall_s": round(wall, 1),
          "valid": len(valid), "errors": progress.errors})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", nargs="+", default=["gemm1024"], help="gemm<N> and/or mlc128")
    p.add_argument("--trials", type=int, nargs="+", default=[64], help="checkpoints; the run has max(trials)")
    p.add_argument("--mcpu", default=None, help="LLVM CPU name (default: LLVM's host CPU, like -march=native)")
    p.add_argument("--num-cores", type=int, default=2)
    p.add_argument("--work-dir", default="./tvm_reference_tmp")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--builder-timeout", type=float, default=120.0,
                   help="seconds per build, worker start-up included (TVM's default 30 s fails under load)")
    p.add_argument("--runner-timeout", type=float, default=60.0)
    p.add_argument("--repeat", type=int, default=50, help="time_evaluator samples when re-timing (MIN taken)")
    p.add_argument("--min-repeat-ms", type=int, default=50)
    p.add_argument("--timer", default=None, metavar="LIB",
                   help="serve timing requests for a saved kernel (see serve_timer) instead of tuning")
    p.add_argument("--n", type=int, default=128, help="matmul size of the --timer kernel")
    args = p.parse_args()
    args.trials = sorted(set(args.trials))
    keep_stdout_for_json()
    if args.timer:
        serve_timer(args.timer, args.n)
        return
    for name in args.workloads:
        parse_workload(name)  # fail before the slow imports

    import tvm

    os.environ.setdefault("TVM_NUM_THREADS", str(args.num_cores))
    # The import every builder worker pays again (TuneContext does it too): time it once here.
    t0 = time.time()
    import tvm.s_tir.tensor_intrin  # noqa: F401

    startup = time.time() - t0
    mcpu = args.mcpu or host_mcpu()
    target = make_target(mcpu, args.num_cores)
    emit({"kind": "info", "tvm": tvm.__version__, "target": str(target), "mcpu": mcpu,
          "startup_s": round(startup, 1), "load": os.getloadavg()[0]})
    for name in args.workloads:
        tune_workload(name, target, args)
    emit({"kind": "info", "load_end": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
