"""Search strategies: which candidates to measure each round.

Example:
    >>> from ingot.tune.search_strategy import EvolutiveSearch, ReplayTrace, create
    >>> type(create("replay")).__name__
    'ReplayTrace'
"""
from .base import MeasureCandidate, SearchStrategy
from .evolutionary import EvolutiveSearch
from .replay_trace import ReplayTrace


def create(kind, seed=None) -> SearchStrategy:
    """A strategy from a name (``"evolutionary"``, ``"replay"``/``"replay-trace"``/``"random"``)
    or an instance.

    Example:
        >>> type(create("evolutionary")).__name__
        'EvolutiveSearch'
    """
    if isinstance(kind, SearchStrategy):
        return kind
    if kind in ("evolutionary", "evolutive"):
        return EvolutiveSearch(seed=seed)
    if kind in ("replay", "replay-trace", "replay_trace", "random"):
        return ReplayTrace(seed=seed)
    raise ValueError(f"unknown search strategy {kind!r}; use 'evolutionary' or 'replay', or pass a SearchStrategy")


__all__ = ["SearchStrategy", "MeasureCandidate", "EvolutiveSearch", "ReplayTrace", "create"]
