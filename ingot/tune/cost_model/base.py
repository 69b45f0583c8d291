"""`CostModel`: predicts how good candidates are, trained online on measurements.

Example:
    >>> # model.update(features, run_secs); scores = model.predict(features)  # higher = faster
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


class CostModel:
    """Base class. ``update(X, mean_secs)`` adds measured candidates (``inf`` = failed);
    ``predict(X)`` returns one score per row, higher meaning expected faster.

    Example:
        >>> # class MyModel(CostModel): def predict(self, X): return -X[:, 0]
    """

    def update(self, features: np.ndarray, mean_secs: Sequence[float]) -> None:
        raise NotImplementedError

    def predict(self, features: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def rank_correlation(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman rank correlation of two sequences (ties get averaged ranks).

    Example:
        >>> rank_correlation([1, 2, 3], [10, 20, 30])
        1.0
    """
    ra, rb = _ranks(np.asarray(a, "float64")), _ranks(np.asarray(b, "float64"))
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))
    return float((ra * rb).sum() / denom) if denom > 0 else 0.0


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), "float64")
    ranks[order] = np.arange(len(x), dtype="float64")
    # average the ranks of ties
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.zeros(len(counts))
    np.add.at(sums, inverse, ranks)
    return sums[inverse] / counts[inverse]
