"""Builders: scheduled candidate → shared library.

Example:
    >>> from ingot.tune.builder import LocalBuilder, BuilderInput
"""
from .base import Builder, BuilderInput, BuilderResult
from .local import LocalBuilder, build_candidate

__all__ = ["Builder", "BuilderInput", "BuilderResult", "LocalBuilder", "build_candidate"]
