"""`Workload`, `TuningRecord`, `ArgInfo`: what the tuning database stores.

Note (record format, schema version 2): a record is one measured candidate of one workload on
one target. It keeps the trace (JSON, see `ingot.tir.schedule.Trace.as_json`) rather than the
scheduled IR, because the trace replays on the workload to rebuild the schedule and is small.
``run_secs`` is the list of measured seconds (one entry per repeat) or ``None`` when the
candidate failed (build error, crash, hang, wrong result; ``error_msg`` says which). Failed
records are kept so that a resumed search does not measure the same bad candidate again.
``candidate_hash`` is the structural hash of the scheduled module (dedup across runs).

Note (how it was timed, new in schema version 2): ``measure`` is the runner's timing config,
``{"cache_flush", "number", "repeat", "min_repeat_ms", "kept"}`` (`measurement`). Times taken
under two cache-flush policies are not comparable: ResNet-50's kernels ran 1.1-1.7x faster warm
than with their weights flushed (docs/tuning.md), so a warm record would "win" by the way it was
timed. The flush policy (`TuningRecord.cache_flush`) is therefore part of a record's identity
(`dedup_key`) and the database picks a best only among records of one policy. ``number``,
``repeat``, ``min_repeat_ms`` and ``kept`` (``"min"``: the fastest repeat was stored, as the
model tuner does; ``"all"``: every repeat, `mean_sec` averages them) are kept for the reader:
they change the noise of a figure by a few percent, not what is measured, so they do not split
records. The thread count is the target's ``-num-cores`` (part of `tuning_target_key`). Records
of schema version 1 have no ``measure``: their policy is `UNKNOWN_FLUSH` (model work dirs of
session 4 timed with "weights", `ingot.tune.tune_tir` warm; only their ``tasks.json`` says).

Example:
    >>> r = TuningRecord({"version": 1, "insts": [], "decisions": []}, "ab12", [1e-3, 2e-3], "llvm")
    >>> r.mean_sec
    0.0015
    >>> TuningRecord.from_json(r.as_json()).run_secs
    [0.001, 0.002]
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

SCHEMA_VERSION = 2

#: The cache-flush policy of a record that does not say (schema version 1): never compared with
#: records of a known policy.
UNKNOWN_FLUSH = "unknown"

#: The "policy" of in-model validation records (`ingot.workflow.validate`): a kernel's time summed
#: over its calls inside the compiled model, default and tuned packages timed in turn. Never a
#: runner's policy: the tuner never compares these times with its own (a different quantity).
IN_MODEL = "in-model"

#: What `measurement` records: `RunnerConfig` fields that describe how a time was taken.
MEASURE_FIELDS = ("cache_flush", "number", "repeat", "min_repeat_ms")


def measurement(config: Any, kept: str = "all") -> "dict | None":
    """The ``measure`` of records timed by a runner with `RunnerConfig` ``config`` (or a runner
    holding one as ``.config``); ``kept`` says which repeats the record stores (``"min"``: the
    fastest, ``"all"``: every one). None when ``config`` says nothing (a custom runner): such
    records are of `UNKNOWN_FLUSH` policy.

    Example:
        >>> from ingot.tune.runner import RunnerConfig
        >>> measurement(RunnerConfig(cache_flush="weights"), kept="min")["cache_flush"]
        'weights'
        >>> measurement(object()) is None
        True
    """
    config = getattr(config, "config", config)
    if not all(hasattr(config, f) for f in MEASURE_FIELDS):
        return None
    if kept not in ("min", "all"):
        raise ValueError(f"measurement: kept must be 'min' or 'all', got {kept!r}")
    out = {f: getattr(config, f) for f in MEASURE_FIELDS}
    out["cache_flush"] = check_flush_policy(out["cache_flush"], "RunnerConfig.cache_flush")
    out["kept"] = kept
    return out


def check_flush_policy(policy: Any, what: str = "cache_flush") -> Any:
    """``policy`` if it is a cache-flush policy a record can carry (`RunnerConfig.cache_flush`'s
    values, `UNKNOWN_FLUSH` or `IN_MODEL`), else ``ValueError`` naming ``what``.

    Example:
        >>> check_flush_policy("weights"), check_flush_policy(False), check_flush_policy("in-model")
        ('weights', False, 'in-model')
    """
    from ingot.tune.runner.base import FLUSH_POLICIES

    if isinstance(policy, bool) or policy in FLUSH_POLICIES or policy in (UNKNOWN_FLUSH, IN_MODEL):
        return policy
    raise ValueError(f"{what}: {policy!r} is not a cache-flush policy; use one of "
                     f"{list(FLUSH_POLICIES) + [UNKNOWN_FLUSH, IN_MODEL]}")


def flush_label(policy: Any) -> str:
    """A short name of a flush policy for messages.

    Example:
        >>> flush_label(False), flush_label(True), flush_label("weights")
        ('warm', 'all-but-first', 'weights')
    """
    return {False: "warm", True: "all-but-first"}.get(policy, str(policy)) if isinstance(policy, bool) \
        else str(policy)


def workload_hash(mod: Any) -> str:
    """The database key of a workload: the structural hash of its IRModule (or PrimFunc,
    taken as the module ``{"main": func}``).

    Example:
        >>> # workload_hash(te.create_prim_func([A, B, C])) == workload_hash(IRModule({"main": ...}))
    """
    from ingot.ir import structural_hash

    return structural_hash(as_module(mod))


def as_module(mod: Any):
    """``mod`` as an IRModule (a PrimFunc becomes ``{"main": func}``).

    Example:
        >>> # as_module(prim_func)["main"] is prim_func
    """
    from ingot.ir import IRModule
    from ingot.tir.function import PrimFunc

    if isinstance(mod, IRModule):
        return mod
    if isinstance(mod, PrimFunc):
        return IRModule({"main": mod})
    raise TypeError(f"expected an IRModule or a tir.PrimFunc, got {type(mod).__name__}")


@dataclass(frozen=True)
class ArgInfo:
    """Shape and dtype of one tensor argument of a workload (TVM's ``TensorInfo``).

    Example:
        >>> ArgInfo("float32", (64, 64)).as_json()
        ['TENSOR', 'float32', [64, 64]]
    """

    dtype: str
    shape: tuple

    def as_json(self) -> list:
        return ["TENSOR", self.dtype, list(self.shape)]

    @staticmethod
    def from_json(data: Sequence[Any]) -> "ArgInfo":
        if not (isinstance(data, (list, tuple)) and len(data) == 3 and data[0] == "TENSOR"):
            raise ValueError(f"ArgInfo JSON must look like ['TENSOR', dtype, shape], got {data!r}")
        return ArgInfo(str(data[1]), tuple(data[2]))

    @staticmethod
    def from_prim_func(func: Any) -> "list[ArgInfo]":
        """The tensor parameters of a PrimFunc, in order (symbolic dims kept as strings).

        Example:
            >>> # ArgInfo.from_prim_func(matmul) -> [ArgInfo('float32', (64, 64)), ...]
        """
        from ingot.ir import Buffer, as_const_int

        out = []
        for p in func.params:
            if isinstance(p, Buffer):
                dims = tuple(as_const_int(d) if as_const_int(d) is not None else str(d) for d in p.shape)
                out.append(ArgInfo(str(p.dtype), dims))
        return out


@dataclass(frozen=True)
class Workload:
    """A tuning workload: an IRModule and its structural hash (the database key).

    Example:
        >>> # wl = Workload.create(mod); wl.shash == workload_hash(mod)
    """

    mod: Any
    shash: str

    @staticmethod
    def create(mod: Any) -> "Workload":
        mod = as_module(mod)
        return Workload(mod, workload_hash(mod))


@dataclass(frozen=True)
class TuningRecord:
    """One measured candidate: trace JSON, workload hash, run times (or the error), target.

    Example:
        >>> TuningRecord({"version": 1, "insts": [], "decisions": []}, "ab", None, "llvm",
        ...              error_msg="RunError: segfault").is_valid
        False
    """

    trace_json: dict
    workload_hash: str
    run_secs: Optional[list]
    target: str
    args_info: tuple = ()
    timestamp: float = field(default_factory=time.time)
    schema_version: int = SCHEMA_VERSION
    error_msg: Optional[str] = None
    candidate_hash: Optional[str] = None
    measure: Optional[dict] = None

    @property
    def cache_flush(self) -> Any:
        """The cache-flush policy this record was timed with (`RunnerConfig.cache_flush`'s value),
        or `UNKNOWN_FLUSH` when it does not say (schema version 1, or a runner without a config).

        Example:
            >>> TuningRecord({}, "ab", [1.0], "llvm", measure={"cache_flush": "weights"}).cache_flush
            'weights'
            >>> TuningRecord({}, "ab", [1.0], "llvm").cache_flush
            'unknown'
        """
        if not self.measure or "cache_flush" not in self.measure:
            return UNKNOWN_FLUSH
        return self.measure["cache_flush"]

    @property
    def is_valid(self) -> bool:
        """Whether the candidate ran and was correct (finite run times)."""
        return bool(self.run_secs) and all(math.isfinite(s) for s in self.run_secs)

    @property
    def mean_sec(self) -> float:
        """Mean measured seconds; ``inf`` for a failed candidate."""
        if not self.is_valid:
            return math.inf
        return sum(self.run_secs) / len(self.run_secs)

    @property
    def trace(self):
        """The trace as an `ingot.tir.schedule.Trace`."""
        from ingot.tir.schedule.trace import Trace

        return Trace.from_json(self.trace_json)

    def dedup_key(self) -> tuple:
        """(workload, target, trace, flush policy) identity used by `Database.merge`: one trace
        timed warm and cold is two measurements, neither replaces the other."""
        return (self.workload_hash, self.target, json.dumps(self.trace_json, sort_keys=True),
                json.dumps(self.cache_flush))

    def as_json(self) -> dict:
        """The JSON-lines form (see docs/tuning.md)."""
        return {
            "schema_version": self.schema_version,
            "workload_hash": self.workload_hash,
            "target": self.target,
            "trace": self.trace_json,
            "run_secs": list(self.run_secs) if self.run_secs is not None else None,
            "error_msg": self.error_msg,
            "args_info": [a.as_json() if isinstance(a, ArgInfo) else list(a) for a in self.args_info],
            "timestamp": self.timestamp,
            "candidate_hash": self.candidate_hash,
            **({"measure": dict(self.measure)} if self.measure is not None else {}),
        }

    @staticmethod
    def from_json(data: "dict | str") -> "TuningRecord":
        """Parse `as_json`'s output; refuses a newer schema version with a clear message. A version 1
        record (no ``measure``) reads as one of `UNKNOWN_FLUSH` policy."""
        if isinstance(data, str):
            data = json.loads(data)
        version = int(data.get("schema_version", 1))
        if version > SCHEMA_VERSION:
            raise ValueError(
                f"tuning record has schema version {version}; this Ingot reads up to {SCHEMA_VERSION}. "
                "Upgrade Ingot or re-export the records with this version"
            )
        run_secs = data.get("run_secs")
        measure = data.get("measure") if version >= 2 else None
        if measure is not None:
            if not isinstance(measure, dict):
                raise ValueError(f"tuning record of workload {str(data.get('workload_hash'))[:16]}...: 'measure' "
                                 f"must be an object like {{\"cache_flush\": \"weights\", ...}}, got {measure!r}")
            check_flush_policy(measure.get("cache_flush", UNKNOWN_FLUSH), "tuning record 'measure.cache_flush'")
        return TuningRecord(
            trace_json=data["trace"],
            workload_hash=str(data["workload_hash"]),
            run_secs=[float(s) for s in run_secs] if run_secs is not None else None,
            target=str(data["target"]),
            args_info=tuple(ArgInfo.from_json(a) for a in data.get("args_info") or ()),
            timestamp=float(data.get("timestamp") or time.time()),
            schema_version=version,
            error_msg=data.get("error_msg"),
            candidate_hash=data.get("candidate_hash"),
            measure=dict(measure) if measure is not None else None,
        )
