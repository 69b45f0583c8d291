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
        # prefix key -> (schedule snapshot, its RVs in the trace's definition order)
        self._prefix_cache: dict = {}
        self.prefix_cache_size = 4096
        self.stats = {"replays": 0, "memo_hits": 0, "prefix_hits": 0, "insts_applied": 0, "insts_skipped": 0}

    # -- lifecycle -----------------------------------------------------------------------------------
    def pre_tuning(self, context: Any, design_spaces: Sequence[Any], database: Any = None,
                   cost_model: Any = None) -> None:
        """Start a search: the task's context, its design space schedules, the database (for
        resume and seeds) and the cost model."""
        self.context = context
        self.mod = context.mod
        self.space = context.space_generator
        self.rng = np.random.default_rng(self.seed if self.seed is not None else context.seed)
        traces = [s.trace.simplified(remove_postproc=True) for s in design_spaces]
        if not traces:
            raise ValueError(f"task {context.task_name!r}: the design space is empty")
        # Traces without decisions (the default schedule, a fixed ScheduleFn) are one program
        # each: measured once in the first round instead of being drawn as random samples.
        self.fixed_traces = [t for t in traces if not t.decisions]
        self.design_traces = [t for t in traces if t.decisions] or traces
        self._fixed_pending = bool(self.fixed_traces) and len(self.fixed_traces) < len(traces)
        # Members a rule marked ``meta_schedule.seeded`` (BlockedGemm's default tiles) are also
        # measured with their own decisions in the first round: evolution then starts there.
        self.seeded_traces = [t for t in self.design_traces if t.decisions and _is_seeded(t)]
        self._fixed_pending = self._fixed_pending or bool(self.seeded_traces)
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
        then the post-processors; None if the replay or a postproc rejects it.

        Replays are incremental (see `_replay_insts`): a trace that shares a prefix with one
        replayed before — a mutated child and its parent — restarts from the schedule cached
        at the end of that prefix, so only the instructions from the first changed decision on
        are run again.

        Example:
            >>> # cand = strategy.replay(parent.sch.trace.with_decision(inst, [4, 4, 2, 1]))
        """
        from ingot.ir import structural_hash

        key = None
        if not fresh:
            key = json.dumps(trace.as_json(remove_postproc=True), sort_keys=True)
            if key in self._replay_cache:
                self.stats["memo_hits"] += 1
                return self._replay_cache[key]
        try:
            sch = self._replay_insts(trace, fresh)
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

    def _replay_insts(self, trace: Any, fresh: bool) -> Any:
        """Run the design-space part of ``trace`` on a new schedule, restarting from the longest
        cached prefix.

        Step 1. Each instruction gets a prefix key: a hash chained over (kind, inputs with RVs
        named by definition order, attrs, decision) of every instruction so far. Step 2. Unless
        ``fresh``, find the longest prefix with a cached schedule snapshot and start from a copy
        of it (its RVs map to the trace's RVs by definition order). Step 3. Apply the remaining
        instructions; before every sampling or annotate instruction (where mutated traces
        diverge) store a snapshot under the prefix key. Fresh decisions are read back from the
        schedule's own trace, so random samples seed the cache for their mutated children.
        """
        from ingot.tir.schedule import Schedule
        from ingot.tir.schedule.trace import translate_rvs

        insts = []
        for inst in trace.insts:
            if inst.kind.name == "enter_postproc":
                break
            insts.append(inst)
        order = _definition_order(insts)
        rv_index = {id(rv): j for j, rv in enumerate(order)}
        start, sch, rv_list = 0, None, []
        if not fresh:
            # Step 1 + 2. keys of every prefix; the longest one with a snapshot.
            keys, h = [], 0
            for inst in insts:
                h = _chain(h, inst, trace.decisions.get(inst), rv_index)
                keys.append(h)
            for k in range(len(keys) - 1, -1, -1):
                snap = self._prefix_cache.get(keys[k])
                if snap is not None:
                    sch, rv_list = snap[0].copy(), list(snap[1])
                    start = k + 1
                    self.stats["prefix_hits"] += 1
                    self.stats["insts_skipped"] += start
                    break
            h = keys[start - 1] if start else 0
        else:
            h = 0
        if sch is None:
            sch = Schedule(self.mod, seed=int(self.rng.integers(2**62)))
        rv_map = {id(order[j]): rv for j, rv in enumerate(rv_list)}
        # Step 3. apply the rest, snapshotting at divergence points.
        for k in range(start, len(insts)):
            inst = insts[k]
            if (inst.kind.is_sampling or inst.kind.name == "annotate") and k > 0:
                self._store_snapshot(h, sch, rv_list)
            inputs = [translate_rvs(x, rv_map) for x in inst.inputs]
            decision = None if fresh else trace.decisions.get(inst)
            outputs = inst.kind.apply(sch, inputs, list(inst.attrs), decision)
            if len(outputs) != len(inst.outputs):
                raise ValueError(f"replaying {inst.kind.name}: {len(outputs)} outputs, the trace has {len(inst.outputs)}")
            for old, new in zip(inst.outputs, outputs):
                rv_map[id(old)] = new
                rv_list.append(new)
            if inst.kind.is_sampling and fresh:
                decision = sch._trace.decisions.get(sch._trace.insts[-1])
            h = _chain(h, inst, decision, rv_index)
        self.stats["insts_applied"] += len(insts) - start
        self.stats["replays"] += 1
        return sch

    def _store_snapshot(self, key: int, sch: Any, rv_list: list) -> None:
        if key in self._prefix_cache:
            return
        if len(self._prefix_cache) >= self.prefix_cache_size:
            # FIFO eviction: the oldest prefixes belong to the oldest populations
            for old in list(self._prefix_cache)[: self.prefix_cache_size // 4]:
                del self._prefix_cache[old]
        self._prefix_cache[key] = (sch.copy(), tuple(rv_list))

    def take_fixed_candidates(self) -> "list[MeasureCandidate]":
        """The decision-free design-space members (e.g. the default schedule) and the seeded
        ones (with their own decisions) not measured yet, once per search (the first round
        starts from them).

        Example:
            >>> # first = strategy.take_fixed_candidates()   # [] after the first call
        """
        if not getattr(self, "_fixed_pending", False):
            return []
        self._fixed_pending = False
        out, seen = [], set(self.measured)
        for trace in self.fixed_traces + self.seeded_traces:
            cand = self.replay(trace)
            if cand is not None and cand.candidate_hash not in seen:
                seen.add(cand.candidate_hash)
                out.append(cand)
        return out

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
        """End of the search (frees memoized replays and cached prefixes)."""
        logger.info("search replays: %d (memoized %d, from a cached prefix %d; instructions applied %d, skipped %d)",
                    self.stats["replays"], self.stats["memo_hits"], self.stats["prefix_hits"],
                    self.stats["insts_applied"], self.stats["insts_skipped"])
        self._replay_cache.clear()
        self._prefix_cache.clear()


def _definition_order(insts: Sequence[Any]) -> list:
    """The output RVs of ``insts`` in the order they are defined."""
    return [o for inst in insts for o in inst.outputs]


def _sig(x: Any, rv_index: dict) -> Any:
    """A hashable, RV-name-free form of an input, attribute or decision."""
    if isinstance(x, (list, tuple)):
        return tuple(_sig(v, rv_index) for v in x)
    if isinstance(x, dict):
        return tuple(sorted((str(k), _sig(v, rv_index)) for k, v in x.items()))
    j = rv_index.get(id(x))
    if j is not None and not isinstance(x, (int, float, str, bool)) and x is not None:
        return ("rv", j)
    if hasattr(x, "item") and not isinstance(x, (int, float, str, bool)):
        return x.item()
    return x


def _chain(h: int, inst: Any, decision: Any, rv_index: dict) -> int:
    """The prefix key after ``inst``: a hash chained over the instructions so far."""
    return hash((h, inst.kind.name, _sig(inst.inputs, rv_index), _sig(inst.attrs, rv_index),
                 _sig(decision, rv_index)))


def _is_seeded(trace: Any) -> bool:
    """Whether a design-space trace annotates a block ``meta_schedule.seeded``."""
    return any(i.kind.name == "annotate" and len(i.inputs) >= 2 and i.inputs[1] == "meta_schedule.seeded"
               for i in trace.insts)
