"""`SearchStrategy`: proposes the candidates to measure each round (TVM's ``ms.SearchStrategy``).

Note: candidates are traces replayed on the workload, followed by the space's post-processors.
A replay is memoized by the trace's JSON (replaying the same decisions always gives the same
program), and candidates are deduplicated by the structural hash of the scheduled module —
across rounds and, on resume, against the hashes already in the database.

Example:
    >>> # strategy.pre_tuning(ctx, design_spaces, database, cost_model)
    >>> # while (cands := strategy.generate_measure_candidates()): ... strategy.notify_runner_results(cands, secs)
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

logger = logging.getLogger("ingot.tune")


@dataclass
class MeasureCandidate:
    """A scheduled candidate: the schedule (trace included) and its structural hash.

    Example:
        >>> # MeasureCandidate(sch, candidate_hash).sch.mod
    """

    sch: Any
    candidate_hash: str


class SearchStrategy:
    """Base class with the replay/dedup machinery shared by the strategies.

    Example:
        >>> # ReplayTrace(), EvolutiveSearch(population_size=64)
    """

    def __init__(self, seed: "int | None" = None):
        self.seed = seed
        self._replay_cache: dict = {}

    # -- lifecycle -----------------------------------------------------------------------------------
    def pre_tuning(self, context: Any, design_spaces: Sequence[Any], database: Any = None,
                   cost_model: Any = None) -> None:
        """Start a search: the task's context, its design space schedules, the database (for
        resume and seeds) and the cost model."""
        self.context = context
        self.mod = context.mod
        self.space = context.space_generator
        self.rng = np.random.default_rng(self.seed if self.seed is not None else context.seed)
        self.design_traces = [s.trace.simplified(remove_postproc=True) for s in design_spaces]
        if not self.design_traces:
            raise ValueError(f"task {context.task_name!r}: the design space is empty")
        self.database = database
        self.cost_model = cost_model
        self.measured: set = set()
        if database is not None:
            for r in database.get_records(context.mod, context.target):
                if r.candidate_hash:
                    self.measured.add(r.candidate_hash)

    def generate_measure_candidates(self, num: int) -> "Optional[list[MeasureCandidate]]":
        """Up to ``num`` new candidates, or None when the space is exhausted."""
        raise NotImplementedError

    def notify_runner_results(self, candidates: Sequence[MeasureCandidate], mean_secs: Sequence[float]) -> None:
        """Record what was measured (``inf`` for failures) and train the cost model."""
        for c in candidates:
            self.measured.add(c.candidate_hash)
        if self.cost_model is not None and candidates:
            feats = self.context.feature_extractor.extract([c.sch.mod for c in candidates],
                                                           [c.candidate_hash for c in candidates])
            self.cost_model.update(feats, list(mean_secs))

    # -- replay --------------------------------------------------------------------------------------
    def replay(self, trace: Any, fresh: bool = False) -> "Optional[MeasureCandidate]":
        """Replay a design-space trace on the workload (``fresh``: resample every decision),
        then the post-processors; None if the replay or a postproc rejects it."""
        from ingot.ir import structural_hash
        from ingot.tir.schedule import Schedule

        key = None
        if not fresh:
            key = json.dumps(trace.as_json(remove_postproc=True), sort_keys=True)
            if key in self._replay_cache:
                return self._replay_cache[key]
        sch = Schedule(self.mod, seed=int(self.rng.integers(2**62)))
        try:
            provider = (lambda inst, inputs, attrs, decision: None) if fresh else None
            trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=provider)
            sch.enter_postproc()
            for p in self.space.postprocs:
                if not p.apply(sch):
                    sch = None
                    break
        except Exception as err:  # an invalid decision or a rule/postproc precondition
            logger.debug("replay failed: %s", err)
            sch = None
        cand = MeasureCandidate(sch, structural_hash(sch.mod)) if sch is not None else None
        if key is not None:
            if len(self._replay_cache) > 20000:
                self._replay_cache.clear()
            self._replay_cache[key] = cand
        return cand

    def sample_random(self, num: int, exclude: set, max_fail: int = 0) -> "list[MeasureCandidate]":
        """Up to ``num`` fresh random samples of the design space with unseen hashes."""
        out: list = []
        seen = set(exclude)
        fails = 0
        max_fail = max_fail or 4 * num + 8
        while len(out) < num and fails < max_fail:
            trace = self.design_traces[int(self.rng.integers(len(self.design_traces)))]
            cand = self.replay(trace, fresh=True)
            if cand is None or cand.candidate_hash in seen:
                fails += 1
                continue
            seen.add(cand.candidate_hash)
            out.append(cand)
        return out

    def post_tuning(self) -> None:
        """End of the search (frees memoized replays)."""
        self._replay_cache.clear()
