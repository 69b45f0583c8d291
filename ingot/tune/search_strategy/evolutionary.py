"""`EvolutiveSearch`: evolutionary search over traces guided by the cost model (TVM's default).

Note, one round:
Step 1. Population: the best measured records of the workload that have decisions to mutate
   (replayed from the database, ``init_measured_ratio`` of the population) plus fresh random
   samples of the design space.
Step 2. Evolution, ``genetic_num_iters`` times: score the population with the cost model (one
   batched prediction; a measured member is ranked by its measured speed instead: the seeds get
   their own predicted scores reassigned in measured order), pick parents by rank (exponential
   weights: the top quarter of the population parents about 2/3 of the children), mutate them
   (a mutator drawn by its probability) and replay. The next population is the children plus the
   ``elite_ratio`` best members of the current one, so the measured-good traces stay parents in
   every generation instead of being replaced by their first children. Every candidate seen is
   kept with its score. While the cost model is untrained (first round) there is no evolution:
   random scores would only cost replays.
Step 3. Selection: the ``(1 - eps_greedy)`` share of the trials goes to the best-scored candidates
   not measured yet — at least ``local_ratio`` of them descendants of the measured seeds when the
   pool has them (local refinement of what measured fastest) — the rest to random samples
   (exploration).

Why the elites and rank weights (issue #4): the former version replaced the population by its
children after each generation and drew parents in proportion to ``score - min(score)`` (almost
uniform over standardized scores), so after two generations the measured seeds were gone and
the children of random samples filled the picks: per-round means fell round after round on a
1000-trial GEMM run. Each round's origin of the picks (children of measured seeds, of random
samples, random), the mutators that made them and the predicted-vs-measured rank correlation
are logged (``evolutionary round ...`` lines at INFO, see ``round_log``).

Defaults are smaller than TVM's (512 / 3 iterations) because replay runs the Python schedule
primitives (tens of milliseconds per candidate); replays are memoized by trace and restart
from the longest cached prefix (see `SearchStrategy.replay`).

Example:
    >>> EvolutiveSearch(population_size=32).population_size
    32
"""
from __future__ import annotations

import logging
import math
import time
from typing import Optional

import numpy as np

from ..mutator import DEFAULT_MUTATOR_PROBS
from .base import MeasureCandidate, SearchStrategy

logger = logging.getLogger("ingot.tune")


