"""`ModelTaskScheduler`: the gradient-based task scheduler with a time budget, a measured
default-schedule baseline per task first, tiny tasks skipped, early stopping, and a record
committed per measurement.

Note, what it adds to `GradientBased` (whose policy — weight x (alpha x backward gradient +
(1 - alpha) x optimistic forward gradient, -best / trials) — picks the next task):
Step 1. start: each task's workload is registered and its earlier records (resume) loaded. The
   search of a task (design space, cost model) is only set up when the task gets its first
   search round, so tasks that are never searched cost nothing;
Step 2. baselines: before any search, every task's default schedule (``ingot.ops.schedule``, the
   one an untuned compile uses) is built (one per builder process at a time) and measured, and
   stored as an ordinary record: the end-to-end estimate starts at the untuned latency and only
   goes down, apply-best can tell whether tuning beat the default, and the latency share of each
   task is known;
Step 3. skip: tasks whose weighted default latency is tiny (the smallest tasks that together make
   at most ``skip_share`` of the total) are marked done and never searched;
Step 4. rounds: the gradient picks the task (after Step 2 every task has one trial, so the first
   pick is the task with the largest weight x latency, i.e. the largest expected gain). Before
   each round the remaining time is compared with the measured seconds per candidate (an
   exponential average per task); a round is shrunk to what fits, and none is started when not
   even one candidate fits (a task's first search round is a probe of at most 4). Candidates are
   built in chunks of one per builder process, and no chunk starts when the previous one took
   longer than the time left; each measured candidate is committed at once;
Step 5. early stop: a task whose best latency improved less than ``min_improvement`` (relative)
   over its last ``patience`` rounds (the baseline counts as one) is marked done.

Example:
    >>> # sched = ModelTaskScheduler(ctxs, builder, runner, db, max_trials_global=10**9,
    >>> #                            deadline=time.perf_counter() + 600); sched.tune()
"""
from __future__ import annotations

import logging
import math
import os
import time
from typing import Any, Callable, Optional

from ..builder import BuilderInput
from ..database import ArgInfo, TuningRecord, measurement
from ..runner import RunnerInput
from ..task_scheduler.gradient_based import GradientBased
from .records import APPLY_MIN_GAIN

logger = logging.getLogger("ingot.tune")


