"""`RoundRobin`: tasks take turns.

Example:
    >>> # RoundRobin(tasks, builder, runner, db, max_trials_global=64).tune()
"""
from __future__ import annotations

from .base import TaskScheduler


class RoundRobin(TaskScheduler):
    """Each round goes to the next task that is not done.

    Example:
        >>> # sched = RoundRobin(tasks, ...); sched.next_task_id() -> 0, then 1, ...
    """

    _cursor = -1

    def next_task_id(self) -> int:
        n = len(self.tasks)
        for step in range(1, n + 1):
            i = (self._cursor + step) % n
            if not self.done[i]:
                self._cursor = i
                return i
        return -1
