"""Apply-best at compile time: the ``apply_schedule`` hook that puts tuned traces into a model.

Note: `apply_records(source, target)` returns an `ApplyBest` hook for
``ingot.graph.build(mod, target, apply_schedule=hook)`` (``ingot.compile(..., tuning_records=...)``
passes it). For each fused kernel the hook
Step 1. computes its workload key (`ingot.tune.tasks.workload_key`: structural hash of the kernel
   with its name attributes normalized) and asks the database for the best valid record on
   ``target`` among the records of one cache-flush policy (the preferred one, `preferred_flush`,
   when the kernel has records of it: database/base.py's note);
Step 2. on a hit, replays the record's trace on a fresh `Schedule` of the normalized kernel and
   returns the scheduled function under the kernel's own attributes (``"tuned"``);
Step 3. on a miss, returns None: the graph layer uses the default schedule (``"default"``);
Step 2b. when the best record is the default schedule itself, or beat it by less than
   `APPLY_MIN_GAIN` (the default's record of the same flush policy is the one whose candidate hash is the default
   schedule's, measured first by the model tuner), returns None: ``"kept-default"``;
Step 2c. when the best record was validated inside the model (`ingot.workflow.validate`: records
   of policy ``"in-model"`` for this candidate and the default, from one validation run) and its
   calls there were not `IN_MODEL_MIN_GAIN` faster than the default's, returns None:
   ``"kept-default-in-model"`` (a schedule that won alone with cold weights but loses in the model).
   A best record that was never validated (a resumed tune found a new one) is applied on its
   isolated time alone until `validate_in_model` runs again;
Step 4. when the trace does not replay, warns (``RuntimeWarning`` naming the kernel and the
   error) and returns None (``"failed"``: default schedule).
A tuned kernel that the build then rejects (lowering/codegen) falls back in the graph layer too;
`ApplyBest.report(build_report)` counts it as failed. Nothing is silent: the report (printed by
``ingot.compile`` and kept as ``package.schedule_report``) says how many kernels were tuned,
default (no record) or failed.

Example:
    >>> # hook = apply_records("tune_mlp", "llvm -num-cores=2")
    >>> # ex = ingot.graph.build(mod, "llvm -num-cores=2", apply_schedule=hook)
    >>> # print(hook.report(ex.schedule_report))   # 2 kernels: 2 tuned, 0 default (no record), 0 failed
"""
from __future__ import annotations

import warnings
from typing import Any, Mapping

from .tasks.extract import workload_module
from .tasks.records import APPLY_MIN_GAIN, IN_MODEL_MIN_GAIN, open_database


class ScheduleReport(dict):
    """``{kernel: "tuned" | "default" | "failed" | <graph status>}`` with counts and a summary.

    Example:
        >>> r = ScheduleReport({"a": "tuned", "b": "default", "c": "failed"})
        >>> r.counts["tuned"], r.num_failed
        (1, 1)
        >>> str(r)
        'schedules: 3 kernels: 1 tuned, 1 default (no tuning record), 1 failed to apply (default used)'
    """

    @property
    def counts(self) -> dict:
        out = {"tuned": 0, "default": 0, "failed": 0}  # "kept-default" only when there is one
        for how in self.values():
            out[how] = out.get(how, 0) + 1
        return out

    @property
    def num_tuned(self) -> int:
        return self.counts["tuned"]

    @property
    def num_default(self) -> int:
        return self.counts["default"]

    @property
    def num_failed(self) -> int:
        return self.counts["failed"]

    def __str__(self) -> str:
        c = self.counts
        text = (f"schedules: {len(self)} kernels: {c['tuned']} tuned, {c['default']} default (no tuning record), "
                f"{c['failed']} failed to apply (default used)")
        if c.get("kept-default"):
            text += f", {c['kept-default']} kept default (no tuned schedule beat it)"
        if c.get("kept-default-in-model"):
            text += f", {c['kept-default-in-model']} kept default (slower in the model)"
        other = {k: v for k, v in c.items()
                 if k not in ("tuned", "default", "failed", "kept-default", "kept-default-in-model")}
        if other:
            text += ", " + ", ".join(f"{v} {k}" for k, v in sorted(other.items()))
        return text