class ModelTaskScheduler(GradientBased):
    """See the module note. Extra arguments: ``deadline`` (a ``time.perf_counter()`` value, or
    None for no time limit), ``patience`` / ``min_improvement`` (early stop), ``measure_default``
    (Step 2), ``skip_share`` (Step 3; 0 tunes every task), ``on_round(scheduler)`` (called after
    every round, e.g. for a progress display).

    Example:
        >>> # ModelTaskScheduler(tasks, b, r, db, 256, 16, deadline=time.perf_counter() + 60).tune()
    """

    def __init__(self, *args: Any, deadline: "float | None" = None, patience: int = 3,
                 min_improvement: float = 0.01, measure_default: bool = True, skip_share: float = 0.05,
                 on_round: "Optional[Callable[[ModelTaskScheduler], None]]" = None,
                 time_estimates: "dict | None" = None, task_args: "Optional[list]" = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # Per task, (weight parameter indices, output parameter indices) of its kernel
        # (`ExtractedTask.weight_params`/``output_params``): which arguments the runner's
        # "weights" cache-flush policies flush. None: unknown (the runner refuses those policies).
        self.task_args = list(task_args) if task_args is not None else [(None, None)] * len(self.tasks)
        if len(self.task_args) != len(self.tasks):
            raise ValueError(f"ModelTaskScheduler: task_args has {len(self.task_args)} entries for "
                             f"{len(self.tasks)} tasks; pass one (weight_params, output_params) per task")
        self.deadline = deadline
        self.patience = int(patience)
        self.min_improvement = float(min_improvement)
        self.measure_default = bool(measure_default)
        self.skip_share = float(skip_share)
        self.on_round = on_round
        n = len(self.tasks)
        self.default_secs = [math.inf] * n  # the default schedule's latency (Step 2)
        self.skipped = [False] * n  # Step 3
        self.stop_reason = ""
        self._sec_per_cand: "float | None" = None  # exponential average of a round's wall time per candidate
        self._task_sec_per_cand: dict = {}  # the same per task
        # Wall time of a task's first search round (design space, reference build, probe): an
        # exponential average; seeded from the baselines' time so the first one is predicted too.
        self._first_round_s: "float | None" = None
        # A resumed run starts from the last run's averages (`time_estimates()`), so its first
        # rounds are predicted too (no defaults left to measure means nothing to seed them from).
        est = time_estimates or {}
        if est.get("sec_per_cand"):
            self._sec_per_cand = float(est["sec_per_cand"])
        if est.get("first_round_s"):
            self._first_round_s = float(est["first_round_s"])
        self._searching: set = set()  # tasks whose search is set up (Step 1)
        self._records: dict = {}  # task -> records of an earlier run (resume), for the cost model
        self.default_hash: "list[str | None]" = [None] * n  # candidate hash of the default schedule
        self._default_built: dict = {}  # task -> (candidate, build result) of its default schedule

    # -- policy ----------------------------------------------------------------------------------------
    def next_task_id(self) -> int:
        alive = self._alive()
        if not alive:
            return -1
        grads = {i: self.gradient(i) for i in alive}
        return min(alive, key=lambda i: (grads[i], -self.tasks[i].weight * self.tasks[i].flop_count, i))

    def remaining_s(self) -> float:
        """Seconds left before the deadline (inf without one)."""
        return math.inf if self.deadline is None else self.deadline - time.perf_counter()

    # -- main loop -------------------------------------------------------------------------------------
    def tune(self) -> None:
        """Baselines, skip, then rounds until the trial or time budget is spent or every task is done.

        Example:
            >>> # sched.tune(); sched.stop_reason  -> 'time budget' | 'trial budget' | 'all tasks done'
        """
        t0 = time.perf_counter()
        try:
            for i in range(len(self.tasks)):  # Step 1
                self._load_task(i)
            self.stop_reason = self._measure_baselines()  # Step 2
            if not self.stop_reason:
                self._skip_small_tasks()  # Step 3
            if self.on_round is not None:
                self.on_round(self)
            while not self.stop_reason:  # Step 4
                self.stop_reason = self._one_round()
        finally:
            for i in self._searching:
                self.tasks[i].search_strategy.post_tuning()
        total = time.perf_counter() - t0
        self.time_split["other"] = max(0.0, total - sum(v for k, v in self.time_split.items() if k != "other"))
        logger.info("tuning stopped (%s) after %.2f s: search %.2f s, build %.2f s, run %.2f s, other %.2f s",
                    self.stop_reason, total, self.time_split["search"], self.time_split["build"],
                    self.time_split["run"], self.time_split["other"])

    def _load_task(self, i: int) -> None:
        """Step 1: register the workload and count the records of an earlier run (no search set-up)."""
        ctx = self.tasks[i]
        self.database.commit_workload(ctx.mod)
        records = self.database.get_records(ctx.mod, ctx.target)
        self._records[i] = records
        # Distinct candidates: a default timed twice is one trial.
        self.trials[i] = len({r.candidate_hash or id(r) for r in records})
        # The best so far among records timed as this run times (a merged work dir may hold others).
        valid = [r.mean_sec for r in records if r.is_valid and self._comparable(r)]
        self.best_secs[i] = min(valid) if valid else math.inf
        if records:
            self.best_history[i].append(self.best_secs[i])

    def _comparable(self, record: Any) -> bool:
        """Whether ``record`` was timed with this run's flush policy (record schema v2; a record
        that does not say counts: tune_model stamps a work dir's own old records on resume)."""
        from ..database.record import UNKNOWN_FLUSH

        mine = (measurement(self.runner) or {}).get("cache_flush", UNKNOWN_FLUSH)
        theirs = record.cache_flush
        return UNKNOWN_FLUSH in (mine, theirs) or (theirs == mine and type(theirs) is type(mine))

    def _start_search(self, i: int) -> None:
        """Set up task ``i``'s search (design space, cost model warm-started on earlier records)."""
        if i in self._searching:
            return
        ctx = self.tasks[i]
        self._searching.add(i)
        cost_model = self.cost_model_factory() if self.cost_model_factory else None
        ctx.search_strategy.pre_tuning(ctx, ctx.generate_design_space(), self.database, cost_model)
        records = self._records.pop(i, [])
        if cost_model is not None and records:
            self._warm_start(ctx, records, cost_model)
        if hasattr(ctx.search_strategy, "measured"):
            # The search must not propose what is measured already (the default schedule included).
            ctx.search_strategy.measured.update([r.candidate_hash for r in records if r.candidate_hash]
                                                + [h for h in (self.default_hash[i],) if h])

    def _measure_baselines(self) -> str:
        """Step 2: build and measure every task's default schedule; returns a stop reason or ''."""
        if not self.measure_default:
            return ""
        t = time.perf_counter()
        todo = []
        for i in sorted(range(len(self.tasks)), key=lambda i: -self.tasks[i].weight * self.tasks[i].flop_count):
            cand = self._baseline_candidate(i)
            if cand is not None:
                todo.append((i, cand))
        self.time_split["search"] += time.perf_counter() - t
        chunk = max(1, int(getattr(self.builder, "max_workers", None) or 1))
        last_chunk_s = 0.0
        t_phase = time.perf_counter()
        left = self.max_trials_global - sum(self.trials)
        if left < len(todo):  # a trial budget smaller than the task count: the heaviest tasks first
            logger.info("trial budget: default schedules of only %d of %d tasks measured", max(left, 0), len(todo))
            todo = todo[:max(left, 0)]
        for start in range(0, len(todo), chunk):
            if self.remaining_s() <= last_chunk_s:
                logger.info("time budget reached while measuring default schedules (%d of %d measured)",
                            start, len(todo))
                return "time budget (while measuring default schedules)"
            part = todo[start:start + chunk]
            t = t_chunk = time.perf_counter()
            built = self.builder.build([BuilderInput(c.sch.mod, str(self.tasks[i].target)) for i, c in part])
            self.time_split["build"] += time.perf_counter() - t
            for (i, c), b in zip(part, built):
                ctx = self.tasks[i]
                # The default schedules are what an untuned build uses and are tested with the
                # operators; no reference build is spent on checking them.
                sec = self._measure(i, c, b, None, ArgInfo.from_prim_func(ctx.mod["main"]),
                                    self.database.commit_workload(ctx.mod).shash, True)
                if b.ok:
                    self._default_built[i] = (c, b)
                self.trials[i] += 1
                self.best_secs[i] = min(self.best_secs[i], sec)
                self.best_history[i].append(self.best_secs[i])
                logger.info("task %s: default schedule %.3f us", ctx.task_name, sec * 1e6)
            last_chunk_s = time.perf_counter() - t_chunk
            if self.on_round is not None and (start // chunk) % 8 == 7:
                self.on_round(self)
        if todo:
            # A searched candidate costs more than a default one (search, correctness check);
            # a first round also sets the search up and builds the reference. Rough, corrected
            # by the measured averages after each round.
            per_chunk = (time.perf_counter() - t_phase) * chunk / len(todo)
            self._sec_per_cand = self._sec_per_cand or per_chunk
            self._first_round_s = self._first_round_s or 2.0 * per_chunk
        return ""

    def _skip_small_tasks(self) -> None:
        """Step 3: mark done the smallest tasks that together make at most ``skip_share`` of the
        weighted default latency (their tuning cannot pay for its time)."""
        lat = {i: self.tasks[i].weight * self.default_secs[i] for i in range(len(self.tasks))
               if math.isfinite(self.default_secs[i]) and not self.done[i]}
        total = sum(lat.values())
        if self.skip_share <= 0 or total <= 0:
            return
        acc = 0.0
        for i in sorted(lat, key=lambda i: lat[i]):
            acc += lat[i]
            if acc > self.skip_share * total:
                break
            self.done[i] = self.skipped[i] = True
        n = sum(self.skipped)
        if n:
            logger.info("%d task(s) skipped: together %.1f%% of the default latency (skip_share=%.0f%%)",
                        n, 100 * sum(lat[i] for i in lat if self.skipped[i]) / total, 100 * self.skip_share)

    def _one_round(self) -> str:
        """One search round; returns why tuning stops ('' to go on)."""
        left = self.max_trials_global - sum(self.trials)
        if left <= 0:
            return "trial budget"
        i = self.next_task_id()
        if i < 0:
            return "all tasks done"
        budget = min(self.num_trials_per_iter, left)
        remaining = self.remaining_s()
        if remaining <= 0:
            return "time budget"
        if (i not in self._searching and self._first_round_s is not None
                and remaining * 0.98 < self._first_round_s):
            # A first round (search set-up + probe) does not fit: go on with a started task.
            started = [j for j in self._alive() if j in self._searching]
            if not started:
                return "time budget (no first round of a task fits in the time left)"
            i = min(started, key=lambda j: (self.gradient(j), j))
        # Seconds per candidate of this task (tasks differ a lot: a conv vs an add), else overall.
        per_cand = self._task_sec_per_cand.get(i, self._sec_per_cand)
        if i not in self._task_sec_per_cand and math.isfinite(remaining):
            budget = min(budget, 4)  # a probe round: this task's cost per candidate is not known yet
        if per_cand is not None and math.isfinite(remaining):
            # Step 4: shrink the round to what fits (2 % slack for the bookkeeping after it).
            fits = int(remaining * 0.98 / per_cand)
            if fits < 1:
                return "time budget (no round fits in the time left)"
            budget = min(budget, fits)
        first = i not in self._searching
        t = time.perf_counter()
        self._start_search(i)
        self.time_split["search"] += time.perf_counter() - t
        n = self._round(i, budget)
        if first:
            took = time.perf_counter() - t
            self._first_round_s = took if self._first_round_s is None else 0.5 * self._first_round_s + 0.5 * took
        if n:
            per = (time.perf_counter() - t) / n
            self._sec_per_cand = per if self._sec_per_cand is None else 0.5 * self._sec_per_cand + 0.5 * per
            old_task = self._task_sec_per_cand.get(i)
            self._task_sec_per_cand[i] = per if old_task is None else 0.5 * old_task + 0.5 * per
            self._check_early_stop(i)
        if self.on_round is not None:
            self.on_round(self)
        return ""

    def _check_early_stop(self, i: int) -> None:
        # Step 4: stopped improving over the last `patience` rounds → done.
        hist = self.best_history[i]
        if self.patience <= 0 or len(hist) <= self.patience or not math.isfinite(hist[-1]):
            return
        before = hist[-1 - self.patience]
        if math.isfinite(before) and hist[-1] > before * (1.0 - self.min_improvement):
            self.done[i] = True
            logger.info("task %s: no improvement above %.0f%% in its last %d rounds; stopped early",
                        self.tasks[i].task_name, self.min_improvement * 100, self.patience)

    # -- one round -------------------------------------------------------------------------------------
    def _round(self, i: int, budget: int) -> int:
        ctx = self.tasks[i]
        args_info = ArgInfo.from_prim_func(ctx.mod["main"])
        shash = self.database.commit_workload(ctx.mod).shash
        # Step 1. search
        t = time.perf_counter()
        cands = list(ctx.search_strategy.generate_measure_candidates(budget) or [])[:budget]
        self.time_split["search"] += time.perf_counter() - t
        if not cands:
            self.done[i] = True
            logger.info("task %s: the search has no new candidates; done", ctx.task_name)
            return 0
        # Step 2+3+4. build a chunk (one candidate per builder process), run and record each of
        # its candidates at once (an interruption loses nothing measured), then check the deadline
        # again: an overrun is bounded by one chunk, not by a whole round.
        t = time.perf_counter()
        ref = self._reference_path(i)
        self.time_split["build"] += time.perf_counter() - t
        chunk = max(1, int(getattr(self.builder, "max_workers", None) or 1))
        measured, means = [], []
        last_chunk_s = 0.0
        for start in range(0, len(cands), chunk):
            # Never start a chunk that the previous one says cannot finish before the deadline.
            if measured and self.remaining_s() < last_chunk_s:
                logger.info("task %s: time budget reached; %d candidate(s) of the round not measured",
                            ctx.task_name, len(cands) - len(measured))
                break
            part = cands[start:start + chunk]
            t = t_chunk = time.perf_counter()
            built = self.builder.build([BuilderInput(c.sch.mod, str(ctx.target)) for c in part])
            self.time_split["build"] += time.perf_counter() - t
            for c, b in zip(part, built):
                means.append(self._measure(i, c, b, ref, args_info, shash, False))
                measured.append(c)
            last_chunk_s = time.perf_counter() - t_chunk
        if measured:
            ctx.search_strategy.notify_runner_results(measured, means)
            self._recheck_default(i, min(means), ref, args_info, shash)
        self.trials[i] += len(measured)
        self.rounds[i] += 1
        self.best_secs[i] = min([self.best_secs[i]] + means)
        self.best_history[i].append(self.best_secs[i])
        logger.info("task %s round %d: %d candidates, %d failed, best %.3f us", ctx.task_name, self.rounds[i],
                    len(measured), sum(1 for m in means if not math.isfinite(m)), self.best_secs[i] * 1e6)
        return len(measured)

    def _recheck_default(self, i: int, best_new: float, ref: Any, args_info: list, shash: str) -> None:
        """When a candidate just beat the default by more than `APPLY_MIN_GAIN`, time the default
        again now (its library is in the compile cache: no build), under the same conditions, and
        keep the faster of its times: a default first measured while other processes disturbed
        the machine must not make every candidate look like a large gain."""
        if i not in self._default_built or not best_new < self.default_secs[i] * (1.0 - APPLY_MIN_GAIN):
            return
        cand, built = self._default_built[i]
        if not os.path.exists(built.artifact_path):
            return
        before = self.default_secs[i]
        self._measure(i, cand, built, ref, args_info, shash, True)  # not a trial: no new candidate
        if self.default_secs[i] < before:
            logger.info("task %s: default schedule timed again: %.3f us (was %.3f us)", self.tasks[i].task_name,
                        self.default_secs[i] * 1e6, before * 1e6)

    def _measure(self, i: int, cand: Any, built: Any, ref: Any, args_info: list, shash: str, is_baseline: bool) -> float:
        """Run one built candidate and commit its record at once; returns its mean seconds."""
        ctx = self.tasks[i]
        t = time.perf_counter()
        if built.ok:
            weights, outputs = self.task_args[i]
            r = self.runner.run([RunnerInput(built.artifact_path, args_info, ref, shash, "main", ctx.num_cores,
                                             weight_args=weights, output_args=outputs)])[0]
            # The fastest repeat: other processes on the machine only ever add time, so the
            # minimum is the robust estimate (a preempted repeat must not pick the schedule).
            secs, err = ([min(r.run_secs)] if r.run_secs else r.run_secs), r.error_msg
        else:
            secs, err = None, built.error_msg
        self.time_split["run"] += time.perf_counter() - t
        t = time.perf_counter()
        rec = TuningRecord(cand.sch.trace.as_json(), shash, secs, str(ctx.target), tuple(args_info),
                           error_msg=err, candidate_hash=cand.candidate_hash,
                           measure=measurement(self.runner, kept="min"))  # how it was timed: schema v2
        self.database.commit_tuning_records([rec])
        if is_baseline:  # timed again by _recheck_default: the fastest time counts
            self.default_secs[i] = min(self.default_secs[i], rec.mean_sec)
        if err:
            logger.debug("task %s candidate %s failed: %s", ctx.task_name, cand.candidate_hash[:12],
                         err.splitlines()[0] if err else "")
        self.time_split["other"] += time.perf_counter() - t
        return rec.mean_sec

    def _baseline_candidate(self, i: int) -> Any:
        """The task's default schedule as a measure candidate (once per task; None when it is
        already in the database, disabled, or the default rules do not apply)."""
        if not self.measure_default:
            return None
        ctx = self.tasks[i]
        try:
            from ingot.ir import structural_hash
            from ingot.ops.schedule import schedule_blocks
            from ingot.tir.schedule import Schedule

            from ..search_strategy.base import MeasureCandidate

            sch = schedule_blocks(Schedule(ctx.mod), ctx.target)
            cand = MeasureCandidate(sch, structural_hash(sch.mod))
            self.default_hash[i] = cand.candidate_hash
        except Exception as err:  # noqa: BLE001 - no default schedule: the search alone competes
            logger.info("task %s: no default-schedule baseline (%s: %s)", ctx.task_name, type(err).__name__, err)
            return None
        known = [r.mean_sec for r in self.database.get_records(ctx.mod, ctx.target)
                 if r.candidate_hash == cand.candidate_hash and self._comparable(r)]
        if known:  # resumed: measured by an earlier run (the fastest of its timings counts)
            self.default_secs[i] = min(known)
            return None
        return cand

    # -- reporting -------------------------------------------------------------------------------------
    def time_estimates(self) -> dict:
        """The measured averages that predict round times (saved in tasks.json for a resume).

        Example:
            >>> # sched.time_estimates()  -> {'sec_per_cand': 1.9, 'first_round_s': 7.5}
        """
        return {"sec_per_cand": self._sec_per_cand, "first_round_s": self._first_round_s}

    def default_latency_us(self) -> float:
        """Weighted sum of the default schedules' latencies (tasks with a measured baseline)."""
        return sum(ctx.weight * s * 1e6 for ctx, s in zip(self.tasks, self.default_secs) if math.isfinite(s))
