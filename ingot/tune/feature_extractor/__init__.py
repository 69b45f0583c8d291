"""Feature extractors: scheduled candidate → fixed-length vector for the cost model.

Example:
    >>> from ingot.tune.feature_extractor import PerStoreFeature
"""
from .base import FeatureExtractor
from .per_store import PerStoreFeature

__all__ = ["FeatureExtractor", "PerStoreFeature"]
