"""`TuningRecords` (what ``ingot.workflow.tune(model, ...)`` returns), opening record sources, merging.

Note, the model tuning work directory (format ``ingot-tune-model`` version 1):

```
work_dir/database.db   SQLite tuning database, schema version 2 (docs/tuning.md): every measured
                       candidate of every task, failed ones included, keyed by workload hash + target;
                       each record says how it was timed (its cache-flush policy)
work_dir/tasks.json    {"format": "ingot-tune-model", "version": 1, "target": "...", "source": "...",
                        "tasks": [{"name", "workload_hash", "weight", "flop_count", "kernels",
                                   "default_us", "best_us", "trials", "in_model_kept"?}],
                        "in_model": {...}?, "elapsed_s": ...}
                       ("in_model_kept": the in-model validation verdict of the task's best record,
                        absent until validated; "in_model": the last validation's summary)
work_dir/logs/tune.log the per-round log and per-task tables
```

``tasks.json`` is rewritten (atomically) after every round; the database is the source of truth
(apply-best only needs it), ``tasks.json`` is the summary humans and `merge_records` read.
A source for `open_database` may be a `TuningRecords`, a `Database`, a work directory, a
``.db`` file or a ``.jsonl`` export.

Example:
    >>> parse_duration("1h30m"), parse_duration("90s"), parse_duration(45)
    (5400.0, 90.0, 45.0)
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
from typing import Any, Iterable

logger = logging.getLogger("ingot.tune")

FORMAT = "ingot-tune-model"
FORMAT_VERSION = 1
TASKS_FILE = "tasks.json"
DB_FILE = "database.db"

_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hr": 3600.0}


def parse_duration(value: Any) -> float:
    """Seconds from ``"30m"``, ``"1h30m"``, ``"90s"``, ``"45"`` or a number.

    Example:
        >>> parse_duration("30m")
        1800.0
    """
    if isinstance(value, (int, float)):
        if value <= 0:
            raise ValueError(f"time budget must be > 0 seconds, got {value}")
        return float(value)
    text = str(value).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return parse_duration(float(text))
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*(h|hr|min|m|sec|s)", text)
    if not parts or "".join(n + u for n, u in parts) != re.sub(r"\s+", "", text):
        raise ValueError(f"time budget {value!r} not understood; write e.g. '30m', '1h30m', '90s' or seconds")
    return parse_duration(sum(float(n) * _UNITS[u] for n, u in parts))


def open_database(source: Any) -> Any:
    """The tuning `Database` behind ``source`` (see the module note).

    Example:
        >>> # db = open_database("tune_resnet50"); len(db)
    """
    from ..database import Database, MemoryDatabase, SQLiteDatabase

    if isinstance(source, TuningRecords):
        return source.database
    if isinstance(source, Database):
        return source
    path = os.fspath(source)
    if os.path.isdir(path):
        db_path = os.path.join(path, DB_FILE)
        if not os.path.isfile(db_path):
            raise FileNotFoundError(f"tuning records {path!r}: the directory has no {DB_FILE}; pass the --work-dir "
                                    f"of an `ingot tune` run")
        return SQLiteDatabase(db_path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"tuning records {path!r}: no such file or directory; pass a tuning work dir, a "
                                f".db database or a .jsonl export")
    if path.endswith(".jsonl") or path.endswith(".json"):
        db = MemoryDatabase()
        db.import_jsonl(path)
        return db
    return SQLiteDatabase(path)


class TuningRecords:
    """The result of tuning a model: the work directory, its database and task summary.

    Pass it (or its ``work_dir``) to ``ingot.compile(model, tuning_records=...)``.
    ``os.fspath(records)`` is the work directory.

    Example:
        >>> # records = ingot.workflow.tune(model, target="llvm -num-cores=2", time_budget="10m", work_dir="w")
        >>> # print(records.summary()); records.estimated_latency_us
    """

    def __init__(self, work_dir: "str | os.PathLike", database: Any = None, info: "dict | None" = None):
        self.work_dir = os.path.abspath(os.fspath(work_dir))
        self._database = database
        self.info = info if info is not None else read_tasks_file(self.work_dir)

    @property
    def database(self) -> Any:
        """The `SQLiteDatabase` in the work directory (opened on first use)."""
        if self._database is None:
            self._database = open_database(self.work_dir)
        return self._database

    @property
    def tasks(self) -> list:
        """The task summaries (dicts, see the module note)."""
        return list(self.info.get("tasks", []))

    @property
    def target(self) -> "str | None":
        return self.info.get("target")

    def _weighted(self, key: str) -> float:
        return sum(t["weight"] * t[key] for t in self.tasks if t.get(key) is not None and math.isfinite(t[key]))

    @property
    def estimated_latency_us(self) -> float:
        """Sum over tasks of weight x best measured latency (kernels only, no graph overhead)."""
        return sum(t["weight"] * applied_us(t) for t in self.tasks if applied_us(t) is not None)

    @property
    def default_latency_us(self) -> float:
        """Sum over tasks of weight x the default schedule's measured latency."""
        return self._weighted("default_us")

    def summary(self) -> str:
        """A per-task table (default vs best latency) and the end-to-end estimate.

        Example:
            >>> TuningRecords("/nonexistent", info={"tasks": []}).summary().splitlines()[0].split()[:2]
            ['ID', '|']
        """
        return format_summary(self.tasks, self.info.get("elapsed_s"))

    def export_jsonl(self, path: "str | os.PathLike") -> int:
        """Write every record (and workload) as JSON lines; returns the number of records."""
        return self.database.export_jsonl(path)

    def __fspath__(self) -> str:
        return self.work_dir

    def __repr__(self) -> str:
        return (f"<TuningRecords {self.work_dir} tasks={len(self.tasks)} "
                f"estimate={self.estimated_latency_us / 1e3:.3f} ms>")


