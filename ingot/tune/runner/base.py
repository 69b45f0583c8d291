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


#: How `ingot.tune.tune_tir` / `tune_tasks` time candidates when given no ``runner_config``:
#: warm, 10 windows of at least 2 ms each (one call per window at least), the fastest window
#: recorded (record ``kept="min"``). On a shared 2-core machine a single long window (the
#: `RunnerConfig` default: 3 calls, 20 ms) catches any time slice another process takes, and a
#: 2-thread kernel loses a whole slice (milliseconds) whenever its second thread is descheduled:
#: at load 1.5 the 128³ GEMM's 2-thread windows ranged 24-340 µs, the fastest of short windows
#: stayed within a few percent. Per candidate this costs about what the default did (20 ms) for
#: kernels under 2 ms, and 10 calls for longer ones.
SHORT_WINDOWS = dict(number=1, repeat=10, min_repeat_ms=2)


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
    call, preceded (outside the timed region) by a flush of some arguments (`FLUSH_POLICIES`):
    ``True`` every argument but the first (TVM's ``cache_flush_cpu_non_first_arg``),
    ``"weights"`` exactly the candidate's `RunnerInput.weight_args` (the kernel parameters bound
    to model constants: cold inside a model, where activations are hot), ``"weights+outputs"``
    those and its `RunnerInput.output_args`; ``number`` and
    ``min_repeat_ms`` do not apply, and at least `FLUSH_MIN_REPEAT` repeats are taken so that
    the fastest of them (the figure the model scheduler keeps) is stable. Per candidate this costs
    about ``repeat`` x (flush + one call); a flush takes about 0.2 ms per MB of arguments
    (clflushopt; measured 3 ms for 16 MB on the 2-core Xeon under load).

    Example:
        >>> RunnerConfig(number=5).repeat
        1
        >>> RunnerConfig(cache_flush=True).timing()
        {'number': 1, 'repeat': 10, 'min_repeat_ms': 0, 'cache_flush': True}
        >>> RunnerConfig(cache_flush="weights").timing(RunnerInput("k.so", [], weight_args=(1, 2)))["cache_flush"]
        [1, 2]
    """

    number: int = 3
    repeat: int = 1
    min_repeat_ms: int = 20
    timeout_s: float = 10.0
    check_correctness: bool = True
    rtol: float = 1e-3
    atol: float = 1e-4
    slow_cutoff: float = 5.0
    cache_flush: "bool | str" = False

    def __post_init__(self) -> None:
        if self.cache_flush not in FLUSH_POLICIES:
            raise ValueError(f"RunnerConfig: cache_flush must be one of {list(FLUSH_POLICIES)}, got "
                             f"{self.cache_flush!r}")

    def timing(self, inp: "RunnerInput | None" = None) -> dict:
        """The ``time_evaluator`` arguments this config measures ``inp`` with (see ``cache_flush``;
        the ``"weights"`` policies need ``inp`` with its ``weight_args``).

        Example:
            >>> RunnerConfig(number=3, repeat=20, min_repeat_ms=1).timing()["number"]
            3
        """
        if self.cache_flush is False:
            return dict(number=self.number, repeat=self.repeat, min_repeat_ms=self.min_repeat_ms, cache_flush=False)
        return dict(number=1, repeat=max(int(self.repeat), FLUSH_MIN_REPEAT), min_repeat_ms=0,
                    cache_flush=flush_args(self.cache_flush, inp))


#: The values of `RunnerConfig.cache_flush`: False (warm, back-to-back calls), True (TVM's: every
#: argument but the first), "weights" (the kernel's constants: what is cold inside a model),
#: "weights+outputs" (also its outputs).
FLUSH_POLICIES = (False, True, "weights", "weights+outputs")


def flush_args(policy: "bool | str", inp: "RunnerInput | None") -> "bool | list[int]":
    """The ``time_evaluator(cache_flush=...)`` value of a flush ``policy`` for candidate ``inp``.

    Example:
        >>> flush_args("weights+outputs", RunnerInput("k.so", [], weight_args=(1,), output_args=(3,)))
        [1, 3]
    """
    if policy is True or policy is False:
        return policy
    weights = None if inp is None else inp.weight_args
    if weights is None:
        raise ValueError(f"RunnerConfig(cache_flush={policy!r}) needs the kernel's weight arguments "
                         "(RunnerInput.weight_args; model tuning sets them from the graph); time a single "
                         "kernel with cache_flush=True (every argument but the first) instead")
    picked = set(weights)
    if policy == "weights+outputs":
        picked |= set(inp.output_args or ())
    return sorted(picked)


@dataclass(frozen=True)
class RunnerInput:
    """One candidate to measure.

    ``artifact_path``: the shared library. ``args_info``: `ArgInfo` (or (dtype, shape)) per
    tensor parameter. ``reference_path``: a library of the unscheduled function with the same
    signature (None: no correctness check). ``workload_key``: caches random inputs and reference
    outputs per workload. ``num_threads``: threads for parallel loops. ``weight_args`` /
    ``output_args``: positions of the kernel's weights (parameters bound to model constants) and
    outputs, for the ``"weights"`` flush policies of `RunnerConfig.cache_flush` (None: unknown).

    Example:
        >>> # RunnerInput("/tmp/c.so", [ArgInfo("float32", (64, 64))] * 3, "/tmp/ref.so", wl.shash)
    """

    artifact_path: str
    args_info: Sequence[Any]
    reference_path: Optional[str] = None
    workload_key: str = ""
    func_name: str = "main"
    num_threads: int = 0
    weight_args: Optional[tuple] = None
    output_args: Optional[tuple] = None


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