class EvolutiveSearch(SearchStrategy):
    """See the module note for the algorithm.

    Example:
        >>> EvolutiveSearch(genetic_num_iters=2, eps_greedy=0.05).eps_greedy
        0.05
    """

    def __init__(self, population_size: int = 64, init_measured_ratio: float = 0.25,
                 genetic_num_iters: int = 3, genetic_mutate_prob: float = 0.85, eps_greedy: float = 0.05,
                 elite_ratio: float = 0.25, local_ratio: float = 0.5, seed: "int | None" = None):
        super().__init__(seed)
        if population_size < 2:
            raise ValueError(f"EvolutiveSearch: population_size must be >= 2, got {population_size}")
        self.population_size = int(population_size)
        self.init_measured_ratio = float(init_measured_ratio)
        self.genetic_num_iters = int(genetic_num_iters)
        self.genetic_mutate_prob = float(genetic_mutate_prob)
        self.eps_greedy = float(eps_greedy)
        self.elite_ratio = float(elite_ratio)
        self.local_ratio = float(local_ratio)
        self.round_log: list = []   # one dict per round (see `_log_round`)
        self._origin: dict = {}     # candidate hash -> (root: "seed"/"random", last mutator or "")
        self._picked: dict = {}     # candidate hash -> predicted score, for the rank check in notify
        self._carry: list = []      # best-scored unmeasured candidates of the last round
        self._n_children_measured = 0

    # -- population ----------------------------------------------------------------------------------
    def _measured_seeds(self, num: int) -> "list[tuple[MeasureCandidate, float]]":
        """The ``num`` fastest measured records with decisions, replayed: (candidate, mean secs).

        A decision-free record (the default schedule) has nothing to mutate and is skipped. A
        replay whose structural hash differs from the recorded one is counted
        (``stats["seed_mismatch"]``): its children would not be neighbours of what was measured.
        """
        if self.database is None or num <= 0:
            return []
        out = []
        for rec in self.database.get_top_k(self.context.mod, 4 * num, self.context.target):
            if len(out) >= num:
                break
            try:
                trace = rec.trace.simplified(remove_postproc=True)
                cand = self.replay(trace) if trace.decisions else None
            except Exception:
                cand = None
            if cand is None:
                continue
            if rec.candidate_hash and cand.candidate_hash != rec.candidate_hash:
                self.stats["seed_mismatch"] = self.stats.get("seed_mismatch", 0) + 1
            out.append((cand, rec.mean_sec))
        return out

    def _score(self, cands: "list[MeasureCandidate]") -> np.ndarray:
        if self.cost_model is None or not cands:
            return self.rng.random(len(cands))
        feats = self.context.feature_extractor.extract([c.sch.mod for c in cands], [c.candidate_hash for c in cands])
        return np.asarray(self.cost_model.predict(feats), "float64")

    def _mutate(self, cand: MeasureCandidate) -> "tuple[Optional[MeasureCandidate], str]":
        """A child of ``cand`` with another program (None if 4 draws change nothing) and the
        mutator that made it."""
        mutators = self.space.mutators
        if not mutators:
            return None, ""
        probs = np.array([DEFAULT_MUTATOR_PROBS.get(type(m).__name__, 0.1) for m in mutators])
        trace = cand.sch.trace.simplified(remove_postproc=True)
        for _ in range(4):
            m = mutators[int(self.rng.choice(len(mutators), p=probs / probs.sum()))]
            new = m.apply(trace, self.rng)
            if new is None:
                continue
            child = self.replay(new)
            # a decision that leaves the program unchanged (e.g. a parallel limit above the
            # fused extent) is no child: draw again
            if child is not None and child.candidate_hash != cand.candidate_hash:
                return child, type(m).__name__
        return None, ""

    @staticmethod
    def _rank_weights(keys: np.ndarray) -> np.ndarray:
        """Parent probabilities from ranks: ``exp(-rank / (n / 4))``, normalized."""
        order = np.argsort(-keys, kind="stable")
        ranks = np.empty(len(keys))
        ranks[order] = np.arange(len(keys))
        w = np.exp(-ranks / max(1.0, len(keys) / 4.0))
        return w / w.sum()

    def _evolve(self, population: list, seed_secs: dict, pool: dict) -> None:
        """Step 2: ``genetic_num_iters`` generations; every scored candidate goes to ``pool``.

        A generation's quota (``population_size - n_elite`` children) counts unmeasured children
        only. A child already measured is kept as a stepping stone (up to ``n_elite`` of them:
        its own children are two mutations from the parent) but fills no slot: once the search
        has converged most one-mutation children of the elites are measured, and when they
        filled the quota the pool held about as many unmeasured candidates as the round needed,
        so Step 3 took all of them, poorly scored random members included (issue #4: per-round
        means fell from ~250 to ~120 GFLOP/s after round 5 of a 1000-trial GEMM run).
        """
        informed = self.cost_model is not None and getattr(self.cost_model, "is_trained", True)
        iters = self.genetic_num_iters if informed else 0
        n_elite = max(1, int(round(self.population_size * self.elite_ratio)))
        quota = self.population_size - n_elite
        for it in range(iters + 1):
            scores = self._score(population)
            for c, s in zip(population, scores):
                pool[c.candidate_hash] = (c, float(s))
            if it == iters:
                break
            keys = _measured_first(population, scores, seed_secs)
            weights = self._rank_weights(keys)
            children: list = []
            stepping: list = []
            seen = {c.candidate_hash for c in population}
            attempts = 0
            # measured children are cheap (memoized replays) but cost attempts: allow more
            while len(children) < quota and attempts < 6 * self.population_size:
                attempts += 1
                parent = population[int(self.rng.choice(len(population), p=weights))]
                if self.rng.random() >= self.genetic_mutate_prob:
                    continue  # TVM keeps the parent unmutated here; it is already in the population
                child, how = self._mutate(parent)
                if child is None or child.candidate_hash in seen:
                    continue
                seen.add(child.candidate_hash)
                root = self._origin.get(parent.candidate_hash, ("random", ""))[0]
                self._origin.setdefault(child.candidate_hash, (root, how))
                if child.candidate_hash in self.measured:
                    # counted because it shows the neighbourhood running out
                    self._n_children_measured += 1
                    if len(stepping) < n_elite:
                        stepping.append(child)
                    continue
                children.append(child)
            if not children and not stepping:
                break
            elites = [population[j] for j in np.argsort(-keys, kind="stable")[:n_elite]]
            population = elites + children + stepping

    def generate_measure_candidates(self, num):
        t0 = time.perf_counter()
        # Step 1. initial population (the first round also holds the fixed design-space members,
        # e.g. the default schedule, which are measured in any case)
        fixed = self.take_fixed_candidates()[:num]
        n_measured = int(self.population_size * self.init_measured_ratio)
        seeds = self._measured_seeds(n_measured)
        seed_secs = {c.candidate_hash: s for c, s in seeds}
        for c, _ in seeds:
            self._origin[c.candidate_hash] = ("seed", "")
        population = fixed + [c for c, _ in seeds if c.candidate_hash not in {f.candidate_hash for f in fixed}]
        # the best-scored unmeasured candidates of the last round come back (their replay is
        # free and the retrained model rescores them); fresh random samples fill the rest, at
        # least a quarter of the population (diversity)
        seen = {c.candidate_hash for c in population}
        carry = [c for c in self._carry if c.candidate_hash not in seen and c.candidate_hash not in self.measured]
        carry = carry[: max(0, self.population_size - len(population) - self.population_size // 4)]
        population += carry
        seen |= {c.candidate_hash for c in carry}
        randoms = self.sample_random(self.population_size - len(population), seen)
        for c in randoms:
            self._origin.setdefault(c.candidate_hash, ("random", ""))
        population += randoms
        if not population:
            return None
        pool: dict[str, tuple[MeasureCandidate, float]] = {}
        self._n_children_measured = 0
        # Step 2. evolution (skipped while the cost model is untrained)
        self._evolve(population, seed_secs, pool)
        # Step 3. epsilon-greedy selection of unmeasured candidates
        fixed_hashes = {c.candidate_hash for c in fixed}
        ranked = sorted((v for h, v in pool.items() if h not in self.measured and h not in fixed_hashes),
                        key=lambda v: -v[1])
        n_random = int(round(num * self.eps_greedy))
        greedy = self._select(ranked, max(0, num - n_random - len(fixed)))
        chosen = fixed + [c for c, _ in greedy]
        taken = {c.candidate_hash for c in chosen} | self.measured
        # exploration: random population members nobody picked (already replayed), then fresh ones
        spare = [c for c in randoms if c.candidate_hash not in taken]
        explore = [spare[int(j)] for j in self.rng.permutation(len(spare))[: max(0, num - len(chosen))]]
        taken |= {c.candidate_hash for c in explore}
        explore += self.sample_random(num - len(chosen) - len(explore), taken)
        self._carry = [c for c, _ in ranked if c.candidate_hash not in taken][: self.population_size // 2]
        chosen += explore
        self._picked = {c.candidate_hash: s for c, s in greedy}
        self._log_round(greedy, explore, len(seeds), len(pool), len(ranked), time.perf_counter() - t0)
        return chosen or None

    def _select(self, ranked: list, n: int) -> list:
        """The ``n`` best-scored candidates, of which at least ``local_ratio`` (when there are
        enough) are descendants of measured seeds: the neighbourhood of what measured fastest is
        refined every round even when the model scores a far-away region higher (its
        extrapolation there is the least trustworthy part of its ranking)."""
        n_local = int(round(n * self.local_ratio))
        local = [v for v in ranked if self._origin.get(v[0].candidate_hash, ("", ""))[0] == "seed"][:n_local]
        taken = {v[0].candidate_hash for v in local}
        rest = [v for v in ranked if v[0].candidate_hash not in taken][: n - len(local)]
        return sorted(local + rest, key=lambda v: -v[1])

    # -- diagnostics ---------------------------------------------------------------------------------
    def _log_round(self, greedy: list, explore: list, n_seeds: int, n_pool: int, n_unmeasured: int,
                   secs: float) -> None:
        """Record where this round's picks come from (issue #4's evidence) in ``round_log``."""
        origin: dict = {}
        mutators: dict = {}
        for c, _ in greedy:
            root, how = self._origin.get(c.candidate_hash, ("random", ""))
            tag = f"{root}-child" if how else root
            origin[tag] = origin.get(tag, 0) + 1
            if how:
                mutators[how] = mutators.get(how, 0) + 1
        entry = {"round": len(self.round_log) + 1, "seeds": n_seeds, "pool": n_pool, "unmeasured": n_unmeasured,
                 "origin": origin,
                 "mutators": mutators, "explore": len(explore), "children_measured": self._n_children_measured,
                 "search_s": round(secs, 3)}
        self.round_log.append(entry)
        logger.info("evolutionary round %d: %d measured seeds, %d scored (%d unmeasured, %d children already "
                    "measured); picks %s, eps-random %d; mutators %s; search %.2f s", entry["round"], n_seeds, n_pool,
                    n_unmeasured, self._n_children_measured, origin, len(explore), mutators, secs)

    def notify_runner_results(self, candidates, mean_secs) -> None:
        """Also logs how the model-guided picks ranked: Spearman of predicted score against the
        measured throughput, and how many beat the best measured before this round.

        Example:
            >>> # strategy.notify_runner_results(cands, secs); strategy.round_log[-1]["pred_vs_measured_spearman"]
        """
        from ..cost_model import rank_correlation

        prev_best = getattr(self, "_best_secs", math.inf)
        pred, tput = [], []
        for c, s in zip(candidates, mean_secs):
            if c.candidate_hash in self._picked:
                pred.append(self._picked[c.candidate_hash])
                tput.append(1.0 / s if math.isfinite(s) and s > 0 else 0.0)
        finite = [s for s in mean_secs if math.isfinite(s)]
        self._best_secs = min([prev_best] + finite)
        if self.round_log and pred:
            rho = rank_correlation(pred, tput) if len(pred) > 2 else float("nan")
            better = sum(1 for t in tput if t > 0 and 1.0 / t < prev_best)
            self.round_log[-1].update({"pred_vs_measured_spearman": round(rho, 3), "beat_previous_best": better})
            logger.info("evolutionary round %d: predicted vs measured rank of the picks: Spearman %.2f; "
                        "%d beat the previous best", self.round_log[-1]["round"], rho, better)
        super().notify_runner_results(candidates, mean_secs)


def _measured_first(population: list, scores: np.ndarray, seed_secs: dict) -> np.ndarray:
    """Ranking keys: the model's scores, with the measured seeds' own scores reassigned in order
    of measured speed (the fastest measured seed gets the highest of their predictions): the
    measurement is the better judge of a measured trace, the model's scale is kept."""
    keys = np.array(scores, "float64")
    idx = [j for j, c in enumerate(population) if c.candidate_hash in seed_secs]
    if len(idx) > 1:
        by_speed = sorted(idx, key=lambda j: seed_secs[population[j].candidate_hash])
        for j, s in zip(by_speed, sorted((keys[j] for j in idx), reverse=True)):
            keys[j] = s
    return keys
