"""`Runner`: measures built candidates (TVM's ``ms.Runner``).

Example:
    >>> RunnerResult(run_secs=[1e-3]).ok
    True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence


#: Fewest single-call repeats of a cold-cache measurement (`RunnerConfig.cache_flush`): one call is
#: a short window, which other processes disturb less often than a long one, but a single window
#: can still be hit; the fastest of 10 is the robust figure.
FLUSH_MIN_REPEAT = 10


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
    ``cache_flush``: time with cold caches (TVM's ``enable_cpu_cache_flush``): each repeat is ONE
    call, preceded (outside the timed region) by a flush of every argument but the first, which
    is where a kernel's weights and output are on each run of a model; ``number`` and
    ``min_repeat_ms`` do not apply, and at least `FLUSH_MIN_REPEAT` repeats are taken so that
    the fastest of them (the figure the model scheduler keeps) is stable. Per candidate this costs
    about ``repeat`` x (flush + one call); a flush takes about 0.2 ms per MB of arguments
    (clflushopt; measured 3 ms for 16 MB on the 2-core Xeon under load).

    Example:
        >>> RunnerConfig(number=5).repeat
        1
        >>> RunnerConfig(cache_flush=True).timing()
        {'number': 1, 'repeat': 10, 'min_repeat_ms': 0, 'cache_flush': True}
    """

    number: int = 3
    repeat: int = 1
    min_repeat_ms: int = 20
    timeout_s: float = 10.0
    check_correctness: bool = True
    rtol: float = 1e-3
    atol: float = 1e-4
    slow_cutoff: float = 5.0
    cache_flush: bool = False

    def timing(self) -> dict:
        """The ``time_evaluator`` arguments this config measures with (see ``cache_flush``).

        Example:
            >>> RunnerConfig(number=3, repeat=20, min_repeat_ms=1).timing()["number"]
            3
        """
        if self.cache_flush:
            return dict(number=1, repeat=max(int(self.repeat), FLUSH_MIN_REPEAT), min_repeat_ms=0, cache_flush=True)
        return dict(number=self.number, repeat=self.repeat, min_repeat_ms=self.min_repeat_ms, cache_flush=False)


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
