"""Runners: measure built candidates (timing + correctness) in a separate process.

Example:
    >>> from ingot.tune.runner import LocalRunner, RunnerConfig, RunnerInput
"""
from .base import FLUSH_MIN_REPEAT, Runner, RunnerConfig, RunnerInput, RunnerResult
from .local import LocalRunner

__all__ = ["FLUSH_MIN_REPEAT", "Runner", "RunnerConfig", "RunnerInput", "RunnerResult", "LocalRunner"]
