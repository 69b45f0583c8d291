"""Tuning databases: workloads keyed by structural hash, records of measured candidates.

Example:
    >>> from ingot.tune.database import MemoryDatabase, SQLiteDatabase, TuningRecord
"""
from .base import Database, ImportReport, canonical_target, choose_flush_policy, tuning_target_key
from .memory import MemoryDatabase
from .record import (
    IN_MODEL, SCHEMA_VERSION, UNKNOWN_FLUSH, ArgInfo, TuningRecord, Workload, as_module, measurement, workload_hash,
)
from .sqlite import SQLiteDatabase

__all__ = ["Database", "ImportReport", "MemoryDatabase", "SQLiteDatabase", "TuningRecord", "Workload",
           "ArgInfo", "SCHEMA_VERSION", "workload_hash", "as_module", "canonical_target",
           "tuning_target_key", "UNKNOWN_FLUSH", "IN_MODEL", "measurement", "choose_flush_policy"]
