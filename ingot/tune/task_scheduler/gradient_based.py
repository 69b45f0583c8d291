"""`GradientBased`: give the next round to the task expected to cut the total latency most.

Note (Ansor's task scheduler, as in MetaSchedule): the objective is the weighted sum of the
tasks' best latencies. For task i with weight w_i and best latency l_i after its rounds, the
gradient of the objective with respect to more trials of i is estimated from
* the backward window: ``(l_i[now] - l_i[now - window]) / window`` (recent progress), and
* an optimistic forward guess: ``-l_i / trials_i`` (latency keeps falling in proportion),
mixed as ``alpha * backward + (1 - alpha) * forward`` and scaled by w_i; the most negative wins.
Every task first gets ``window`` warm-up rounds (round robin). Ties go to the lower index,
failing tasks (no valid candidate yet) are tried in round robin.

Example:
    >>> # GradientBased(tasks, builder, runner, db, max_trials_global=512, alpha=0.2, window_size=3)
"""
from __future__ import annotations

import math

from .base import TaskScheduler


class GradientBased(TaskScheduler):
    """See the module note.

    Example:
        >>> # sched = GradientBased(tasks, b, r, db, max_trials_global=256); sched.tune()
    """

    def __init__(self, *args, alpha: float = 0.2, window_size: int = 3, **kwargs):
        super().__init__(*args, **kwargs)
        self.alpha = float(alpha)
        self.window_size = int(window_size)

    def gradient(self, i: int) -> float:
        """Estimated change of the weighted total latency per round given to task ``i``."""
        hist = self.best_history[i]
        best = self.best_secs[i]
        if not math.isfinite(best):
            return -math.inf
        w = self.window_size
        back = (hist[-1] - hist[-1 - w]) / w if len(hist) > w and math.isfinite(hist[-1 - w]) else 0.0
        forward = -best / max(1, self.trials[i])
        return self.tasks[i].weight * (self.alpha * back + (1 - self.alpha) * forward)

    def next_task_id(self) -> int:
        alive = self._alive()
        if not alive:
            return -1
        warm = [i for i in alive if self.rounds[i] < self.window_size and len(self.best_history[i]) <= self.window_size]
        if warm:
            return min(warm, key=lambda i: (self.rounds[i], i))
        grads = {i: self.gradient(i) for i in alive}
        return min(alive, key=lambda i: (grads[i], i))
