"""`Database`: the abstract store of workloads and tuning records (TVM's ``ms.Database``).

Note: concrete stores implement five small methods (``_put_workload``, ``_get_workload_hashes``,
``_put_records``, ``_records_of``, ``_all_records``); everything users call — ``query_best``,
``get_top_k``, JSON-lines import/export, ``merge`` — is written once here on top of them.
Targets are compared by their canonical string (``str(Target(...))``).

Note (comparable records, schema version 2): times taken under two cache-flush policies are not
comparable (record.py's note), so every "best" — `get_top_k`, `query_best`, `query_schedule`,
merge's duplicate rule — looks at the valid records of ONE policy (`TuningRecord.cache_flush`).
Which one (`choose_flush_policy`): the ``cache_flush=`` asked for when the workload has records of
it; otherwise the policy with the most valid records, known policies before `UNKNOWN_FLUSH`
(schema-1 records), then the one measured last. When a workload has records of several policies
and the asked one does not settle it, a warning names the policies, their record counts and the
one chosen (once per workload and database object).

Example:
    >>> from ingot.tune.database import MemoryDatabase
    >>> db = MemoryDatabase()
    >>> len(db)
    0
"""
from __future__ import annotations

import functools
import json
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from .record import (
    IN_MODEL, SCHEMA_VERSION, UNKNOWN_FLUSH, TuningRecord, Workload, as_module, check_flush_policy, flush_label, workload_hash,
)

logger = logging.getLogger("ingot.tune")


def canonical_target(target: Any) -> "str | None":
    """The canonical string of a target (``None`` stays ``None``: any target).

    Example:
        >>> canonical_target("llvm  -num-cores=2")
        'llvm -num-cores=2'
    """
    if target is None:
        return None
    from ingot.target import as_target

    return str(as_target(target))  # a Target is already canonical: not copied


@functools.lru_cache(maxsize=256)
def _key_of(text: str) -> str:
    from ingot.target import Target, TargetError

    try:
        t = Target(text)
    except TargetError:  # a record from a newer Ingot with a kind or option unknown here
        return text
    if t.is_cpu:
        return f"{t.kind} -num-cores={t.num_cores} -vector-width={t.vector_width_bits}"
    if t.is_cuda:
        return f"cuda -arch={t.arch or 'default'}"
    return str(t)


def tuning_target_key(target: Any) -> "str | None":
    """What a tuning record's target must match to be reused (``None`` stays ``None``: any):
    the kind, plus for CPUs the core count and vector width (from ``-mcpu``/``-vector-width``,
    else the host) and for CUDA the ``-arch``. Option order is ignored, and so are options that
    do not decide which schedule is valid or best: ``-opt-level``, ``-fast-math``, ``-mattr``,
    ``-keys``, ``-link-params``, another ``-mcpu`` with the same vector width, a ``-num-cores``
    equal to the default. (The first three change the compiled code, but a trace tuned with
    them stays valid and near-best without them.)

    Example:
        >>> tuning_target_key("llvm -num-cores=2 -vector-width=512 -opt-level=2") == tuning_target_key(
        ...     "llvm -vector-width=512 -num-cores=2")
        True
        >>> tuning_target_key("llvm -num-cores=2") == tuning_target_key("llvm -num-cores=4")
        False
    """
    if target is None:
        return None
    return _key_of(str(target) if not isinstance(target, str) else target)


def choose_flush_policy(groups: "dict[Any, tuple[int, float]]", prefer: Any = None) -> Any:
    """The flush policy whose records a query compares (see the module note). ``groups`` maps each
    policy to (number of valid records, newest timestamp); ``prefer``: the policy asked for (None:
    no preference). None when ``groups`` is empty.

    Example:
        >>> choose_flush_policy({False: (64, 1.0), "weights": (20, 2.0)})
        False
        >>> choose_flush_policy({False: (64, 1.0), "weights": (20, 2.0)}, prefer="weights")
        'weights'
        >>> choose_flush_policy({"unknown": (99, 3.0), "weights": (1, 2.0)})
        'weights'
        >>> choose_flush_policy({"in-model": (99, 3.0), "weights": (1, 2.0)})
        'weights'
    """
    if not groups:
        return None
    if prefer is not None and _has(groups, prefer):
        return prefer
    # In-model validation records (`IN_MODEL`) come last: they time a few validated candidates of a
    # workload inside the model and are only asked for by name (apply-best's in-model verdict).
    return max(groups, key=lambda p: (not _same(p, IN_MODEL), p != UNKNOWN_FLUSH, groups[p][0], groups[p][1]))


def _same(a: Any, b: Any) -> bool:
    # Policies are False/True/str: compare with the type, so that no bool ever equals another kind.
    return a == b and type(a) is type(b)