class ApplyBest:
    """The hook returned by `apply_records`; call it with a fused kernel (see the module note).

    ``status`` maps each kernel seen to ``"tuned"``, ``"default"``, ``"kept-default"``,
    ``"kept-default-in-model"`` or ``"failed"``; ``errors`` holds the replay error of failed
    kernels; ``applied`` maps each tuned kernel to ``(workload, record, default_hash)`` (what
    in-model validation compares). ``in_model=False`` ignores in-model verdicts (Step 2c): the
    package the validation times as "tuned".

    Example:
        >>> # hook = ApplyBest(SQLiteDatabase("w/database.db"), "llvm"); scheduled = hook(kernel)
    """

    def __init__(self, database: Any, target: Any, cache_flush: Any = None, in_model: bool = True):
        from ingot.target import as_target

        self.database = database
        self.target = as_target(target)
        # The flush policy whose records are preferred (record schema v2): times of two policies
        # are never compared, neither between candidates nor with the default's record.
        self.cache_flush = cache_flush
        self.in_model = in_model
        self.status: dict = {}
        self.errors: dict = {}
        self.applied: dict = {}
        self._default_hashes: dict = {}

    def __call__(self, func: Any) -> Any:
        from ingot.tir.function import PrimFunc
        from ingot.tir.schedule import Schedule

        kernel = str(func.attrs.get("global_symbol", "?"))
        # Step 1: look up.
        workload = workload_module(func)
        record = self.database.query_best(workload, self.target, self.cache_flush)
        if record is None:  # Step 3: miss
            self.status[kernel] = "default"
            return None
        default_hash = self._default_hash(workload, record.workload_hash)
        if not self._beats_default(workload, record, default_hash):  # Step 2b
            self.status[kernel] = "kept-default"
            return None
        if self.in_model and in_model_verdict(self.database, record, default_hash, self.target) is False:  # Step 2c
            self.status[kernel] = "kept-default-in-model"
            return None
        # Step 2: replay on a fresh schedule of the normalized kernel.
        try:
            sch = Schedule(workload)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
            scheduled = sch.mod["main"]
        except Exception as err:  # noqa: BLE001 - Step 4: any replay failure falls back, loudly
            self.status[kernel] = "failed"
            self.errors[kernel] = f"{type(err).__name__}: {err}"
            warnings.warn(f"tuning record of kernel {kernel!r} (workload {record.workload_hash[:12]}) does not apply "
                          f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); using the default "
                          f"schedule. Re-tune the model with this Ingot version to refresh the records.",
                          RuntimeWarning, stacklevel=2)
            return None
        self.status[kernel] = "tuned"
        self.applied[kernel] = (workload, record, default_hash)
        # The kernel keeps its own name and attributes (the workload had them normalized).
        return PrimFunc(scheduled.params, scheduled.body, {**dict(scheduled.attrs), **dict(func.attrs)})

    def _default_hash(self, workload: Any, shash: str) -> "str | None":
        """The candidate hash of ``workload``'s default schedule (None: it has none); memoized per
        workload, since a model calls structurally equal kernels many times."""
        from ingot.ir import structural_hash
        from ingot.ops.schedule import schedule_blocks
        from ingot.tir.schedule import Schedule

        if shash not in self._default_hashes:
            try:
                self._default_hashes[shash] = structural_hash(schedule_blocks(Schedule(workload), self.target).mod)
            except Exception:  # noqa: BLE001 - no default schedule: nothing to compare with
                self._default_hashes[shash] = None
        return self._default_hashes[shash]

    def _beats_default(self, workload: Any, record: Any, default_hash: "str | None") -> bool:
        """Whether ``record`` is faster than the workload's default schedule by `APPLY_MIN_GAIN`
        (True when the default was never measured: the record is all there is to compare)."""
        if default_hash is None:
            return True
        if record.candidate_hash == default_hash:
            return False
        # The default may have been timed more than once (the tuner re-times it when a candidate
        # beats it): its fastest time is the yardstick; only times of the record's flush policy count.
        defaults = [r.mean_sec for r in self.database.get_records(workload, self.target, record.cache_flush)
                    if r.candidate_hash == default_hash and r.is_valid]
        return not defaults or record.mean_sec < min(defaults) * (1.0 - APPLY_MIN_GAIN)

    def report(self, build_report: "Mapping[str, str] | None" = None) -> ScheduleReport:
        """Combine the hook's view with the build's ``schedule_report``: a kernel counts as
        tuned only if the build kept the tuned schedule; one the build rejected is "failed".

        Example:
            >>> h = ApplyBest.__new__(ApplyBest); h.status = {"k": "tuned"}; h.errors = {}
            >>> str(h.report({"k": "default"})).split(": ", 1)[1]
            '1 kernels: 0 tuned, 0 default (no tuning record), 1 failed to apply (default used)'
        """
        out = ScheduleReport()
        names = list(build_report) if build_report is not None else list(self.status)
        for name in names:
            mine = self.status.get(name)
            built = build_report.get(name) if build_report is not None else mine
            if mine == "tuned" and built != "tuned":
                out[name] = "failed"
            elif mine is not None:
                out[name] = mine
            else:  # the hook never saw it: kept / unscheduled / lowered kernels
                out[name] = built
        return out