def _fmt_us(x: Any) -> str:
    return f"{x:.1f}" if isinstance(x, (int, float)) and math.isfinite(x) else "N/A"


#: In-model validation (`ingot.workflow.validate`): a validated tuned schedule stays only when its
#: kernel's calls, summed, ran at least this much faster inside the model than the default's did.
#: Two packages of the same code differ by ~1% per kernel when timed in turn (min of 20 rounds).
IN_MODEL_MIN_GAIN = 0.02
#: A tuned record replaces the default schedule only when it measured at least this much faster
#: (relative): smaller gains are within measurement noise, and applying them could slow a kernel.
APPLY_MIN_GAIN = 0.02


def applied_us(task: dict) -> "float | None":
    """The latency (us) a compile with these records gets for ``task`` (a tasks.json row): the
    tuned best when it beat the default by `APPLY_MIN_GAIN` and in-model validation did not revert
    it (``"in_model_kept": false``, written by `ingot.workflow.validate_in_model`), else the default.

    Example:
        >>> applied_us({"default_us": 10.0, "best_us": 9.95}), applied_us({"default_us": 10.0, "best_us": 5.0})
        (10.0, 5.0)
        >>> applied_us({"default_us": 10.0, "best_us": 5.0, "in_model_kept": False})
        10.0
    """
    best, default = _finite_or_none(task.get("best_us")), _finite_or_none(task.get("default_us"))
    if default is None:
        return best
    if task.get("in_model_kept") is False:  # slower inside the model: apply-best keeps the default
        return default
    return best if best is not None and best < default * (1.0 - APPLY_MIN_GAIN) else default


def format_summary(tasks: list, elapsed_s: "float | None" = None) -> str:
    """The per-task table of a model tuning run plus the weighted end-to-end estimate.

    Example:
        >>> print(format_summary([{"name": "dense", "weight": 2, "flop_count": 1e6, "default_us": 10.0,
        ...                        "best_us": 5.0, "trials": 8, "done": True}]).splitlines()[-1])
        estimated kernel time per run: 10.0 us (default schedules 20.0 us, 2.00x)
    """
    header = ("ID", "Task", "Weight", "MFLOP", "Share", "Default (us)", "Best (us)", "Speed-up", "GFLOP/s",
              "Trials", "Done", "In model")
    total_default = sum(t["weight"] * t["default_us"] for t in tasks if _finite_or_none(t.get("default_us")))
    rows = []
    for i, t in enumerate(tasks):
        best, default = t.get("best_us"), t.get("default_us")
        ok = best is not None and math.isfinite(best) and best > 0
        speed = f"{default / best:.2f}x" if ok and default is not None and math.isfinite(default) else ""
        gflops = f"{t['flop_count'] / (best * 1e-6) / 1e9:.2f}" if ok else "N/A"
        share = (f"{100 * t['weight'] * default / total_default:.1f}%"
                 if total_default > 0 and _finite_or_none(default) else "")
        done = "skip" if t.get("skipped") else "Y" if t.get("done") else ""
        verdict = {True: "kept", False: "default"}.get(t.get("in_model_kept"), "")
        rows.append((str(i), t["name"], f"{t['weight']:g}", f"{t['flop_count'] / 1e6:.2f}", share, _fmt_us(default),
                     _fmt_us(best), speed, gflops, str(t.get("trials", 0)), done, verdict))
    widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(header)]

    def line(vals: Iterable[str]) -> str:
        return " | ".join(v.ljust(w) if k == 1 else v.rjust(w) for k, (v, w) in enumerate(zip(vals, widths)))

    out = [line(header), "-" * (sum(widths) + 3 * (len(widths) - 1))] + [line(r) for r in rows]
    best = sum(t["weight"] * applied_us(t) for t in tasks if applied_us(t) is not None)
    tail = f"estimated kernel time per run: {best:.1f} us"
    if total_default > 0 and best > 0:
        tail += f" (default schedules {total_default:.1f} us, {total_default / best:.2f}x)"
    if elapsed_s is not None:
        out.append(f"tuning time: {elapsed_s:.1f} s")
    out.append(tail)
    return "\n".join(out)


