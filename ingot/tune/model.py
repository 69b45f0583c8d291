"""Tuning a whole model: extract tasks, share a trial or time budget among them, save records.

Note, `tune_model` in steps:
Step 1. extract the tasks (`ingot.tune.tasks.extract_tasks`: one per distinct fused kernel,
   weight = calls per run, FLOPs per call);
Step 2. one `TuneContext` per task (default design space, evolutionary search, XGBoost model),
   one builder pool and one runner child shared by all tasks;
Step 3. `ModelTaskScheduler` runs rounds: gradient-based task choice, the default schedule
   measured as each task's baseline, early stop of tasks that stopped improving, the time budget
   checked between rounds and between measurements, every measurement committed at once;
Step 4. after every round ``work_dir/tasks.json`` (the per-task summary) is rewritten and the
   progress display (a live bar, the per-task table, the end-to-end estimate = sum of
   weight x best latency) is updated.
Step 5. in-model validation is the workflow's (`ingot.workflow.tune` runs
   `ingot.workflow.validate_in_model` after `tune_model`): the default and the tuned package are
   compiled and timed in turn, kernel by kernel inside the model; a tuned schedule that is not
   faster there is reverted (records of policy ``"in-model"``, read by apply-best). Compiling and
   running a model is above the tuner in the layer list, so `tune_model` stops after Step 4.
Running again with the same ``work_dir`` resumes (records already measured count, are never
measured again, train the cost model and seed the search). Ctrl-C or SIGTERM stop cleanly
after saving; a SIGKILL loses at most the candidate being measured.

Example:
    >>> # records = tune_model(model, "llvm -num-cores=2", time_budget="10m", work_dir="tune_mlp")
    >>> # package = ingot.compile(model, "llvm -num-cores=2", tuning_records=records)
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import signal
import sys
import threading
import time
from typing import Any, Iterator

from .tasks.records import (TuningRecords, applied_us, format_summary, measured_cold, measured_flush, parse_duration,
                            read_tasks_file, write_tasks_file)

logger = logging.getLogger("ingot.tune")

#: Used when neither ``trials`` nor ``time_budget`` is given: a few minutes buys most of the
#: gain on small models (the largest kernels are tuned first), and never hours.
DEFAULT_TIME_BUDGET = "10m"
#: How model tasks are measured: with cold caches (``cache_flush``), 20 repeats of one call each, the
#: fastest recorded. Before every timed call the kernel's *weights* (its parameters bound to model
#: constants, `ExtractedTask.weight_params`) are flushed: inside the model they come from L3/DRAM,
#: while its activations were just written by the previous kernel (hot). TVM's
#: ``enable_cpu_cache_flush`` flushes every argument but the first instead, which over-flushes a
#: residual add's second input (ResNet-50: in-model / flushed 0.70 there) and the output. Per
#: kernel (benchmarks/experiments/in_model_kernels.py, docs/tuning.md), weights-only matched the in-model times
#: most uniformly (ResNet-50 convs: std of ln(in/flushed) 0.110, vs 0.144 TVM's, 0.133 weights +
#: outputs; no conv measured slower than in the model). Warm
#: repeated calls ran ResNet-50's kernels 1.1-1.7x faster than the model does (the fc layer 3.9x),
#: so the tuner optimized a case the model never sees. Short windows, the fastest kept: other
#: processes only ever add time, and a 2-thread kernel loses a time slice whenever its second
#: thread is descheduled. ``number``/``min_repeat_ms`` apply to warm timing
#: (``enable_cpu_cache_flush=False``): 20 repeats of at least 3 calls and 1 ms.
MODEL_FLUSH_POLICY = "weights"
MODEL_RUNNER_CONFIG = dict(number=3, repeat=20, min_repeat_ms=1, cache_flush=MODEL_FLUSH_POLICY)
#: Seconds between two prints of the per-task table on the console (the log gets every round).
TABLE_EVERY_S = 30.0


def _task_rows(sched: Any, extracted: list, previous: "list | None" = None) -> list:
    # A resumed run keeps the in-model verdict of a task whose best record has not changed (it is
    # that record's verdict); a new best is unvalidated until the validation at the end of the run.
    verdicts = {(r.get("workload_hash"), r.get("best_us")): r["in_model_kept"]
                for r in previous or () if "in_model_kept" in r}
    rows = []
    for i, t in enumerate(extracted):
        best, default = sched.best_secs[i], sched.default_secs[i]
        rows.append({"name": t.name, "workload_hash": t.workload_hash, "weight": t.weight,
                     "flop_count": t.flop_count, "kernels": list(t.kernels),
                     # what the "weights" flush policies flush (runner_config.cache_flush)
                     "weight_params": list(t.weight_params), "output_params": list(t.output_params),
                     "default_us": default * 1e6 if math.isfinite(default) else None,
                     "best_us": best * 1e6 if math.isfinite(best) else None,
                     "default_hash": sched.default_hash[i], "skipped": bool(sched.skipped[i]),
                     "trials": sched.trials[i], "done": bool(sched.done[i])})
        verdict = verdicts.get((t.workload_hash, rows[-1]["best_us"]))
        if verdict is not None:
            rows[-1]["in_model_kept"] = verdict
    return rows


class _Display:
    """The live progress bar (rich on a terminal, one line per round otherwise) and the table."""

    def __init__(self, verbose: int, budget_s: "float | None", max_trials: "int | None"):
        self.verbose = verbose
        self.budget_s, self.max_trials = budget_s, max_trials
        self.t0 = time.perf_counter()
        self._last_table = -math.inf
        self._bar = None
        if verbose and sys.stderr.isatty():
            try:
                from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

                self._bar = Progress(TextColumn("[bold]tuning"), BarColumn(), TextColumn("{task.description}"),
                                     TimeElapsedColumn(), transient=False)
                self._task = self._bar.add_task("", total=budget_s or max_trials or 1)
                self._bar.start()
            except ImportError:
                self._bar = None

    def update(self, rows: list, trials: int, final: bool = False) -> None:
        elapsed = time.perf_counter() - self.t0
        est = sum(r["weight"] * applied_us(r) for r in rows if applied_us(r) is not None)
        base = sum(r["weight"] * r["default_us"] for r in rows if r["default_us"] is not None)
        tuned = sum(1 for r in rows if r["best_us"] is not None)
        text = (f"{trials} trials, {tuned}/{len(rows)} tasks measured, estimate {est / 1e3:.3f} ms"
                + (f" (default {base / 1e3:.3f} ms)" if base else ""))
        limit = f" / {self.budget_s:.0f} s" if self.budget_s else ""
        logger.info("%s, %.1f s%s", text, elapsed, limit)
        if self.verbose and (final or time.perf_counter() - self._last_table >= TABLE_EVERY_S):
            self._last_table = time.perf_counter()
            self._print(format_summary(rows, elapsed))
        if self._bar is not None:
            done = elapsed if self.budget_s else trials
            self._bar.update(self._task, completed=min(done, self._bar.tasks[0].total), description=text)
        elif self.verbose:
            print(f"[ingot.tune] {elapsed:.0f} s{limit}: {text}", file=sys.stderr, flush=True)

    def _print(self, text: str) -> None:
        logger.info("\n%s", text)
        if self._bar is not None:
            self._bar.console.print(text, highlight=False)
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    # `kill PID` should stop as cleanly as Ctrl-C: shut the worker processes down, save the
    # summary. Signal handlers can only be installed from the main thread.
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _warn_if_loaded(target: Any, verbose: int) -> None:
    """Warn when other processes keep the cores busy: every measurement would be disturbed (a
    2-thread kernel loses a time slice whenever its second thread is descheduled)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - not on Linux/macOS
        return
    cores = os.cpu_count() or 1
    if load > 0.75 * cores:
        text = (f"load average {load:.1f} on {cores} cores: other processes will disturb the measurements (kernels "
                f"measured 10-100x too slow); tune on a quiet machine for records worth keeping (target {target})")
        logger.warning("%s", text)
        if verbose:
            print(f"[ingot.tune] warning: {text}", file=sys.stderr, flush=True)


