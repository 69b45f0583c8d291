"""`MemoryDatabase`: an in-process database (tests, throwaway runs).

Example:
    >>> db = MemoryDatabase()
    >>> db.has_workload("0" * 64)
    False
"""
from __future__ import annotations

import threading

from .base import Database
from .record import TuningRecord


class MemoryDatabase(Database):
    """A database held in Python lists (not persisted; thread-safe).

    Example:
        >>> len(MemoryDatabase())
        0
    """

    def __init__(self) -> None:
        self._workloads: dict[str, tuple[str, str]] = {}
        self._records: list[TuningRecord] = []
        self._lock = threading.Lock()

    def _put_workload(self, shash: str, name: str, mod_text: str) -> None:
        with self._lock:
            self._workloads.setdefault(shash, (name, mod_text))

    def _get_workload_hashes(self) -> "set[str]":
        with self._lock:
            return set(self._workloads)

    def _workload_rows(self):
        with self._lock:
            return [(h, n, t) for h, (n, t) in self._workloads.items()]

    def _put_records(self, records, replace=()) -> None:
        with self._lock:
            if replace:
                keys = {r.dedup_key(): r for r in replace}
                self._records = [keys.pop(r.dedup_key(), r) for r in self._records]
            self._records.extend(records)

    def _set_unknown_measure(self, measure):
        import dataclasses

        from .record import SCHEMA_VERSION, UNKNOWN_FLUSH

        with self._lock:
            n = 0
            for k, r in enumerate(self._records):
                if r.cache_flush == UNKNOWN_FLUSH:
                    self._records[k] = dataclasses.replace(r, measure=dict(measure), schema_version=SCHEMA_VERSION)
                    n += 1
            return n

    def _records_of(self, shash, target):
        from .base import tuning_target_key

        with self._lock:
            return [r for r in self._records
                    if r.workload_hash == shash and (target is None or tuning_target_key(r.target) == target)]

    def _all_records(self):
        with self._lock:
            return list(self._records)