def in_model_verdict(database: Any, record: Any, default_hash: "str | None", target: Any) -> "bool | None":
    """Whether ``record`` (a workload's best isolated record) ran faster inside the model than the
    default schedule by `IN_MODEL_MIN_GAIN`, per the newest in-model validation of this very
    candidate (`ingot.workflow.validate`); None when it was never validated there.

    Example:
        >>> # in_model_verdict(db, db.query_best(wl, "llvm"), default_hash, "llvm")   # True / False / None
    """
    from .database.record import IN_MODEL

    if default_hash is None or record.candidate_hash is None:
        return None
    rows = [r for r in database.get_records(record.workload_hash, target, IN_MODEL) if r.is_valid]
    mine = [r for r in rows if r.candidate_hash == record.candidate_hash]
    if not mine:
        return None
    newest = max(mine, key=lambda r: r.timestamp)
    run = (newest.measure or {}).get("validation")
    # The default timed in the same validation run: times of two runs are never compared.
    base = [r for r in rows if r.candidate_hash == default_hash and (r.measure or {}).get("validation") == run]
    if not base:
        return None
    return newest.mean_sec < base[0].mean_sec * (1.0 - IN_MODEL_MIN_GAIN)


def apply_records(records: Any, target: Any, cache_flush: Any = None, in_model: bool = True) -> ApplyBest:
    """The apply-best hook for ``ingot.graph.build`` from tuning records: a `TuningRecords`, a
    work directory, a ``.db`` or ``.jsonl`` file, or a `Database`; an `ApplyBest` is returned as is.
    ``in_model=False`` ignores the verdicts of in-model validation (module note, Step 2c).

    ``cache_flush``: the flush policy whose records are preferred where a kernel has records of
    several (a merge of warm and cold work dirs); default: the policy the work dir's ``tasks.json``
    says it was timed with, else `ingot.tune.model.MODEL_FLUSH_POLICY` (the one that matched
    in-model kernel times best). A kernel whose records are all of another policy still uses them.

    Example:
        >>> # hook = apply_records("tune_resnet50", "llvm -num-cores=2")
        >>> # package = ingot.compile(model, "llvm -num-cores=2", tuning_records="tune_resnet50")
    """
    if isinstance(records, ApplyBest):
        return records
    if cache_flush is None:
        cache_flush = preferred_flush(records)
    return ApplyBest(open_database(records), target, cache_flush, in_model)


def preferred_flush(records: Any) -> Any:
    """The flush policy `apply_records` prefers for ``records`` (see there).

    Example:
        >>> preferred_flush("/nonexistent.jsonl")
        'weights'
    """
    import os

    from .model import MODEL_FLUSH_POLICY, measured_flush
    from .tasks.records import TuningRecords, read_tasks_file

    info: dict = {}
    if isinstance(records, TuningRecords):
        info = records.info
    elif isinstance(records, (str, os.PathLike)) and os.path.isdir(records):
        try:
            info = read_tasks_file(os.fspath(records))
        except (OSError, ValueError):
            info = {}
    policy = measured_flush(info) if info.get("tasks") else None
    return MODEL_FLUSH_POLICY if policy is None else policy


__all__ = ["apply_records", "preferred_flush", "in_model_verdict", "ApplyBest", "ScheduleReport"]