def _describe_flush(policy: "bool | str") -> str:
    return {False: "warm caches (enable_cpu_cache_flush=False)",
            True: "cold caches, every argument but the first flushed (cache_flush=True, TVM's policy)"}.get(
        policy, f"cold caches, cache_flush={policy!r}")


def _runner_config(config: Any, flush: "bool | str | None", previous: dict, work_dir: str) -> Any:
    """The `RunnerConfig` of this run: ``config`` (default `MODEL_RUNNER_CONFIG`) with ``cache_flush``
    set by ``flush`` (True: `MODEL_FLUSH_POLICY`; or a policy of `FLUSH_POLICIES`), or, when
    neither says, by how the resumed work dir was measured. Refuses to add times of one flush
    policy to a work dir measured with another: the fastest record would win by the way it was
    measured, not by its schedule."""
    from .runner import FLUSH_POLICIES, RunnerConfig

    before = measured_flush(previous)
    if flush is True:
        flush = MODEL_FLUSH_POLICY
    if flush is not None and flush not in FLUSH_POLICIES:
        raise ValueError(f"tune: enable_cpu_cache_flush must be True, False or one of {list(FLUSH_POLICIES)}, "
                         f"got {flush!r}")
    if config is None:
        config = RunnerConfig(**MODEL_RUNNER_CONFIG)
        if flush is None and before is not None and before != config.cache_flush:
            logger.warning("work dir %s was measured with %s; continuing so (this Ingot's default is %s: "
                           "use a new work_dir to change)", work_dir, _describe_flush(before),
                           _describe_flush(config.cache_flush))
            flush = before
    elif not isinstance(config, RunnerConfig):
        raise TypeError(f"tune: runner_config must be an ingot.tune.runner.RunnerConfig, got {config!r}")
    if flush is not None:
        config = dataclasses.replace(config, cache_flush=flush)
    if before is not None and before != config.cache_flush:
        hint = ("--disable-cpu-cache-flush" if before is False else
                "--enable-cpu-cache-flush" if before == MODEL_FLUSH_POLICY else
                "runner_config=RunnerConfig(..., cache_flush=" + repr(before) + ")")
        raise ValueError(f"tune: work dir {work_dir} holds records timed with {_describe_flush(before)}; this run "
                         f"would time with {_describe_flush(config.cache_flush)}, and the two are not comparable. "
                         f"Pass enable_cpu_cache_flush={before!r} (CLI: {hint}) to continue it, or use a new work_dir")
    return config


