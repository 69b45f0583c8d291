"""In-model validation: keep a tuned schedule only if it makes its kernel faster *inside the model*.

It compiles and runs the model, so it belongs to the workflow layer (above ``ingot.tune``, whose
records it writes); `ingot.workflow.tune` runs it at the end of every tuning run.

Note: the tuner times each kernel alone, with its weights flushed (`MODEL_FLUSH_POLICY`). That
ranking is not the model's: on MobileNetV2, 14 kernels took schedules that won alone and lost in
the model, and 10 minutes of tuning made the model 9% slower than untuned (session 5).
`validate_in_model` checks the winners where they run:
Step 1. compile the model with the tuned records (apply-best ignoring earlier in-model verdicts:
   ``ApplyBest(in_model=False)``), note which kernels got a tuned schedule and which record;
Step 2. keep the tasks whose applied record has no in-model verdict yet (all with ``revalidate``);
   none left: nothing to do (a resumed run that found nothing new costs one compile);
Step 3. compile the model with default schedules, then time both packages in turn (default,
   tuned, tuned, default, ...) for ``rounds`` rounds, each kernel call timed around its step of the
   plan (`ingot.workflow.model.kernel_timed_main`: the executor's per-step hook), summed over the calls of one task (a kernel that
   appears at several places of the model is one task), the fastest round kept per kernel (other
   processes only ever add time);
Step 4. store the verdict durably: per task two records of policy ``"in-model"`` (the default's
   and the tuned candidate's in-model time, one validation id), which apply-best reads
   (`ingot.tune.apply.in_model_verdict`: tuned kept iff `IN_MODEL_MIN_GAIN` faster), so
   ``ingot.compile(..., tuning_records=work_dir)`` and ``ingot compile --tuning-records`` use them;
Step 5. the whole-model check: compile the validated package and time default, tuned (unvalidated)
   and validated end to end in turn; a warning says when the validated package is not faster
   than the default one. The summary goes to ``tasks.json`` under ``"in_model"``.

Example:
    >>> # report = validate_in_model(ingot.load("mobilenet_v2.onnx"), "tune_mnv2", "llvm -num-cores=2")
    >>> # print(report)
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import sys
import time
import uuid
from typing import Any, Mapping

from ingot.tune.tasks.records import IN_MODEL_MIN_GAIN, TuningRecords, read_tasks_file, write_tasks_file

logger = logging.getLogger("ingot.tune")

#: Rounds of the interleaved per-kernel timing: each round runs both packages once, step by step.
#: A round of MobileNetV2 costs ~10 ms, so many rounds are cheap next to the compiles; many are needed
#: because on a shared machine (load 5 on 2 cores) a whole run is often disturbed, and the fastest
#: undisturbed call of each kernel is what the verdict compares.
DEFAULT_ROUNDS = 100
#: The whole-model check (Step 5): rounds, and seconds of calls per package and round (the fastest
#: call kept: a 3-call window measured MobileNetV2 at 3.6 or 12 ms under load 5).
#: On this shared VM a 2-thread run is 3-4x slower while another process holds a core, for
#: seconds at a time: 10 rounds of 0.25 s once left a package at 12 ms vs 3.6 ms for the others.
WHOLE_ROUNDS, WHOLE_TURN_S = 12, 0.5


@dataclasses.dataclass
class TaskVerdict:
    """One validated task: its kernels, in-model µs (summed over calls) default vs tuned, kept or not."""

    name: str
    workload_hash: str
    kernels: list
    default_us: float
    tuned_us: float
    kept: bool


@dataclasses.dataclass
class InModelReport:
    """What `validate_in_model` did: the verdicts (new ones), tasks already validated, whole-model
    latencies (ms: ``default``, ``tuned`` unvalidated, ``validated``; empty when not measured), and
    ``kernel_sum_ms``: the in-model kernel times of every kernel summed per package (the fastest
    round per kernel: far less noisy than end-to-end latency on a shared machine; ``validated`` =
    default + the kept tasks' gains; only when something was timed).

    Example:
        >>> r = InModelReport([TaskVerdict("k", "ab", ["k"], 10.0, 12.0, False)], 0, {}, 20)
        >>> r.num_reverted, str(r).splitlines()[0]
        (1, 'in-model validation (20 rounds): 1 task(s) checked: 0 kept tuned, 1 reverted to default (slower in the model)')
    """

    verdicts: list
    already_validated: int
    latency_ms: dict
    rounds: int
    kernel_sum_ms: dict = dataclasses.field(default_factory=dict)

    @property
    def num_reverted(self) -> int:
        return sum(1 for v in self.verdicts if not v.kept)

    def as_json(self) -> dict:
        return {"rounds": self.rounds, "already_validated": self.already_validated, "latency_ms": self.latency_ms,
                "kernel_sum_ms": self.kernel_sum_ms, "tasks": [dataclasses.asdict(v) for v in self.verdicts], "time": time.time()}

    def __str__(self) -> str:
        lines = [f"in-model validation ({self.rounds} rounds): {len(self.verdicts)} task(s) checked: "
                 f"{len(self.verdicts) - self.num_reverted} kept tuned, {self.num_reverted} reverted to default "
                 f"(slower in the model)" + (f"; {self.already_validated} validated before" if self.already_validated
                                             else "")]
        for v in sorted(self.verdicts, key=lambda v: v.tuned_us - v.default_us):
            lines.append(f"  {v.name:<40} default {v.default_us:9.1f} us  tuned {v.tuned_us:9.1f} us  "
                         f"{v.default_us / v.tuned_us if v.tuned_us else math.inf:5.2f}x  "
                         f"{'tuned' if v.kept else 'default'}")
        if self.kernel_sum_ms:
            lines.append("kernels summed in the model (fastest round each): "
                         + ", ".join(f"{k} {v:.3f} ms" for k, v in self.kernel_sum_ms.items()))
        if self.latency_ms:
            lat = self.latency_ms
            lines.append("whole model (min of interleaved runs): " + ", ".join(f"{k} {v:.3f} ms" for k, v in lat.items()))
            if lat.get("validated", 0) >= lat.get("default", math.inf):
                lines.append("  the validated package is NOT faster than the default one: tuning did not pay off")
        return "\n".join(lines)


def validate_in_model(model: Any, work_dir: "str | os.PathLike | TuningRecords", target: Any = "llvm", *,
                      inputs: "Mapping[str, Any] | None" = None, rounds: int = DEFAULT_ROUNDS,
                      revalidate: bool = False, whole_model: bool = True, shape_dict: "dict | None" = None,
                      verbose: int = 1) -> InModelReport:
    """Validate a tuning work dir's tuned schedules inside ``model`` (see the module note); apply-best
    then keeps the default schedule of every kernel whose tuned schedule was not `IN_MODEL_MIN_GAIN`
    faster in the model. ``model``: an ``ingot.Model`` or a model file (``shape_dict`` fixes input
    shapes); ``inputs``: the model's inputs (default: random arrays of the declared shapes);
    ``revalidate``: re-time tasks validated before too (default: only the tasks whose best record
    changed since); ``whole_model``: Step 5. `ingot.workflow.tune` calls it at the end of every run.

    Example:
        >>> # report = ingot.workflow.validate_in_model("mnv2.onnx", "tune_mnv2", "llvm -num-cores=2")
        >>> # package = ingot.compile(model, "llvm -num-cores=2", tuning_records="tune_mnv2")  # uses it
    """
    from ingot.target import as_target
    from ingot.tune.apply import ApplyBest, in_model_verdict, preferred_flush
    from ingot.tune.database.record import IN_MODEL, TuningRecord

    from . import model as M

    target = as_target(target)
    if not isinstance(model, M.Model):
        model = M.load(model, shape_dict=shape_dict)
    records = work_dir if isinstance(work_dir, TuningRecords) else TuningRecords(work_dir)
    if int(rounds) < 1:
        raise ValueError(f"validate_in_model: rounds must be >= 1, got {rounds}")
    db = records.database
    # Step 1: the tuned package, as apply-best would build it without in-model verdicts.
    hook = ApplyBest(db, target, preferred_flush(records), in_model=False)
    tuned = M.compile(model, target, tuning_records=hook) if verbose else _quiet(M.compile, model, target, hook)
    # Step 2: tasks to validate (one per workload; its kernels are every call site).
    groups: dict = {}
    for kernel, (workload, record, default_hash) in hook.applied.items():
        if tuned.schedule_report.get(kernel) != "tuned":
            continue  # the build rejected it: both packages run the default
        g = groups.setdefault(record.workload_hash, {"record": record, "default_hash": default_hash,
                                                     "workload": workload, "kernels": []})
        g["kernels"].append(kernel)
    before = {h for h, g in groups.items() if in_model_verdict(db, g["record"], g["default_hash"], target) is not None}
    todo = groups if revalidate else {h: g for h, g in groups.items() if h not in before}
    names = {t["workload_hash"]: t["name"] for t in records.tasks}
    report = InModelReport([], len(before) if not revalidate else 0, {}, int(rounds))
    verdicts = {h: in_model_verdict(db, g["record"], g["default_hash"], target) for h, g in groups.items()}
    if not todo and not (whole_model and revalidate):
        _write_verdicts(records.work_dir, verdicts)
        logger.info("in-model validation: nothing new to validate in %s (%d task(s) validated before)",
                    records.work_dir, len(before))
        if verbose:
            print(f"in-model validation: nothing new to validate ({len(groups)} tuned task(s), {len(before)} "
                  f"validated before)", file=sys.stderr, flush=True)
        return report
    default = _quiet(M.compile, model, target, None)
    arrays = _inputs(tuned, inputs)
    # Step 3: per-kernel in-model times, the two packages in turn.
    t0 = time.perf_counter()
    best = _kernel_times({"default": default, "tuned": tuned}, arrays, int(rounds))
    logger.info("in-model validation: %d task(s) timed over %d rounds in %.1f s", len(todo), rounds,
                time.perf_counter() - t0)
    # Step 4: the verdicts, as records of the "in-model" policy (one validation id per run).
    run_id, stamp = uuid.uuid4().hex[:12], time.time()
    measure = {"cache_flush": IN_MODEL, "number": 1, "repeat": int(rounds), "min_repeat_ms": 0, "kept": "min",
               "validation": run_id}
    new = []
    for shash, g in todo.items():
        missing = [k for k in g["kernels"] if k not in best["default"] or k not in best["tuned"]]
        if missing:  # the two builds name kernels alike; if not, say so rather than guess
            logger.warning("in-model validation: kernel(s) %s not found in both packages; task %s not validated",
                           missing, names.get(shash, shash[:12]))
            continue
        d = sum(best["default"][k] for k in g["kernels"])
        t = sum(best["tuned"][k] for k in g["kernels"])
        rec = g["record"]
        default_trace = _default_trace(db, g["workload"], rec, g["default_hash"], target)
        new += [TuningRecord(default_trace, shash, [d], rec.target, args_info=rec.args_info, timestamp=stamp,
                             candidate_hash=g["default_hash"], measure=dict(measure)),
                TuningRecord(rec.trace_json, shash, [t], rec.target, args_info=rec.args_info, timestamp=stamp,
                             candidate_hash=rec.candidate_hash, measure=dict(measure))]
        report.verdicts.append(TaskVerdict(names.get(shash, g["kernels"][0]), shash, sorted(g["kernels"]), d * 1e6,
                                           t * 1e6, t < d * (1.0 - IN_MODEL_MIN_GAIN)))
    if new:
        db.commit_tuning_records(new)
    sums = {name: sum(times.values()) * 1e3 for name, times in best.items()}
    # The validated package runs the tuned kernel of every task apply-best keeps (verdicts of earlier runs too).
    verdicts = {h: in_model_verdict(db, g["record"], g["default_hash"], target) for h, g in groups.items()}
    kept = [k for h, g in groups.items() if verdicts[h]
            for k in g["kernels"] if k in best["default"] and k in best["tuned"]]
    sums["validated"] = sums["default"] + sum(best["tuned"][k] - best["default"][k] for k in kept) * 1e3
    report.kernel_sum_ms = sums
    # Step 5: the whole-model check.
    if whole_model:
        validated = _quiet(M.compile, model, target, records.work_dir)
        report.latency_ms = _whole_times({"default": default, "tuned": tuned, "validated": validated}, arrays)
        if report.latency_ms["validated"] >= report.latency_ms["default"]:
            logger.warning("in-model validation: the validated package (%.3f ms) is not faster than the default one "
                           "(%.3f ms): tuning did not pay off for this model", report.latency_ms["validated"],
                           report.latency_ms["default"])
    _write_verdicts(records.work_dir, verdicts, report.as_json())
    if verbose:
        print(report, file=sys.stderr, flush=True)
    return report


def _write_verdicts(work_dir: str, verdicts: Mapping[str, "bool | None"], summary: "dict | None" = None) -> None:
    """Mark each task row of ``tasks.json`` with its best record's verdict (``"in_model_kept"``),
    so the end-to-end estimate (`applied_us`) counts a reverted task at its default's time; and
    store this validation's ``summary`` under ``"in_model"``."""
    info = read_tasks_file(work_dir)
    if not info.get("tasks"):
        return
    for row in info["tasks"]:
        verdict = verdicts.get(row.get("workload_hash"))
        if verdict is None:
            row.pop("in_model_kept", None)
        else:
            row["in_model_kept"] = bool(verdict)
    if summary is not None:
        info["in_model"] = summary
    write_tasks_file(work_dir, info)


def _quiet(compile_fn: Any, model: Any, target: Any, records: Any) -> Any:
    # ingot.compile prints its schedule report; the validation prints its own summary.
    import contextlib
    import io

    with contextlib.redirect_stderr(io.StringIO()):
        return compile_fn(model, target, tuning_records=records)


def _default_trace(db: Any, workload: Any, record: Any, default_hash: str, target: Any) -> dict:
    """The default schedule's trace: from its tuning record when there is one, else replayed anew."""
    for r in db.get_records(record.workload_hash, target):
        if r.candidate_hash == default_hash:
            return r.trace_json
    from ingot.ops.schedule import schedule_blocks
    from ingot.tir.schedule import Schedule

    return schedule_blocks(Schedule(workload), target).trace.as_json()


def _inputs(package: Any, inputs: "Mapping[str, Any] | None") -> list:
    import numpy as np

    from .model import check_inputs

    if inputs is None:
        rng, inputs = np.random.default_rng(0), {}
        for i in package.inputs:
            if not all(isinstance(d, int) for d in i.shape):
                raise ValueError(f"validate_in_model: input {i.name!r} has a symbolic shape {list(i.shape)}; pass "
                                 f"inputs={{{i.name!r}: array}} or load the model with shape_dict")
            inputs[i.name] = i.example(rng)
    return check_inputs(inputs, package.inputs)


def _kernel_times(packages: dict, arrays: list, rounds: int) -> dict:
    """{package: {kernel: fastest seconds per run, summed over the kernel's calls in one run}}."""
    from .model import kernel_timed_main

    samples: dict = {}

    def add(kernel: str, sec: float) -> None:
        samples[kernel] = samples.get(kernel, 0.0) + sec

    fns = {name: kernel_timed_main(p, add) for name, p in packages.items()}
    best: dict = {name: {} for name in packages}
    for fn in fns.values():
        fn(*arrays)  # warm-up: first touch of the workspace, kernel libraries loaded
    order = list(fns)
    for r in range(rounds):
        for name in (order if r % 2 == 0 else order[::-1]):  # A B B A: neither always runs first
            samples.clear()
            fns[name](*arrays)
            for k, s in samples.items():
                best[name][k] = min(best[name].get(k, math.inf), s)
    return best


def _whole_times(packages: dict, arrays: list) -> dict:
    """{package: fastest end-to-end ms (AOT path)} over `WHOLE_ROUNDS` interleaved rounds."""
    fns = {name: p.executor()["main"] for name, p in packages.items()}
    best = {name: math.inf for name in packages}
    for fn in fns.values():
        fn(*arrays)
    order = list(fns)
    for r in range(WHOLE_ROUNDS):
        for name in (order if r % 2 == 0 else order[::-1]):
            start, calls = time.perf_counter(), 0
            while calls < 3 or time.perf_counter() - start < WHOLE_TURN_S:
                t0 = time.perf_counter()
                fns[name](*arrays)
                best[name] = min(best[name], time.perf_counter() - t0)
                calls += 1
    return {name: s * 1e3 for name, s in best.items()}


__all__ = ["validate_in_model", "InModelReport", "TaskVerdict", "DEFAULT_ROUNDS"]