def _has(groups: dict, policy: Any) -> bool:
    return any(_same(p, policy) for p in groups)


def _group_by_flush(records: "Iterable[TuningRecord]") -> "dict[Any, tuple[int, float]]":
    groups: dict = {}
    for r in records:
        n, newest = groups.get(r.cache_flush, (0, -math.inf))
        groups[r.cache_flush] = (n + 1, max(newest, r.timestamp))
    return groups


@dataclass
class ImportReport:
    """What `Database.import_jsonl` / `merge` did: counts, and the workload hashes of records
    that match no workload (reported, never silently dropped: they are kept out of the store).

    ``policies``: records imported per cache-flush policy (`TuningRecord.cache_flush`);
    ``mixed``: workloads that now hold valid records of several policies, hash -> {policy: count}
    (their best is taken among one policy's records: `choose_flush_policy`).

    Example:
        >>> ImportReport(workloads=1, records=3).orphan_records
        0
    """

    workloads: int = 0
    records: int = 0
    duplicates_replaced: int = 0
    duplicates_skipped: int = 0
    orphans: dict = field(default_factory=dict)   # workload hash -> number of records
    policies: dict = field(default_factory=dict)  # flush policy -> number of records imported
    mixed: dict = field(default_factory=dict)     # workload hash -> {flush policy: valid records}

    @property
    def orphan_records(self) -> int:
        return sum(self.orphans.values())