def tune_model(model: Any, target: Any = "llvm", *, trials: "int | None" = None, time_budget: Any = None,
               work_dir: "str | os.PathLike | None" = None, params: "dict | None" = None,
               num_trials_per_iter: int = 16, strategy: str = "evolutionary", cost_model: Any = "xgb",
               seed: "int | None" = None, num_workers: "int | None" = None, runner_config: Any = None,
               patience: int = 3, min_improvement: float = 0.01, measure_default: bool = True,
               skip_share: float = 0.05, max_tasks: "int | None" = None,
               enable_cpu_cache_flush: "bool | str | None" = None, verbose: int = 1) -> TuningRecords:
    """Tune every distinct kernel of ``model`` for ``target``; returns the `TuningRecords`.

    ``model``: an ``ingot.Model`` (``ingot.load``) or a graph IRModule (``params`` bound into it).
    Budget: ``trials`` (total measured candidates) and/or ``time_budget`` (seconds or ``"30m"``,
    ``"1h30m"``; the whole call, extraction included, ends within a few percent of it); neither:
    `DEFAULT_TIME_BUDGET`. ``work_dir``: where records live (default ``./ingot_tune``); an
    existing one is resumed. ``max_tasks``: tune only the N heaviest tasks (weight x FLOPs).
    ``patience``/``min_improvement``: a task stops after ``patience`` rounds that improved its best
    latency by less than ``min_improvement`` (relative). ``measure_default``: measure each task's
    default schedule first, as a baseline record (apply-best then never picks a slower schedule).
    ``skip_share``: the smallest tasks that together make at most this share of the default
    latency are not searched (0: search every task). ``runner_config``: default
    `MODEL_RUNNER_CONFIG` (20 cold-cache calls; the fastest is recorded).
    ``enable_cpu_cache_flush`` (TVM's name; `RunnerConfig.cache_flush`): time each kernel with cold
    caches, as inside the model: True flushes each kernel's weights (`MODEL_FLUSH_POLICY`: the
    parameters bound to model constants; activations stay hot as in the model); a policy name of
    `FLUSH_POLICIES` picks another (True in a `RunnerConfig` is TVM's "all but the first"). Default:
    on for a new work dir; a resumed work dir keeps the policy its records were measured with
    (``tasks.json``'s ``runner_config``), since times of two policies must never be compared.
    False: warm repeated calls (the single-operator benchmark convention).
    In-model validation (Step 5) is `ingot.workflow.tune`'s last step, or run it on a work dir with
    `ingot.workflow.validate_in_model`.

    Example:
        >>> # records = tune_model(ingot.load("mlp.onnx"), "llvm -num-cores=2", trials=64, work_dir="w")
        >>> # print(records.summary())
    """
    from ingot.target import as_target

    from .builder import LocalBuilder
    from .database import SQLiteDatabase
    from .runner import LocalRunner
    from .tasks.extract import extract_tasks
    from .tasks.scheduler import ModelTaskScheduler
    from .tune import _cost_model_factory, _setup_logging
    from .tune_context import TuneContext

    # Step 0: budget.
    t0 = time.perf_counter()
    if trials is None and time_budget is None:
        time_budget = DEFAULT_TIME_BUDGET
    budget_s = parse_duration(time_budget) if time_budget is not None else None
    if trials is not None and int(trials) < 1:
        raise ValueError(f"tune: trials must be >= 1, got {trials}")
    deadline = t0 + budget_s if budget_s is not None else None
    target = as_target(target)
    work_dir = os.path.abspath(os.fspath(work_dir if work_dir is not None else "ingot_tune"))
    os.makedirs(work_dir, exist_ok=True)
    handler = _setup_logging(work_dir)
    source = getattr(model, "source", type(model).__name__)
    info = {"target": str(target), "source": source, "tasks": [], "elapsed_s": 0.0}
    previous = read_tasks_file(work_dir)  # refuses a newer format before anything is written
    if previous.get("in_model"):  # the last validation's summary stays until Step 5 redoes it
        info["in_model"] = previous["in_model"]
    # Tuning time over every run in this work dir (a resumed run adds to it).
    spent_before = float(previous.get("total_elapsed_s", previous.get("elapsed_s", 0.0)) or 0.0)
    if previous.get("target") not in (None, str(target)):
        logger.warning("work dir %s holds records for target %r; adding records for %r", work_dir,
                       previous.get("target"), str(target))
    runner_config = _runner_config(runner_config, enable_cpu_cache_flush, previous, work_dir)
    info["runner_config"] = dataclasses.asdict(runner_config)
    _warn_if_loaded(target, verbose)
    builder = runner = display = None
    sched = None
    try:
        with _sigterm_as_interrupt():
            # Step 1: tasks.
            extracted = extract_tasks(model, target, params)
            if max_tasks is not None:
                extracted = extracted[:max(int(max_tasks), 0)]
            if not extracted:
                raise ValueError(f"tune: {source} has no kernels to tune (every kernel is lowered or hand-scheduled)")
            logger.info("tuning %d task(s) of %s for %s in %s (%s)", len(extracted), source, target, work_dir,
                        f"{budget_s:.0f} s" if budget_s else f"{trials} trials")
            # Step 2: contexts, builder, runner.
            ctxs = [TuneContext(t.mod, target, search_strategy=strategy, task_name=t.name, weight=t.weight,
                                seed=seed, flop_count=t.flop_count) for t in extracted]
            database = SQLiteDatabase(os.path.join(work_dir, "database.db"))
            if measured_flush(previous) is not None:  # schema-1 records of this work dir: its tasks.json's policy
                adopted = database.assume_flush_policy(runner_config.cache_flush)
                if adopted:
                    logger.info("work dir %s: %d record(s) from before record schema 2 marked as timed with "
                                "cache_flush=%r (tasks.json)", work_dir, adopted, runner_config.cache_flush)
            builder = LocalBuilder(max_workers=num_workers)
            runner = LocalRunner(runner_config)
            display = _Display(verbose, budget_s, trials)

            def on_round(s: Any) -> None:
                # Step 4: summary file + display after every round.
                info["tasks"] = _task_rows(s, extracted, info["tasks"] or previous.get("tasks"))
                info["elapsed_s"] = time.perf_counter() - t0
                info["total_elapsed_s"] = spent_before + info["elapsed_s"]
                info["time_estimates"] = s.time_estimates()
                write_tasks_file(work_dir, info)
                display.update(info["tasks"], sum(s.trials))

            sched = ModelTaskScheduler(ctxs, builder, runner, database, trials if trials is not None else 1 << 62,
                                       num_trials_per_iter, cost_model_factory=_cost_model_factory(cost_model, seed),
                                       verbose=0, deadline=deadline, patience=patience,
                                       min_improvement=min_improvement, measure_default=measure_default,
                                       skip_share=skip_share, on_round=on_round,
                                       time_estimates=previous.get("time_estimates"),
                                       task_args=[(t.weight_params, t.output_params) for t in extracted])
            # Step 3: the rounds.
            try:
                sched.tune()
            except KeyboardInterrupt:
                sched.stop_reason = "interrupted"
                logger.warning("tuning interrupted; every measured candidate is in %s; run again with the same "
                               "work_dir to continue", work_dir)
                raise
            finally:
                on_round(sched)
    finally:
        if display is not None:
            display.close()
        for worker in (builder, runner):
            if worker is not None:
                with contextlib.suppress(Exception):
                    worker.shutdown()
        if sched is not None:
            info["elapsed_s"] = time.perf_counter() - t0
            info["total_elapsed_s"] = spent_before + info["elapsed_s"]
            info["stop_reason"] = sched.stop_reason
            write_tasks_file(work_dir, info)
            if verbose:
                print(f"{format_summary(info['tasks'], info['elapsed_s'])}\nstopped: {sched.stop_reason}; records in "
                      f"{work_dir}", file=sys.stderr, flush=True)
        logger.removeHandler(handler)
        handler.close()
    return TuningRecords(work_dir, database, read_tasks_file(work_dir))


__all__ = ["tune_model", "TuningRecords", "DEFAULT_TIME_BUDGET", "MODEL_RUNNER_CONFIG", "measured_cold"]
