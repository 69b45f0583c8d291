"""Runners: measure built candidates (timing + correctness) in a separate process.

Example:
    >>> from ingot.tune.runner import LocalRunner, RunnerConfig, RunnerInput
"""
from .base import FLUSH_MIN_REPEAT, FLUSH_POLICIES, SHORT_WINDOWS, Runner, RunnerConfig, RunnerInput, RunnerResult, flush_args
from .local import LocalRunner

__all__ = ["FLUSH_MIN_REPEAT", "FLUSH_POLICIES", "SHORT_WINDOWS", "flush_args", "Runner", "RunnerConfig", "RunnerInput", "RunnerResult", "LocalRunner"]
