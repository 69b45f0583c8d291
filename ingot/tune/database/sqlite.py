"""`SQLiteDatabase`: the default tuning database, one SQLite file in the work directory.

Note (concurrency): two tuners may write the same file at once (two processes tuning different
operators of one model, or a resumed run beside a running one). SQLite in WAL mode lets readers
run beside one writer; every write is one ``BEGIN IMMEDIATE`` transaction (the write lock is
taken up front, so two writers never deadlock on a lock upgrade) and the busy timeout makes a
writer wait for the other instead of failing. A connection is opened per process (and reopened
after ``fork``), because SQLite connections must not cross processes.

Schema (version 2, also in docs/tuning.md)::

    meta(key TEXT PRIMARY KEY, value TEXT)                -- schema_version
    workloads(shash TEXT PRIMARY KEY, name TEXT, mod_text TEXT, created REAL)
    records(id INTEGER PRIMARY KEY AUTOINCREMENT, workload_hash TEXT, target TEXT,
            trace_json TEXT, run_secs TEXT, mean_sec REAL, error_msg TEXT, args_info TEXT,
            candidate_hash TEXT, timestamp REAL, schema_version INTEGER,
            measure TEXT, cache_flush TEXT)                 -- the two v2 columns

Note (migration): version 2 added ``measure`` (the record's timing config, JSON) and
``cache_flush`` (its flush policy as JSON: ``false``, ``true``, ``"weights"``; NULL = unknown,
the query key). Opening a version-1 file migrates it in place, in the same ``BEGIN IMMEDIATE``
transaction that reads the version (two processes opening it at once migrate it once): two
``ALTER TABLE ... ADD COLUMN`` (the old rows get NULL: unknown policy; no row is rewritten or
lost), then the meta row says 2. An older Ingot refuses the migrated file (version 2 > 1) with
its message; export to JSON lines first to share records with one.

Example:
    >>> import tempfile, os
    >>> db = SQLiteDatabase(os.path.join(tempfile.mkdtemp(), "db.sqlite"))
    >>> len(db)
    0
"""
from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time

from .base import Database
from .record import SCHEMA_VERSION, UNKNOWN_FLUSH, ArgInfo, TuningRecord

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS workloads(shash TEXT PRIMARY KEY, name TEXT, mod_text TEXT, created REAL);
CREATE TABLE IF NOT EXISTS records(
    id INTEGER PRIMARY KEY AUTOINCREMENT, workload_hash TEXT NOT NULL, target TEXT NOT NULL,
    trace_json TEXT NOT NULL, run_secs TEXT, mean_sec REAL, error_msg TEXT, args_info TEXT,
    candidate_hash TEXT, timestamp REAL, schema_version INTEGER, measure TEXT, cache_flush TEXT);