def read_tasks_file(work_dir: str) -> dict:
    """``work_dir/tasks.json`` (an empty summary when absent); refuses a newer format version.

    Example:
        >>> read_tasks_file("/nonexistent")["tasks"]
        []
    """
    path = os.path.join(work_dir, TASKS_FILE)
    if not os.path.isfile(path):
        return {"format": FORMAT, "version": FORMAT_VERSION, "tasks": []}
    with open(path) as f:
        info = json.load(f)
    if info.get("format") != FORMAT or int(info.get("version", 0)) > FORMAT_VERSION:
        raise ValueError(f"{path}: format {info.get('format')!r} v{info.get('version')} is not readable by this "
                         f"Ingot (reads {FORMAT} v{FORMAT_VERSION}); upgrade Ingot or re-tune")
    return info


def write_tasks_file(work_dir: str, info: dict) -> None:
    """Write ``tasks.json`` atomically (a kill mid-write leaves the previous version).

    Example:
        >>> # write_tasks_file("w", {"format": FORMAT, "version": 1, "tasks": []})
    """
    path = os.path.join(work_dir, TASKS_FILE)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({**info, "format": FORMAT, "version": FORMAT_VERSION}, f, indent=1, default=_json_default)
    os.replace(tmp, path)


def _json_default(x: Any) -> Any:
    return float(x) if isinstance(x, float) else str(x)


def _finite_or_none(x: Any) -> Any:
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def measured_flush(info: dict) -> "bool | str | None":
    """The cache-flush policy (`RunnerConfig.cache_flush`) the records of a work dir (its
    ``tasks.json`` as read) were timed with; None for a work dir with nothing measured yet. Work
    dirs written before cold-cache timing existed (no ``runner_config`` entry) were timed warm.

    Example:
        >>> measured_flush({"tasks": []}) is None, measured_flush({"tasks": [{}]})
        (True, False)
        >>> measured_flush({"tasks": [{}], "runner_config": {"cache_flush": "weights"}})
        'weights'
    """
    config = info.get("runner_config")
    if isinstance(config, dict):
        policy = config.get("cache_flush", False)
        return policy if isinstance(policy, str) else bool(policy)
    return False if info.get("tasks") else None


def measured_cold(info: dict) -> "bool | None":
    """Whether the records of a work dir were timed with cold caches (any flush policy); None for
    a work dir with nothing measured yet (see `measured_flush`).

    Example:
        >>> measured_cold({"tasks": [{}], "runner_config": {"cache_flush": True}})
        True
    """
    policy = measured_flush(info)
    return None if policy is None else policy is not False


