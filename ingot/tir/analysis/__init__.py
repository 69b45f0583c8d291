"""`ingot.tir.analysis`: analyses over TensorIR (block access regions, is the module lowered, ...).

Example:
    >>> from ingot.tir.analysis import infer_block_access_regions
"""
from .access_regions import infer_block_access_regions
from .lowered import is_lowered

__all__ = ["infer_block_access_regions", "is_lowered"]
