"""`EvolutiveSearch`: evolutionary search over traces guided by the cost model (TVM's default).

Note, one round:
Step 1. Population: the best measured records of the workload (replayed from the database,
   ``init_measured_ratio`` of the population) plus fresh random samples of the design space.
Step 2. Evolution, ``genetic_num_iters`` times: score the population with the cost model (one
   batched prediction), pick parents in proportion to their scores, mutate them (a mutator drawn
   by its probability) and replay; children with a new structural hash form the next
   population. Every candidate seen is kept with its score. While the cost model is untrained
   (first round) there is no evolution: random scores would only cost replays.
Defaults are smaller than TVM's (512 / 3 iterations) because replay runs the Python schedule
primitives (tens of milliseconds per candidate); replays are memoized by trace.
Step 3. Selection: the ``(1 - eps_greedy)`` share of the trials goes to the best-scored candidates
   not measured yet, the rest to random samples (exploration).

Example:
    >>> EvolutiveSearch(population_size=32).population_size
    32
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..mutator import DEFAULT_MUTATOR_PROBS
from .base import MeasureCandidate, SearchStrategy


class EvolutiveSearch(SearchStrategy):
    """See the module note for the algorithm.

    Example:
        >>> EvolutiveSearch(genetic_num_iters=2, eps_greedy=0.05).eps_greedy
        0.05
    """

    def __init__(self, population_size: int = 64, init_measured_ratio: float = 0.2,
                 genetic_num_iters: int = 2, genetic_mutate_prob: float = 0.85, eps_greedy: float = 0.05,
                 seed: "int | None" = None):
        super().__init__(seed)
        self.population_size = int(population_size)
        self.init_measured_ratio = float(init_measured_ratio)
        self.genetic_num_iters = int(genetic_num_iters)
        self.genetic_mutate_prob = float(genetic_mutate_prob)
        self.eps_greedy = float(eps_greedy)

    def _measured_seeds(self, num: int) -> "list[MeasureCandidate]":
        if self.database is None or num <= 0:
            return []
        out = []
        for rec in self.database.get_top_k(self.context.mod, num, self.context.target):
            try:
                cand = self.replay(rec.trace.simplified(remove_postproc=True))
            except Exception:
                cand = None
            if cand is not None:
                out.append(cand)
        return out

    def _score(self, cands: "list[MeasureCandidate]") -> np.ndarray:
        if self.cost_model is None or not cands:
            return self.rng.random(len(cands))
        feats = self.context.feature_extractor.extract([c.sch.mod for c in cands], [c.candidate_hash for c in cands])
        return np.asarray(self.cost_model.predict(feats), "float64")

    def _mutate(self, cand: MeasureCandidate) -> "Optional[MeasureCandidate]":
        mutators = self.space.mutators
        if not mutators:
            return None
        probs = np.array([DEFAULT_MUTATOR_PROBS.get(type(m).__name__, 0.1) for m in mutators])
        trace = cand.sch.trace.simplified(remove_postproc=True)
        for _ in range(4):
            m = mutators[int(self.rng.choice(len(mutators), p=probs / probs.sum()))]
            new = m.apply(trace, self.rng)
            if new is not None:
                return self.replay(new)
        return None

    def generate_measure_candidates(self, num):
        # Step 1. initial population (the first round also holds the fixed design-space members,
        # e.g. the default schedule, which are measured in any case)
        fixed = self.take_fixed_candidates()[:num]
        n_measured = int(self.population_size * self.init_measured_ratio)
        population = fixed + self._measured_seeds(n_measured)
        seen = {c.candidate_hash for c in population}
        population += self.sample_random(self.population_size - len(population), seen)
        if not population:
            return None
        pool: dict[str, tuple[MeasureCandidate, float]] = {}
        # Step 2. evolution (skipped while the cost model is untrained: evolving on random scores
        # only spends replays; the first round is then the random population itself)
        informed = self.cost_model is not None and getattr(self.cost_model, "is_trained", True)
        iters = self.genetic_num_iters if informed else 0
        for it in range(iters + 1):
            scores = self._score(population)
            for c, s in zip(population, scores):
                pool[c.candidate_hash] = (c, float(s))
            if it == iters:
                break
            weights = np.maximum(scores - scores.min(), 0) + 1e-6
            weights = weights / weights.sum()
            children: list = []
            child_hashes: set = set()
            attempts = 0
            while len(children) < self.population_size and attempts < 3 * self.population_size:
                attempts += 1
                parent = population[int(self.rng.choice(len(population), p=weights))]
                child = self._mutate(parent) if self.rng.random() < self.genetic_mutate_prob else parent
                if child is None or child.candidate_hash in child_hashes:
                    continue
                child_hashes.add(child.candidate_hash)
                children.append(child)
            if not children:
                break
            population = children
        # Step 3. epsilon-greedy selection of unmeasured candidates
        fixed_hashes = {c.candidate_hash for c in fixed}
        ranked = sorted((v for h, v in pool.items() if h not in self.measured and h not in fixed_hashes),
                        key=lambda v: -v[1])
        n_random = int(round(num * self.eps_greedy))
        chosen = fixed + [c for c, _ in ranked[: max(0, num - n_random - len(fixed))]]
        taken = {c.candidate_hash for c in chosen} | self.measured
        chosen += self.sample_random(num - len(chosen), taken)
        return chosen or None
