"""`RandomModel`: random scores (a baseline, and the search when no model is wanted).

Example:
    >>> import numpy as np
    >>> RandomModel(seed=0).predict(np.zeros((3, 4))).shape
    (3,)
"""
from __future__ import annotations

import numpy as np

from .base import CostModel


class RandomModel(CostModel):
    """Uniform random predictions from a seeded generator; ``update`` ignores its data.

    Example:
        >>> m = RandomModel(seed=1); m.update(np.zeros((1, 2)), [1.0])
    """

    def __init__(self, seed: "int | None" = None):
        self._rng = np.random.default_rng(seed)

    is_trained = False  # scores carry no information: the search skips evolving on them

    def update(self, features, mean_secs) -> None:
        return None

    def predict(self, features) -> np.ndarray:
        return self._rng.random(len(features))
