"""`ReplayTrace`: random search — each round replays the design space with fresh decisions.

Example:
    >>> # tune_tir(mod, ..., strategy="replay")
"""
from __future__ import annotations

from .base import SearchStrategy


class ReplayTrace(SearchStrategy):
    """Random samples of the design space, never measuring one program twice.

    Example:
        >>> ReplayTrace(seed=0).seed
        0
    """

    def generate_measure_candidates(self, num):
        cands = self.take_fixed_candidates()[:num]
        cands += self.sample_random(num - len(cands), self.measured | {c.candidate_hash for c in cands})
        return cands or None