CREATE INDEX IF NOT EXISTS records_by_workload ON records(workload_hash, target, mean_sec);
"""
#: Columns added by each schema version after 1 (`_migrate` adds them to an older file).
_ADDED_COLUMNS = {2: (("measure", "TEXT"), ("cache_flush", "TEXT"))}
_COLUMNS = ("workload_hash, target, trace_json, run_secs, mean_sec, error_msg, args_info, "
            "candidate_hash, timestamp, schema_version, measure, cache_flush")


class SQLiteDatabase(Database):
    """A tuning database in one SQLite file (WAL mode, transactional, multi-process safe).

    ``busy_timeout_s``: how long a writer waits for another process's transaction.

    Example:
        >>> # db = SQLiteDatabase("tune_tmp/database.db"); db.query_best(mod, "llvm")
    """

    def __init__(self, path: "str | os.PathLike", busy_timeout_s: float = 60.0) -> None:
        self.path = os.path.abspath(os.fspath(path))
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self.busy_timeout_s = float(busy_timeout_s)
        self._local = threading.local()
        with self._tx() as con:
            row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                con.execute("INSERT INTO meta VALUES('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise ValueError(
                    f"tuning database {self.path!r} has schema version {row[0]}; this Ingot reads up to "
                    f"{SCHEMA_VERSION}. Upgrade Ingot, or export it to JSON lines with the newer version"
                )
            elif int(row[0]) < SCHEMA_VERSION:
                self._migrate(con, int(row[0]))

    def _migrate(self, con: sqlite3.Connection, version: int) -> None:
        """Bring a file of schema ``version`` to `SCHEMA_VERSION` inside the caller's transaction
        (see the module note): add the columns later versions added, then record the version."""
        have = {row[1] for row in con.execute("PRAGMA table_info(records)")}
        for v in range(version + 1, SCHEMA_VERSION + 1):
            for name, kind in _ADDED_COLUMNS.get(v, ()):
                if name not in have:
                    con.execute(f"ALTER TABLE records ADD COLUMN {name} {kind}")
        con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    # -- connection ----------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is not None and self._local.pid == os.getpid():
            return con
        con = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
        con.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        con.executescript(_SCHEMA)  # a new file gets version 2 tables; an old one is migrated in __init__
        self._local.con, self._local.pid = con, os.getpid()
        return con

    class _Tx:
        def __init__(self, con):
            self.con = con

        def __enter__(self):
            # Retry BEGIN itself: under heavy contention sqlite can report "locked" right away.
            for attempt in range(200):
                try:
                    self.con.execute("BEGIN IMMEDIATE")
                    return self.con
                except sqlite3.OperationalError as err:
                    if "locked" not in str(err) and "busy" not in str(err):
                        raise
                    time.sleep(0.01 * (1 + attempt % 10))
            raise sqlite3.OperationalError("database is locked (gave up after retries)")

        def __exit__(self, exc_type, exc, tb):
            self.con.execute("COMMIT" if exc_type is None else "ROLLBACK")
            return False

    def _tx(self) -> "_Tx":
        return self._Tx(self._connect())

    def close(self) -> None:
        """Close this thread's connection (reopened on next use)."""
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    # -- store methods -------------------------------------------------------------------------------
    def _put_workload(self, shash, name, mod_text) -> None:
        with self._tx() as con:
            con.execute("INSERT OR IGNORE INTO workloads VALUES(?, ?, ?, ?)", (shash, name, mod_text, time.time()))

    def _get_workload_hashes(self):
        return {row[0] for row in self._connect().execute("SELECT shash FROM workloads")}

    def _workload_rows(self):
        return list(self._connect().execute("SELECT shash, name, mod_text FROM workloads ORDER BY created"))

    def _put_records(self, records, replace=()) -> None:
        with self._tx() as con:
            for r in replace:
                con.execute("DELETE FROM records WHERE workload_hash=? AND target=? AND trace_json=? "
                            "AND cache_flush IS ?", (r.workload_hash, r.target, _trace_text(r), _flush_text(r)))
            con.executemany(f"INSERT INTO records({_COLUMNS}) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                            [_row(r) for r in list(records) + list(replace)])

    def _set_unknown_measure(self, measure):
        with self._tx() as con:  # in place: ids (insertion order) kept
            cur = con.execute("UPDATE records SET measure=?, cache_flush=?, schema_version=? WHERE cache_flush IS NULL",
                              (json.dumps(measure), json.dumps(measure["cache_flush"]), SCHEMA_VERSION))
            return cur.rowcount

    def _records_of(self, shash, target):
        if target is None:
            rows = self._connect().execute(
                f"SELECT {_COLUMNS} FROM records WHERE workload_hash=? ORDER BY id", (shash,))
        else:
            names = self._matching_targets(shash, target)
            rows = self._connect().execute(
                f"SELECT {_COLUMNS} FROM records WHERE workload_hash=? AND target IN ({','.join('?' * len(names))}) "
                "ORDER BY id", (shash, *names)) if names else []
        return [_record(row) for row in rows]

    def _matching_targets(self, shash: str, key: str) -> "list[str]":
        """The stored target strings of workload ``shash`` whose `tuning_target_key` is ``key``."""
        from .base import tuning_target_key

        rows = self._connect().execute("SELECT DISTINCT target FROM records WHERE workload_hash=?", (shash,))
        return [t for (t,) in rows if tuning_target_key(t) == key]

    def _all_records(self):
        return [_record(row) for row in self._connect().execute(f"SELECT {_COLUMNS} FROM records ORDER BY id")]

    def get_top_k(self, workload, top_k, target=None, cache_flush=None):
        # Let SQLite sort (index on mean_sec) instead of loading every record: Step 1 counts the
        # valid records per flush policy, Step 2 takes the fastest of the chosen policy.
        from .base import _shash, tuning_target_key

        shash = _shash(workload)
        if top_k <= 0:
            return []
        key = tuning_target_key(target)
        where = "workload_hash=? AND mean_sec IS NOT NULL"
        params: list = [shash]
        if key is not None:
            names = self._matching_targets(shash, key)
            if not names:
                return []
            where += f" AND target IN ({','.join('?' * len(names))})"
            params.extend(names)
        con = self._connect()
        groups = {_flush_value(text): (n, newest) for text, n, newest in con.execute(
            f"SELECT cache_flush, COUNT(*), MAX(timestamp) FROM records WHERE {where} GROUP BY cache_flush", params)}
        policy = self._pick_policy(shash, groups, cache_flush)
        if policy is None:
            return []
        sql = (f"SELECT {_COLUMNS} FROM records WHERE {where} AND cache_flush IS ? "
               "ORDER BY mean_sec, timestamp LIMIT ?")
        return [_record(row) for row in con.execute(sql, [*params, _flush_text_of(policy), int(top_k)])]

    def __len__(self) -> int:
        return int(self._connect().execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def __repr__(self) -> str:
        return f"SQLiteDatabase({self.path!r})"


def _trace_text(r: TuningRecord) -> str:
    return json.dumps(r.trace_json, sort_keys=True)


def _flush_text_of(policy) -> "str | None":
    """The ``cache_flush`` column of a policy: its JSON, NULL for `UNKNOWN_FLUSH`."""
    return None if policy == UNKNOWN_FLUSH else json.dumps(policy)


def _flush_text(r: TuningRecord) -> "str | None":
    return _flush_text_of(r.cache_flush)


def _flush_value(text: "str | None"):
    return UNKNOWN_FLUSH if text is None else json.loads(text)


def _row(r: TuningRecord) -> tuple:
    mean = r.mean_sec
    return (
        r.workload_hash, r.target, _trace_text(r),
        json.dumps(r.run_secs) if r.run_secs is not None else None,
        mean if math.isfinite(mean) else None, r.error_msg,
        json.dumps([a.as_json() for a in r.args_info]), r.candidate_hash, r.timestamp, r.schema_version,
        json.dumps(r.measure) if r.measure is not None else None, _flush_text(r),
    )


def _record(row: tuple) -> TuningRecord:
    (shash, target, trace_json, run_secs, _mean, error_msg, args_info, chash, ts, version, measure, _flush) = row
    return TuningRecord(
        trace_json=json.loads(trace_json), workload_hash=shash,
        run_secs=json.loads(run_secs) if run_secs is not None else None, target=target,
        args_info=tuple(ArgInfo.from_json(a) for a in json.loads(args_info or "[]")),
        timestamp=ts, schema_version=version, error_msg=error_msg, candidate_hash=chash,
        measure=json.loads(measure) if measure is not None else None,
    )
