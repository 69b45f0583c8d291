"""`ingot.tune`: auto-tuning in the design of TVM's MetaSchedule.

Roles, one sub-package each (swap any of them): ``database``, ``builder``, ``runner``,
``task_scheduler``, ``feature_extractor``, ``cost_model``, ``space_generator`` (alias
``space``), ``schedule_rule``, ``mutator``, ``postproc``, ``search_strategy``.

Whole models: `tune_model` (``ingot.tune.tune_model(model, target, trials=..., work_dir=...)``)
tunes every kernel of a loaded model; the model workflow's ``ingot.workflow.tune`` adds loading a
file and in-model validation. Compatibility: this package used to be callable too
(``ingot.tune(model, ...)``, through a module-class swap); that call is now
``ingot.workflow.tune(model, ...)``, with the same arguments.

Example:
    >>> from ingot import tune as ms
    >>> callable(ms.tune_model)
    True
    >>> # sch = ms.tune_tir(mod, target="llvm -num-cores=2", work_dir="./tune_tmp", max_trials_global=64)
    >>> # lib = ingot.build(sch.mod, target="llvm")
"""
from __future__ import annotations

from ingot.support import lazy_exports

_SUBPACKAGES = {
    "database", "builder", "runner", "task_scheduler", "feature_extractor", "cost_model",
    "space_generator", "schedule_rule", "mutator", "postproc", "search_strategy", "utils",
    "tune_context", "tune", "tasks", "model", "apply",
}
_LAZY = {
    "space": ("ingot.tune.space_generator", None),  # alias
    "tune_tir": ("ingot.tune.tune", "tune_tir"),
    "TuneConfig": ("ingot.tune.tune", "TuneConfig"),
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
    # Whole-model tuning (ingot/tune/model.py, ingot/tune/tasks/, ingot/tune/apply.py).
    "tune_model": ("ingot.tune.model", "tune_model"),
    "extract_tasks": ("ingot.tune.tasks.extract", "extract_tasks"),
    "ExtractedTask": ("ingot.tune.tasks.extract", "ExtractedTask"),
    "TuningRecords": ("ingot.tune.tasks.records", "TuningRecords"),
    "merge_records": ("ingot.tune.tasks.records", "merge_records"),
    "apply_records": ("ingot.tune.apply", "apply_records"),
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _SUBPACKAGES)
