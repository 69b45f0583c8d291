"""Cost models: rank candidates before measuring them.

Example:
    >>> from ingot.tune.cost_model import XGBModel, RandomModel, rank_correlation
"""
from .base import CostModel, rank_correlation
from .random_model import RandomModel
from .xgb import XGBModel, normalized_throughput

__all__ = ["CostModel", "RandomModel", "XGBModel", "rank_correlation", "normalized_throughput"]
