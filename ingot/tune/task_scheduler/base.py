"""`TaskScheduler`: shares the trial budget among tasks and runs the measure loop.

Note, one round for the task the policy picks (``next_task_id``):
Step 1. search: the task's strategy proposes up to ``num_trials_per_iter`` candidates;
Step 2. build: all of them in the builder's process pool (plus, once per task, the unscheduled
   workload as the correctness reference);
Step 3. run: the runner measures each built candidate in its child process;
Step 4. record: every candidate (failed ones too, with the error) goes to the database, and the
   strategy/cost model hear the results. Wall time per step is accumulated and logged.
A task is done when its strategy has nothing new or the budget is spent.

Example:
    >>> # RoundRobin(tasks, builder, runner, database, max_trials_global=64).tune()
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any, Optional, Sequence

from ..builder import BuilderInput
from ..database import ArgInfo, TuningRecord, measurement
from ..runner import RunnerInput
from .progress import Progress

logger = logging.getLogger("ingot.tune")


class TaskScheduler:
    """Base class; subclasses choose the next task (`next_task_id`).

    Example:
        >>> # sched = GradientBased(tasks, builder, runner, db, max_trials_global=256); sched.tune()
    """

    def __init__(self, tasks: Sequence[Any], builder: Any, runner: Any, database: Any, max_trials_global: int,
                 num_trials_per_iter: int = 64, cost_model_factory: Any = None, verbose: int = 1):
        if not tasks:
            raise ValueError("TaskScheduler: no tasks to tune")
        self.tasks = list(tasks)
        self.builder, self.runner, self.database = builder, runner, database
        self.max_trials_global = int(max_trials_global)
        self.num_trials_per_iter = int(num_trials_per_iter)
        self.cost_model_factory = cost_model_factory
        self.verbose = verbose
        n = len(self.tasks)
        self.trials = [0] * n
        self.done = [False] * n
        self.best_secs = [math.inf] * n
        self.best_history: list = [[] for _ in range(n)]  # best latency after each round of a task
        self.rounds = [0] * n
        self.time_split = {"search": 0.0, "build": 0.0, "run": 0.0, "other": 0.0}
        self._reference: dict = {}

    # -- policy ----------------------------------------------------------------------------------------
    def next_task_id(self) -> int:
        """Index of the next task to tune, or -1 when every task is done."""
        raise NotImplementedError

    def _alive(self) -> list:
        return [i for i in range(len(self.tasks)) if not self.done[i]]

    # -- main loop -------------------------------------------------------------------------------------
    def tune(self) -> None:
        """Run rounds until the budget is spent or every task is done.

        Example:
            >>> # sched.tune(); sched.time_split -> {'search': 1.2, 'build': 3.4, 'run': 5.6, 'other': 0.1}
        """
        t0 = time.perf_counter()
        for i, ctx in enumerate(self.tasks):
            self._start_task(i, ctx)
        progress = Progress(self.max_trials_global, self.verbose)
        progress.advance(min(sum(self.trials), self.max_trials_global))
        try:
            while sum(self.trials) < self.max_trials_global:
                i = self.next_task_id()
                if i < 0:
                    break
                budget = min(self.num_trials_per_iter, self.max_trials_global - sum(self.trials))
                n = self._round(i, budget)
                progress.advance(n)
                progress.table(self.table_rows(), self.total_latency_us())
        finally:
            progress.close()
            for ctx in self.tasks:
                ctx.search_strategy.post_tuning()
        total = time.perf_counter() - t0
        self.time_split["other"] = max(0.0, total - sum(v for k, v in self.time_split.items() if k != "other"))
        logger.info("tuning wall time %.2f s: search %.2f s, build %.2f s, run %.2f s, other %.2f s", total,
                    self.time_split["search"], self.time_split["build"], self.time_split["run"],
                    self.time_split["other"])

    def _start_task(self, i: int, ctx: Any) -> None:
        t = time.perf_counter()
        self.database.commit_workload(ctx.mod)
        records = self.database.get_records(ctx.mod, ctx.target)
        self.trials[i] = len(records)  # resume: earlier trials count
        valid = [r.mean_sec for r in records if r.is_valid]
        self.best_secs[i] = min(valid) if valid else math.inf
        if records:
            self.best_history[i].append(self.best_secs[i])
        cost_model = self.cost_model_factory() if self.cost_model_factory else None
        ctx.search_strategy.pre_tuning(ctx, ctx.generate_design_space(), self.database, cost_model)
        if cost_model is not None and records:
            self._warm_start(ctx, records, cost_model)
        self.time_split["search"] += time.perf_counter() - t

    def _warm_start(self, ctx: Any, records: list, cost_model: Any, limit: int = 256) -> None:
        """Train the cost model on records from an earlier run (resume)."""
        chosen = sorted(records, key=lambda r: r.mean_sec)[:limit]
        cands, secs = [], []
        for r in chosen:
            try:
                cand = ctx.search_strategy.replay(r.trace.simplified(remove_postproc=True))
            except Exception:
                cand = None
            if cand is not None:
                cands.append(cand)
                secs.append(r.mean_sec)
        if cands:
            feats = ctx.feature_extractor.extract([c.sch.mod for c in cands], [c.candidate_hash for c in cands])
            cost_model.update(feats, secs)

    def _reference_path(self, i: int) -> "Optional[str]":
        if i not in self._reference:
            ctx = self.tasks[i]
            [res] = self.builder.build([BuilderInput(ctx.mod, str(ctx.target))])
            if not res.ok:
                logger.warning("task %s: the unscheduled workload does not build (%s); results are not checked",
                               ctx.task_name, res.error_msg.splitlines()[0])
            self._reference[i] = res.artifact_path if res.ok else None
        return self._reference[i]

    def _round(self, i: int, budget: int) -> int:
        ctx = self.tasks[i]
        # Step 1. search
        t = time.perf_counter()
        cands = ctx.search_strategy.generate_measure_candidates(budget)
        self.time_split["search"] += time.perf_counter() - t
        if not cands:
            self.done[i] = True
            logger.info("task %s: the search has no new candidates; done", ctx.task_name)
            return 0
        cands = cands[:budget]
        # Step 2. build
        t = time.perf_counter()
        ref = self._reference_path(i)
        built = self.builder.build([BuilderInput(c.sch.mod, str(ctx.target)) for c in cands])
        self.time_split["build"] += time.perf_counter() - t
        # Step 3. run
        t = time.perf_counter()
        args_info = ArgInfo.from_prim_func(ctx.mod["main"] if "main" in ctx.mod else next(iter(ctx.mod.items()))[1])
        shash = self.database.commit_workload(ctx.mod).shash
        results = []
        for b in built:
            if not b.ok:
                results.append((None, b.error_msg))
                continue
            r = self.runner.run([RunnerInput(b.artifact_path, args_info, ref, shash, "main",
                                             ctx.num_cores)])[0]
            # The fastest repeat: other processes only ever add time (the model tuner does the same)
            results.append(([min(r.run_secs)] if r.run_secs else r.run_secs, r.error_msg))
        self.time_split["run"] += time.perf_counter() - t
        # Step 4. record
        t = time.perf_counter()
        records = []
        measure = measurement(self.runner, kept="min")  # how they were timed (record schema v2)
        for c, (secs, err) in zip(cands, results):
            records.append(TuningRecord(c.sch.trace.as_json(), shash, secs, str(ctx.target), tuple(args_info),
                                        error_msg=err, candidate_hash=c.candidate_hash, measure=measure))
        self.database.commit_tuning_records(records)
        means = [r.mean_sec for r in records]
        ctx.search_strategy.notify_runner_results(cands, means)
        self.trials[i] += len(cands)
        self.rounds[i] += 1
        self.best_secs[i] = min([self.best_secs[i]] + means)
        self.best_history[i].append(self.best_secs[i])
        n_fail = sum(1 for m in means if not math.isfinite(m))
        logger.info("task %s round %d: %d candidates, %d failed, best %.3f us", ctx.task_name, self.rounds[i],
                    len(cands), n_fail, self.best_secs[i] * 1e6)
        for c, (_secs, err) in zip(cands, results):
            if err:
                logger.debug("candidate %s failed: %s", c.candidate_hash[:12], err.splitlines()[0])
        self.time_split["other"] += time.perf_counter() - t
        return len(cands)

    # -- reporting -------------------------------------------------------------------------------------
    def table_rows(self) -> list:
        rows = []
        for i, ctx in enumerate(self.tasks):
            secs = self.best_secs[i]
            rows.append({
                "id": i, "name": ctx.task_name, "flop": ctx.flop_count, "weight": ctx.weight,
                "gflops": ctx.flop_count / secs / 1e9 if math.isfinite(secs) and secs > 0 else None,
                "latency_us": secs * 1e6 if math.isfinite(secs) else None,
                "trials": self.trials[i], "done": self.done[i],
            })
        return rows

    def total_latency_us(self) -> float:
        return sum(ctx.weight * s * 1e6 for ctx, s in zip(self.tasks, self.best_secs) if math.isfinite(s))
