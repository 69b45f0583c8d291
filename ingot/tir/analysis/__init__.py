"""`ingot.tir.analysis`: analyses over TensorIR (block access regions, ...).

Example:
    >>> from ingot.tir.analysis import infer_block_access_regions
"""
from .access_regions import infer_block_access_regions

__all__ = ["infer_block_access_regions"]
