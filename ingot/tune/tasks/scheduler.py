"""`ModelTaskScheduler`: the gradient-based task scheduler with a time budget, early stopping,
a measured default-schedule baseline per task, and a record committed per measurement.

Note, what it adds to `GradientBased` (whose policy — weight x (alpha x backward gradient +
(1 - alpha) x optimistic forward gradient) — picks the next task once every task had a round):
Step 1. start: each task's workload is registered and its earlier records (resume) loaded; the
   first rounds go to untuned tasks, heaviest (weight x FLOPs) first, so a tiny budget is spent
   where it matters most;
Step 2. baseline: in a task's first round its default schedule (``ingot.ops.schedule``, the one
   an untuned compile uses) is measured and stored as an ordinary record, so apply-best never
   picks a tuned schedule slower than the default (and the untuned latency is known);
Step 3. rounds: before each round the remaining time is compared with the measured seconds per
   candidate (an exponential average over rounds); a round is shrunk to what fits, and none is
   started when not even one candidate fits (a task's first round in a time-limited run is a
   probe of at most 4). Candidates are built in chunks of one per builder process, and no chunk
   starts when the previous one took longer than the time left; each measured candidate is committed at once (a kill loses at most
   the one being measured);
Step 4. early stop: a task whose best latency improved less than ``min_improvement`` (relative)
   over its last ``patience`` rounds is marked done; the budget goes to the others.

Example:
    >>> # sched = ModelTaskScheduler(ctxs, builder, runner, db, max_trials_global=10**9,
    >>> #                            time_budget_s=600); sched.tune(); sched.total_latency_us()
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable, Optional

from ..builder import BuilderInput
from ..database import ArgInfo, TuningRecord
from ..runner import RunnerInput
from ..task_scheduler.gradient_based import GradientBased

logger = logging.getLogger("ingot.tune")


class ModelTaskScheduler(GradientBased):
    """See the module note. Extra arguments: ``deadline`` (a ``time.perf_counter()`` value, or
    None for no time limit), ``patience`` / ``min_improvement`` (early stop), ``measure_default``
    (Step 2), ``on_round(scheduler)`` (called after every round, e.g. for a progress display).

    Example:
        >>> # ModelTaskScheduler(tasks, b, r, db, 256, 16, deadline=time.perf_counter() + 60).tune()
    """

    def __init__(self, *args: Any, deadline: "float | None" = None, patience: int = 3,
                 min_improvement: float = 0.01, measure_default: bool = True,
                 on_round: "Optional[Callable[[ModelTaskScheduler], None]]" = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.deadline = deadline
        self.patience = int(patience)
        self.min_improvement = float(min_improvement)
        self.measure_default = bool(measure_default)
        self.on_round = on_round
        n = len(self.tasks)
        self.default_secs = [math.inf] * n  # the default schedule's latency (Step 2)
        self.stop_reason = ""
        self._sec_per_cand: "float | None" = None  # exponential average of a round's wall time per candidate
        self._task_sec_per_cand: dict = {}  # the same per task
        self._baseline_done = [False] * n

    # -- policy ----------------------------------------------------------------------------------------
    def next_task_id(self) -> int:
        alive = self._alive()
        if not alive:
            return -1
        fresh = [i for i in alive if self.rounds[i] == 0 and not self.best_history[i]]
        if fresh:  # Step 1: untuned tasks first, heaviest first
            return max(fresh, key=lambda i: (self.tasks[i].weight * self.tasks[i].flop_count, -i))
        grads = {i: self.gradient(i) for i in alive}
        return min(alive, key=lambda i: (grads[i], i))

    def remaining_s(self) -> float:
        """Seconds left before the deadline (inf without one)."""
        return math.inf if self.deadline is None else self.deadline - time.perf_counter()

    # -- main loop -------------------------------------------------------------------------------------
    def tune(self) -> None:
        """Run rounds until the trial budget or the time budget is spent or every task is done.

        Example:
            >>> # sched.tune(); sched.stop_reason  -> 'time budget' | 'trial budget' | 'all tasks done'
        """
        t0 = time.perf_counter()
        started = []
        try:
            for i, ctx in enumerate(self.tasks):
                if self.remaining_s() <= 0:
                    self.stop_reason = "time budget (while starting tasks)"
                    self.done[i:] = [True] * (len(self.tasks) - i)
                    break
                self._start_task(i, ctx)
                started.append(ctx)
            while not self.stop_reason:
                self.stop_reason = self._one_round()
        finally:
            for ctx in started:
                ctx.search_strategy.post_tuning()
        total = time.perf_counter() - t0
        self.time_split["other"] = max(0.0, total - sum(v for k, v in self.time_split.items() if k != "other"))
        logger.info("tuning stopped (%s) after %.2f s: search %.2f s, build %.2f s, run %.2f s, other %.2f s",
                    self.stop_reason, total, self.time_split["search"], self.time_split["build"],
                    self.time_split["run"], self.time_split["other"])

    def _one_round(self) -> str:
        """One round; returns why tuning stops ('' to go on)."""
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
        # Seconds per candidate of this task (tasks differ a lot: a conv vs an add), else overall.
        per_cand = self._task_sec_per_cand.get(i, self._sec_per_cand)
        if i not in self._task_sec_per_cand and math.isfinite(remaining):
            budget = min(budget, 4)  # a probe round: this task's cost per candidate is not known yet
        if per_cand is not None and math.isfinite(remaining):
            # Step 3: shrink the round to what fits (2 % slack for the bookkeeping after it).
            fits = int(remaining * 0.98 / per_cand)
            if fits < 1:
                return "time budget (no round fits in the time left)"
            budget = min(budget, fits)
        t = time.perf_counter()
        n = self._round(i, budget)
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
        # Step 1. search (the baseline takes one slot of the task's first round)
        t = time.perf_counter()
        baseline = self._baseline_candidate(i) if budget > 1 or self.rounds[i] == 0 else None
        if baseline is not None and hasattr(ctx.search_strategy, "measured"):
            ctx.search_strategy.measured.add(baseline.candidate_hash)  # the search must not propose it again
        want = budget - (baseline is not None)
        cands = list(ctx.search_strategy.generate_measure_candidates(want) or [])[:want] if want > 0 else []
        self.time_split["search"] += time.perf_counter() - t
        if baseline is not None:
            cands.insert(0, baseline)
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
                means.append(self._measure(i, c, b, ref, args_info, shash, c is baseline))
                measured.append(c)
            last_chunk_s = time.perf_counter() - t_chunk
        searched = [(c, m) for c, m in zip(measured, means) if c is not baseline]
        if searched:
            ctx.search_strategy.notify_runner_results([c for c, _ in searched], [m for _, m in searched])
        self.trials[i] += len(measured)
        self.rounds[i] += 1
        self.best_secs[i] = min([self.best_secs[i]] + means)
        self.best_history[i].append(self.best_secs[i])
        logger.info("task %s round %d: %d candidates, %d failed, best %.3f us", ctx.task_name, self.rounds[i],
                    len(measured), sum(1 for m in means if not math.isfinite(m)), self.best_secs[i] * 1e6)
        return len(measured)

    def _measure(self, i: int, cand: Any, built: Any, ref: Any, args_info: list, shash: str, is_baseline: bool) -> float:
        """Run one built candidate and commit its record at once; returns its mean seconds."""
        ctx = self.tasks[i]
        t = time.perf_counter()
        if built.ok:
            r = self.runner.run([RunnerInput(built.artifact_path, args_info, ref, shash, "main", ctx.num_cores)])[0]
            secs, err = r.run_secs, r.error_msg
        else:
            secs, err = None, built.error_msg
        self.time_split["run"] += time.perf_counter() - t
        t = time.perf_counter()
        rec = TuningRecord(cand.sch.trace.as_json(), shash, secs, str(ctx.target), tuple(args_info),
                           error_msg=err, candidate_hash=cand.candidate_hash)
        self.database.commit_tuning_records([rec])
        if is_baseline:
            self.default_secs[i] = rec.mean_sec
        if err:
            logger.debug("task %s candidate %s failed: %s", ctx.task_name, cand.candidate_hash[:12],
                         err.splitlines()[0] if err else "")
        self.time_split["other"] += time.perf_counter() - t
        return rec.mean_sec

    def _baseline_candidate(self, i: int) -> Any:
        """The task's default schedule as a measure candidate (once per task; None when it is
        already in the database, disabled, or the default rules do not apply)."""
        if not self.measure_default or self._baseline_done[i]:
            return None
        self._baseline_done[i] = True
        ctx = self.tasks[i]
        try:
            from ingot.ir import structural_hash
            from ingot.ops.schedule import schedule_blocks
            from ingot.tir.schedule import Schedule

            from ..search_strategy.base import MeasureCandidate

            sch = schedule_blocks(Schedule(ctx.mod), ctx.target)
            cand = MeasureCandidate(sch, structural_hash(sch.mod))
        except Exception as err:  # noqa: BLE001 - no default schedule: the search alone competes
            logger.info("task %s: no default-schedule baseline (%s: %s)", ctx.task_name, type(err).__name__, err)
            return None
        known = {r.candidate_hash: r for r in self.database.get_records(ctx.mod, ctx.target)}
        if cand.candidate_hash in known:  # resumed: measured by an earlier run
            self.default_secs[i] = known[cand.candidate_hash].mean_sec
            return None
        return cand

    # -- reporting -------------------------------------------------------------------------------------
    def default_latency_us(self) -> float:
        """Weighted sum of the default schedules' latencies (tasks with a measured baseline)."""
        return sum(ctx.weight * s * 1e6 for ctx, s in zip(self.tasks, self.default_secs) if math.isfinite(s))
