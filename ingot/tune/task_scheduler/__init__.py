"""Task schedulers: split the trial budget among tasks (round robin or gradient-based).

Example:
    >>> from ingot.tune.task_scheduler import RoundRobin, GradientBased, create
"""
from .base import TaskScheduler
from .gradient_based import GradientBased
from .progress import Progress, format_table
from .round_robin import RoundRobin


def create(kind: str):
    """The scheduler class for ``"round-robin"`` or ``"gradient"``.

    Example:
        >>> create("gradient").__name__
        'GradientBased'
    """
    if kind in ("round-robin", "round_robin", "roundrobin"):
        return RoundRobin
    if kind in ("gradient", "gradient-based", "gradient_based"):
        return GradientBased
    raise ValueError(f"unknown task scheduler {kind!r}; use 'round-robin' or 'gradient'")


__all__ = ["TaskScheduler", "RoundRobin", "GradientBased", "Progress", "format_table", "create"]
