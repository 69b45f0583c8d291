"""`ingot.tune`: auto-tuning in the design of TVM's MetaSchedule.

Roles, one sub-package each (swap any of them): ``database``, ``builder``, ``runner``,
``task_scheduler``, ``feature_extractor``, ``cost_model``, ``space_generator`` (alias
``space``), ``schedule_rule``, ``mutator``, ``postproc``, ``search_strategy``.

Example:
    >>> from ingot import tune as ms
    >>> # sch = ms.tune_tir(mod, target="llvm -num-cores=2", work_dir="./tune_tmp", max_trials_global=64)
    >>> # lib = ingot.build(sch.mod, target="llvm")
"""
from __future__ import annotations

import importlib
from typing import Any

_SUBPACKAGES = {
    "database", "builder", "runner", "task_scheduler", "feature_extractor", "cost_model",
    "space_generator", "schedule_rule", "mutator", "postproc", "search_strategy", "utils",
    "tune_context", "tune",
}
_ALIASES = {"space": "space_generator"}
_LAZY = {
    "tune_tir": ("ingot.tune.tune", "tune_tir"),
    "tune_tasks": ("ingot.tune.tune", "tune_tasks"),
    "apply_best": ("ingot.tune.tune", "apply_best"),
    "TuneContext": ("ingot.tune.tune_context", "TuneContext"),
    "Database": ("ingot.tune.database", "Database"),
    "SQLiteDatabase": ("ingot.tune.database", "SQLiteDatabase"),
    "MemoryDatabase": ("ingot.tune.database", "MemoryDatabase"),
    "TuningRecord": ("ingot.tune.database", "TuningRecord"),
    "Workload": ("ingot.tune.database", "Workload"),
    "LocalBuilder": ("ingot.tune.builder", "LocalBuilder"),
    "LocalRunner": ("ingot.tune.runner", "LocalRunner"),
    "estimate_flops": ("ingot.tune.utils", "estimate_flops"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
    elif name in _ALIASES:
        value = importlib.import_module(f"ingot.tune.{_ALIASES[name]}")
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"ingot.tune.{name}")
    else:
        raise AttributeError(f"module 'ingot.tune' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY) | _SUBPACKAGES | set(_ALIASES))