class Database:
    """Base class of tuning databases.

    Example:
        >>> # db.commit_workload(mod); db.commit_tuning_record(rec); db.query_best(mod, "llvm")
    """

    # -- the five methods a store implements ---------------------------------------------------------
    def _put_workload(self, shash: str, name: str, mod_text: str) -> None:
        raise NotImplementedError

    def _get_workload_hashes(self) -> "set[str]":
        raise NotImplementedError

    def _put_records(self, records: "list[TuningRecord]", replace: "list[TuningRecord]" = ()) -> None:
        raise NotImplementedError

    def _records_of(self, shash: str, target: "str | None") -> "list[TuningRecord]":
        """The records of workload ``shash`` whose `tuning_target_key` is ``target`` (None: all)."""
        raise NotImplementedError

    def _all_records(self) -> "list[TuningRecord]":
        raise NotImplementedError

    # -- workloads -----------------------------------------------------------------------------------
    def commit_workload(self, mod: Any) -> Workload:
        """Register a workload (idempotent); returns it with its structural hash.

        Example:
            >>> # wl = db.commit_workload(mod); db.has_workload(mod)  -> True
        """
        wl = Workload.create(mod)
        if wl.shash not in self._get_workload_hashes():
            self._put_workload(wl.shash, _mod_name(wl.mod), _mod_text(wl.mod))
        return wl

    def has_workload(self, mod: Any) -> bool:
        """Whether ``mod`` (IRModule/PrimFunc, or a workload hash string) is registered.

        Example:
            >>> from ingot.tune.database import MemoryDatabase
            >>> MemoryDatabase().has_workload("deadbeef")
            False
        """
        shash = mod if isinstance(mod, str) else workload_hash(mod)
        return shash in self._get_workload_hashes()

    # -- records -------------------------------------------------------------------------------------
    def commit_tuning_record(self, record: TuningRecord) -> None:
        """Store one record; its workload must have been committed (else ``ValueError``).

        Example:
            >>> # db.commit_tuning_record(TuningRecord(trace_json, wl.shash, [1e-4], "llvm"))
        """
        self.commit_tuning_records([record])

    def commit_tuning_records(self, records: Iterable[TuningRecord]) -> None:
        """Store many records in one transaction (see `commit_tuning_record`)."""
        records = list(records)
        known = self._get_workload_hashes()
        for r in records:
            if not isinstance(r, TuningRecord):
                raise TypeError(f"commit_tuning_record expects a TuningRecord, got {type(r).__name__}")
            if r.workload_hash not in known:
                raise ValueError(
                    f"tuning record for workload {r.workload_hash[:16]}... which is not in the database; "
                    "call db.commit_workload(mod) first"
                )
        if records:
            self._put_records(records)

    def assume_flush_policy(self, policy: Any, source: str = "tasks.json") -> int:
        """Stamp the records of `UNKNOWN_FLUSH` policy (schema 1) as timed with ``policy``; returns
        how many. Only for a store whose records are known to share one policy by other means — a
        model work dir's ``tasks.json`` (resume refuses another policy) — so that its old records
        stay comparable with the new ones. Their ``measure`` becomes ``{"cache_flush": policy,
        "assumed": source}`` and their schema version 2.

        Example:
            >>> # SQLiteDatabase("w/database.db").assume_flush_policy("weights")
        """
        policy = check_flush_policy(policy, "assume_flush_policy")
        if policy == UNKNOWN_FLUSH:
            return 0
        return self._set_unknown_measure({"cache_flush": policy, "assumed": str(source)})

    def _set_unknown_measure(self, measure: dict) -> int:
        """Give every record of unknown policy ``measure`` (and schema version 2); returns how many."""
        raise NotImplementedError

    def get_all_tuning_records(self) -> "list[TuningRecord]":
        """Every record, in insertion order."""
        return self._all_records()

    def get_records(self, mod_or_hash: Any, target: Any = None, cache_flush: Any = None) -> "list[TuningRecord]":
        """All records (valid and failed) of a workload, optionally of the targets matching
        ``target`` (same `tuning_target_key`) and only those timed with flush policy
        ``cache_flush`` (None: every policy; `UNKNOWN_FLUSH`: the records that do not say).

        Example:
            >>> # cold = db.get_records(mod, "llvm -num-cores=2", cache_flush="weights")
        """
        shash = mod_or_hash if isinstance(mod_or_hash, str) else workload_hash(mod_or_hash)
        records = self._records_of(shash, tuning_target_key(target))
        if cache_flush is None:
            return records
        cache_flush = check_flush_policy(cache_flush, "get_records(cache_flush=...)")
        return [r for r in records if _same(r.cache_flush, cache_flush)]

    def get_top_k(self, workload: Any, top_k: int, target: Any = None,
                  cache_flush: Any = None) -> "list[TuningRecord]":
        """The ``top_k`` fastest valid records of a workload (a `Workload`, module or hash), all
        timed with one cache-flush policy: ``cache_flush`` when the workload has records of it,
        else the one `choose_flush_policy` picks (a warning says so when there were several).

        Example:
            >>> # best3 = db.get_top_k(wl, 3, cache_flush="weights")
        """
        shash = _shash(workload)
        if top_k <= 0:
            return []
        valid = [r for r in self._records_of(shash, tuning_target_key(target)) if r.is_valid]
        policy = self._pick_policy(shash, _group_by_flush(valid), cache_flush)
        valid = [r for r in valid if _same(r.cache_flush, policy)]
        valid.sort(key=lambda r: (r.mean_sec, r.timestamp))
        return valid[:top_k]

    def query_best(self, mod: Any, target: Any = None, cache_flush: Any = None) -> "TuningRecord | None":
        """The fastest valid record of ``mod`` on ``target`` (``None`` target: any), or None;
        compared only with records of the same cache-flush policy (see `get_top_k`).

        Example:
            >>> # rec = db.query_best(mod, "llvm -num-cores=2", cache_flush="weights"); rec.mean_sec
        """
        top = self.get_top_k(mod, 1, target, cache_flush)
        return top[0] if top else None

    def _pick_policy(self, shash: str, groups: dict, prefer: Any) -> Any:
        """`choose_flush_policy`, plus the warning when it had to choose between policies."""
        if prefer is not None:
            prefer = check_flush_policy(prefer, "cache_flush")
        policy = choose_flush_policy(groups, prefer)
        timed = {p: g for p, g in groups.items() if not _same(p, IN_MODEL)}  # in-model records never compete
        if len(timed) > 1 and (prefer is None or not _same(policy, prefer)):
            warned = self.__dict__.setdefault("_warned_mixed", set())
            key = (shash, tuple(sorted(flush_label(p) for p in groups)), flush_label(prefer))
            if key not in warned:
                warned.add(key)
                logger.warning(
                    "workload %s... has records timed with %d cache-flush policies (%s); their times are not "
                    "comparable, so the best is taken among the %s records%s. Pass cache_flush=... to choose",
                    shash[:16], len(groups), ", ".join(f"{flush_label(p)}: {n}" for p, (n, _) in groups.items()),
                    flush_label(policy), "" if prefer is None else f" (none timed {flush_label(prefer)!r})")
        return policy

    def query_schedule(self, mod: Any, target: Any = None, cache_flush: Any = None):
        """The best record (`query_best`) replayed on ``mod`` as a `Schedule` (or None when there is none).

        Example:
            >>> # sch = db.query_schedule(mod, "llvm -num-cores=2"); sch.mod.script()
        """
        from ingot.tir.schedule import Schedule

        rec = self.query_best(mod, target, cache_flush)
        if rec is None:
            return None
        sch = Schedule(as_module(mod))
        rec.trace.apply_to_schedule(sch, remove_postproc=False)
        return sch

    def __len__(self) -> int:
        return len(self._all_records())

    # -- JSON lines ----------------------------------------------------------------------------------
    def export_jsonl(self, path: "str | os.PathLike") -> int:
        """Write workloads then records as JSON lines; returns the number of records.

        Example:
            >>> # db.export_jsonl("records.jsonl")
        """
        records = self._all_records()
        tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            for shash, name, text in self._workload_rows():
                f.write(json.dumps({"type": "workload", "schema_version": SCHEMA_VERSION,
                                    "workload_hash": shash, "name": name, "mod": text}) + "\n")
            for r in records:
                f.write(json.dumps({"type": "record", **r.as_json()}) + "\n")
        os.replace(tmp, path)
        return len(records)

    def import_jsonl(self, path: "str | os.PathLike") -> ImportReport:
        """Read records written by `export_jsonl` (or by another Ingot) and merge them in,
        keeping the faster of duplicates (same trace, target and flush policy); records that match
        no workload are reported. Schema-1 lines read as records of `UNKNOWN_FLUSH` policy.

        Example:
            >>> # report = db.import_jsonl("records.jsonl"); report.orphans
        """
        workloads: list[tuple] = []
        records: list[TuningRecord] = []
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{os.fspath(path)}:{lineno}: not valid JSON ({err})") from None
                if data.get("type") == "workload":
                    workloads.append((data["workload_hash"], data.get("name", ""), data.get("mod", "")))
                else:
                    records.append(TuningRecord.from_json(data))
        return self._merge_rows(workloads, records)

    def merge(self, other: "Database") -> ImportReport:
        """Copy ``other``'s workloads and records into this database, keeping the best of
        duplicate (workload, target, trace, flush policy) entries; a trace timed under another
        policy is another record (`ImportReport.mixed` lists the workloads that now mix policies).

        Example:
            >>> # report = db.merge(SQLiteDatabase("other_run/database.db"))
        """
        return self._merge_rows(list(other._workload_rows()), other._all_records())

    def _workload_rows(self) -> "list[tuple[str, str, str]]":
        return [(h, "", "") for h in sorted(self._get_workload_hashes())]

    def _merge_rows(self, workloads: list, records: "list[TuningRecord]") -> ImportReport:
        # Step 1: workloads, then records (a duplicate of trace, target and policy keeps the faster).
        report = ImportReport()
        known = self._get_workload_hashes()
        for shash, name, text in workloads:
            if shash not in known:
                self._put_workload(shash, name, text)
                known.add(shash)
                report.workloads += 1
        existing = {r.dedup_key(): r for r in self._all_records()}
        new: list[TuningRecord] = []
        replace: list[TuningRecord] = []
        for r in records:
            if r.workload_hash not in known:
                report.orphans[r.workload_hash] = report.orphans.get(r.workload_hash, 0) + 1
                continue
            old = existing.get(r.dedup_key())  # same trace, target AND flush policy
            if old is None:
                new.append(r)
                existing[r.dedup_key()] = r
                report.policies[r.cache_flush] = report.policies.get(r.cache_flush, 0) + 1
            elif r.mean_sec < old.mean_sec:
                replace.append(r)
                existing[r.dedup_key()] = r
                report.duplicates_replaced += 1
            else:
                report.duplicates_skipped += 1
        if new or replace:
            self._put_records(new, replace)
        report.records = len(new)
        # Step 2: say where the merged workloads now mix policies (the best is chosen among one).
        touched = {r.workload_hash for r in new + replace}
        for shash in sorted(touched):
            groups = _group_by_flush(r for r in existing.values() if r.workload_hash == shash and r.is_valid)
            if len(groups) > 1:
                report.mixed[shash] = {p: n for p, (n, _) in groups.items()}
        if report.mixed:
            example = next(iter(report.mixed.values()))
            logger.warning(
                "%d workload(s) now hold records timed with different cache-flush policies (e.g. %s); times of "
                "two policies are never compared: query_best(..., cache_flush=...) picks the policy (default: the "
                "one with the most records)", len(report.mixed),
                ", ".join(f"{flush_label(p)}: {n}" for p, n in example.items()))
        if report.orphans:
            logger.warning(
                "%d tuning record(s) match no workload in the database and were not imported "
                "(workload hashes: %s); import the file that defines those workloads, or commit them first",
                report.orphan_records, ", ".join(h[:16] for h in report.orphans))
        return report


def _shash(workload: Any) -> str:
    return workload.shash if isinstance(workload, Workload) else (
        workload if isinstance(workload, str) else workload_hash(workload))


def _mod_name(mod: Any) -> str:
    names = [name for name, _ in mod.items()]
    return ",".join(str(n) for n in names)


def _mod_text(mod: Any) -> str:
    # The text is for humans reading the database; lookups use the hash only.
    try:
        return mod.script()
    except Exception:  # the TVMScript printer may not cover every node yet
        return ""
