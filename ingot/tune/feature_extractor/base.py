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

    def extract(self, mods: Sequence[Any], keys: "Sequence[str] | None" = None) -> np.ndarray:
        """Stack the features of ``mods`` (``keys``: their structural hashes, for memoization)."""
        if not mods:
            return np.zeros((0, getattr(self, "dim", 0)), "float32")
        keys = list(keys) if keys is not None else [None] * len(mods)
        return np.stack([self.extract_one(m, k) for m, k in zip(mods, keys)])

    def extract_one(self, mod: Any, key: "str | None" = None) -> np.ndarray:
        raise NotImplementedError
