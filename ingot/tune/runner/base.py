"""`Runner`: measures built candidates (TVM's ``ms.Runner``).

Example:
    >>> RunnerResult(run_secs=[1e-3]).ok
    True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence


@dataclass(frozen=True)
class RunnerConfig:
    """How to measure (TVM's evaluator config) and when to give up.

    ``number``/``repeat``/``min_repeat_ms``: as `Module.time_evaluator`. ``timeout_s``: limit for
    one candidate (check + timing); a candidate over it is recorded as a hang.
    ``check_correctness``: compare outputs with the unscheduled function's on random inputs.
    ``rtol``/``atol``: tolerances of that check (``atol`` is relative to the largest reference value).
    ``slow_cutoff``: a candidate whose first (checking) run already takes more than this many
    times the workload's best mean so far, and more than ``min_repeat_ms``, is not timed again:
    that run is its measurement (it cannot win; timing it ``number`` more times would only cost
    trials/s — the slowest random samples dominate the run phase). 0 disables.

    Example:
        >>> RunnerConfig(number=5).repeat
        1
    """

    number: int = 3
    repeat: int = 1
    min_repeat_ms: int = 20
    timeout_s: float = 10.0
    check_correctness: bool = True
    rtol: float = 1e-3
    atol: float = 1e-4
    slow_cutoff: float = 5.0


@dataclass(frozen=True)
class RunnerInput:
    """One candidate to measure.

    ``artifact_path``: the shared library. ``args_info``: `ArgInfo` (or (dtype, shape)) per
    tensor parameter. ``reference_path``: a library of the unscheduled function with the same
    signature (None: no correctness check). ``workload_key``: caches random inputs and reference
    outputs per workload. ``num_threads``: threads for parallel loops.

    Example:
        >>> # RunnerInput("/tmp/c.so", [ArgInfo("float32", (64, 64))] * 3, "/tmp/ref.so", wl.shash)
    """

    artifact_path: str
    args_info: Sequence[Any]
    reference_path: Optional[str] = None
    workload_key: str = ""
    func_name: str = "main"
    num_threads: int = 0


@dataclass(frozen=True)
class RunnerResult:
    """Measured seconds per repeat, or the error (crash, hang, wrong result, load failure).

    Example:
        >>> RunnerResult(error_msg="RunnerError: crashed (SIGSEGV)").ok
        False
    """

    run_secs: Optional[list] = None
    error_msg: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.run_secs is not None and self.error_msg is None


class Runner:
    """Base class: ``run(inputs) -> results`` (same order).

    Example:
        >>> # results = runner.run([RunnerInput(path, args_info)])
    """

    def run(self, inputs: Sequence[RunnerInput]) -> "list[RunnerResult]":
        raise NotImplementedError

    def shutdown(self) -> None:
        """Release the measuring process (no-op by default)."""