def merge_records(sources: Iterable[Any], out: "str | os.PathLike", top_k: "int | None" = None,
                  cache_flush: Any = None) -> TuningRecords:
    """Merge tuning records from several sources (work dirs, databases, ``.jsonl``) into the
    work directory ``out``; the best record per workload and target wins at apply time.

    ``top_k=None`` keeps every record (failed ones too, so resuming from ``out`` measures nothing
    twice); ``top_k=k`` keeps only the k fastest valid records per workload, target and flush policy.
    Task summaries are merged by workload hash (largest weight, best latency, summed trials).

    Times are compared only among records of one cache-flush policy (record schema v2). The
    merged work dir's policy: ``cache_flush`` if given, else ``out``'s own (when it holds
    records), else the first source's that says (work dirs: ``tasks.json``; schema-2 records say
    it themselves). When the sources were timed with different policies a warning names them;
    every record is kept, but ``best_us``/``default_us`` and apply-best use the chosen policy's.

    Example:
        >>> # merged = merge_records(["tune_a", "tune_b"], "tune_all"); merged.estimated_latency_us
    """
    from ..database import MemoryDatabase, SQLiteDatabase
    from ..database.record import IN_MODEL, UNKNOWN_FLUSH, check_flush_policy, flush_label

    out = os.path.abspath(os.fspath(out))
    os.makedirs(out, exist_ok=True)
    dst = SQLiteDatabase(os.path.join(out, DB_FILE))
    previous = read_tasks_file(out)
    target = previous.get("target")
    # Step 1: every source's database and summary, and the policy it was timed with.
    loaded = []
    for src in sources:
        db = open_database(src)
        info = src.info if isinstance(src, TuningRecords) else (
            read_tasks_file(os.fspath(src)) if isinstance(src, (str, os.PathLike)) and os.path.isdir(src) else {})
        policy = measured_flush(info) if info.get("tasks") else None
        if policy is not None:  # its schema-1 records were timed so (tasks.json): say it, in a copy
            db = _with_policy(db, policy, MemoryDatabase)
        if policy is None:  # a .db/.jsonl: the policy its records carry, when they all carry one
            said = ({json.dumps(r.cache_flush) for r in db.get_all_tuning_records()}
                    - {json.dumps(UNKNOWN_FLUSH), json.dumps(IN_MODEL)})
            policy = json.loads(next(iter(said))) if len(said) == 1 else None
        loaded.append((src, db, info, policy))
    # Step 2: the merged work dir's policy.
    if cache_flush is not None:
        chosen = check_flush_policy(cache_flush, "merge_records(cache_flush=...)")
    else:
        chosen = measured_flush(previous) if previous.get("tasks") else None
        if chosen is None:
            chosen = next((p for *_, p in loaded if p is not None), None)
    said = {json.dumps(p): p for *_, p in loaded if p is not None}
    if len(said) > 1 or (said and chosen is not None and json.dumps(chosen) not in said):
        logger.warning("merge_records: the sources were timed with different cache-flush policies (%s); times of "
                       "two policies are never compared: %s keeps every record, and takes its best among the %s "
                       "records (pass cache_flush=... to choose another)",
                       ", ".join(f"{_source_name(s)}: {flush_label(p)}" for s, _, _, p in loaded if p is not None),
                       out, flush_label(chosen))
    # Step 3: records and summaries (a source's latencies count only when timed with the chosen policy).
    merged: dict = {t["workload_hash"]: dict(t) for t in previous["tasks"]}
    for _src, db, info, policy in loaded:
        if top_k is not None:
            db = _top_k_copy(db, int(top_k), MemoryDatabase)
        dst.merge(db)
        target = target or info.get("target")
        comparable = policy is None or chosen is None or json.dumps(policy) == json.dumps(chosen)
        for t in info.get("tasks", []):
            t = dict(t) if comparable else {**t, "best_us": None, "default_us": None}
            m = merged.get(t["workload_hash"])
            if m is None:
                merged[t["workload_hash"]] = t
            else:
                m["weight"] = max(m["weight"], t["weight"])
                m["trials"] = m.get("trials", 0) + t.get("trials", 0)
                for key in ("best_us", "default_us"):
                    vals = [v for v in (m.get(key), t.get(key)) if _finite_or_none(v) is not None]
                    m[key] = min(vals) if vals else None
    # Step 4: the merged database decides the latencies (a source may have tuned further than its summary).
    for t in merged.values():
        best = dst.query_best(t["workload_hash"], target, chosen)
        if best is not None:
            t["best_us"] = best.mean_sec * 1e6
        if chosen is not None and t.get("default_hash"):
            defaults = [r.mean_sec for r in dst.get_records(t["workload_hash"], target, best.cache_flush if best
                                                             else chosen)
                        if r.candidate_hash == t["default_hash"] and r.is_valid]
            if defaults:
                t["default_us"] = min(defaults) * 1e6
    info = {"target": target, "source": "merge_records", "tasks": list(merged.values())}
    if chosen is not None:
        info["runner_config"] = {**(previous.get("runner_config") or {}), "cache_flush": chosen}
    write_tasks_file(out, info)
    return TuningRecords(out, dst, read_tasks_file(out))


def _with_policy(db: Any, policy: Any, memory_cls: Any) -> Any:
    """``db``, or an in-memory copy whose records of unknown policy say ``policy`` (the source
    itself is not modified)."""
    from ..database.record import UNKNOWN_FLUSH

    if all(r.cache_flush != UNKNOWN_FLUSH for r in db.get_all_tuning_records()):
        return db
    mem = memory_cls()
    for shash, name, text in db._workload_rows():
        mem._put_workload(shash, name, text)
    mem._put_records(db.get_all_tuning_records())
    mem.assume_flush_policy(policy, "source tasks.json")
    return mem


def _source_name(src: Any) -> str:
    return os.fspath(src) if isinstance(src, (str, os.PathLike)) else repr(src)


def _top_k_copy(db: Any, k: int, memory_cls: Any) -> Any:
    from ..database.base import tuning_target_key

    mem = memory_cls()
    for shash, name, text in db._workload_rows():
        mem._put_workload(shash, name, text)
    best: dict = {}
    for r in db.get_all_tuning_records():
        if r.is_valid:  # per flush policy too: the k fastest of each policy (never compared across)
            best.setdefault((r.workload_hash, tuning_target_key(r.target), json.dumps(r.cache_flush)), []).append(r)
    keep = []
    for rs in best.values():
        keep += sorted(rs, key=lambda r: r.mean_sec)[:k]
    if keep:
        mem._put_records(keep)
    return mem
