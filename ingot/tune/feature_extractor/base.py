"""`FeatureExtractor`: scheduled candidate → fixed-length feature vector (for the cost model).

Example:
    >>> # X = PerStoreFeature().extract([sch.mod for sch in candidates])   # shape (n, dim)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np


class FeatureExtractor:
    """Base class: ``extract(mods) -> np.ndarray`` of shape ``(len(mods), dim)``.

    Example:
        >>> # FeatureExtractor subclasses define extract_one(mod) -> 1-D array
    """

    def extract(self, mods: Sequence[Any]) -> np.ndarray:
        return np.stack([self.extract_one(m) for m in mods]) if mods else np.zeros((0, 0), "float32")

    def extract_one(self, mod: Any) -> np.ndarray:
        raise NotImplementedError
