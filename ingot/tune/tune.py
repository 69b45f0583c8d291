"""Entry points: `tune_tir` (one tensor program), `tune_tasks` (many), `apply_best`.

Note: everything lives in ``work_dir``: the SQLite database (``database.db``) and the logs
(``logs/tune.log``). Running the same tuning again with the same ``work_dir`` resumes: the
trials already recorded for the workload and target count toward ``max_trials_global``, their
candidates are not measured again, the cost model is trained on them and the best ones seed the
evolutionary search.

Example:
    >>> # from ingot import tune as ms
    >>> # sch = ms.tune_tir(mod, "llvm -num-cores=2", "./tune_tmp", max_trials_global=64)
    >>> # lib = ingot.build(sch.mod, target="llvm -num-cores=2")
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Sequence

from .database import Database, SQLiteDatabase, as_module

logger = logging.getLogger("ingot.tune")


def _setup_logging(work_dir: str) -> logging.Handler:
    os.makedirs(os.path.join(work_dir, "logs"), exist_ok=True)
    handler = logging.FileHandler(os.path.join(work_dir, "logs", "tune.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    return handler


def _cost_model_factory(cost_model: Any, seed: "int | None"):
    from .cost_model import CostModel, RandomModel, XGBModel

    if isinstance(cost_model, CostModel):
        return lambda: cost_model
    if cost_model in ("xgb", "xgboost"):
        return lambda: XGBModel(seed=seed)
    if cost_model in ("random", None):
        return lambda: RandomModel(seed=seed)
    raise ValueError(f"unknown cost_model {cost_model!r}; use 'xgb', 'random' or a CostModel instance")


def tune_tasks(tasks: Sequence[Any], work_dir: str, max_trials_global: int, num_trials_per_iter: int = 64, *,
               builder: Any = None, runner: Any = None, database: "Database | None" = None,
               cost_model: Any = "xgb", task_scheduler: str = "gradient", num_workers: "int | None" = None,
               runner_config: Any = None, seed: "int | None" = None, verbose: int = 1) -> Database:
    """Tune several `TuneContext` tasks sharing one budget; returns the database.

    ``task_scheduler``: ``"gradient"`` (by weight and expected gain) or ``"round-robin"``.
    ``runner_config``: how the default `LocalRunner` times; None: warm, the fastest of 10 short
    windows (`ingot.tune.runner.SHORT_WINDOWS`). Each record keeps the fastest repeat.

    Example:
        >>> # db = tune_tasks([TuneContext(f1, t, task_name="dense", weight=2), TuneContext(f2, t)],
        >>> #                 "./tune_tmp", max_trials_global=256)
    """
    from .builder import LocalBuilder
    from .runner import SHORT_WINDOWS, LocalRunner, RunnerConfig
    from .task_scheduler import create

    work_dir = os.path.abspath(os.fspath(work_dir))
    os.makedirs(work_dir, exist_ok=True)
    handler = _setup_logging(work_dir)
    own_builder, own_runner = builder is None, runner is None
    builder = builder or LocalBuilder(max_workers=num_workers)
    if runner is None and runner_config is None:
        runner_config = RunnerConfig(**SHORT_WINDOWS)  # the fastest of short windows: robust under load
    runner = runner or LocalRunner(runner_config)
    database = database if database is not None else SQLiteDatabase(os.path.join(work_dir, "database.db"))
    try:
        sched = create(task_scheduler)(tasks, builder, runner, database, max_trials_global, num_trials_per_iter,
                                       cost_model_factory=_cost_model_factory(cost_model, seed), verbose=verbose)
        sched.tune()
        tune_tasks.last_scheduler = sched  # for inspection (time split, table) after the call
    finally:
        if own_builder:
            builder.shutdown()
        if own_runner:
            runner.shutdown()
        logger.removeHandler(handler)
        handler.close()
    return database


@dataclasses.dataclass(frozen=True)
class TuneConfig:
    """TVM's older ``ms.TuneConfig(...)`` bundle (the MLC course's ``tune_tir(..., config=...)``).

    `tune_tir` takes these as its own arguments (``max_trials_global=``, ``num_trials_per_iter=``,
    ``strategy=``); ``config=TuneConfig(...)`` is unpacked into them. ``max_trials_per_task`` is
    accepted for TVM code and must not exceed ``max_trials_global`` (one task here);
    ``strategy`` ``"replay_trace"``/``"replay_func"`` map to Ingot's ``"replay"``.

    Example:
        >>> TuneConfig(max_trials_global=64, num_trials_per_iter=32).as_kwargs()
        {'max_trials_global': 64, 'num_trials_per_iter': 32, 'strategy': 'evolutionary'}
    """

    max_trials_global: int
    num_trials_per_iter: int = 64
    max_trials_per_task: "int | None" = None
    strategy: str = "evolutionary"

    def __init__(self, max_trials_global: int, num_trials_per_iter: int = 64, max_trials_per_task: "int | None" = None,
                 strategy: str = "evolutionary", **others: Any):
        if others:
            moved = {"num_tuning_cores": "num_workers=", "task_scheduler": "(tune_tasks(task_scheduler=...))",
                     "search_strategy_config": "strategy= (a SearchStrategy object)", "seed": "seed="}
            hints = "; ".join(f"{k} -> tune_tir {moved[k]}" for k in others if k in moved)
            raise TypeError(f"TuneConfig has no field(s) {sorted(others)}: it keeps max_trials_global, "
                            f"num_trials_per_iter, max_trials_per_task and strategy; pass the rest to tune_tir"
                            + (f" ({hints})" if hints else ""))
        for key, value in (("max_trials_global", max_trials_global), ("num_trials_per_iter", num_trials_per_iter),
                           ("max_trials_per_task", max_trials_per_task), ("strategy", strategy)):
            object.__setattr__(self, key, value)

    def as_kwargs(self) -> dict:
        """The `tune_tir` arguments this config stands for."""
        strategy = {"replay_trace": "replay", "replay_func": "replay"}.get(self.strategy, self.strategy)
        return {"max_trials_global": self.max_trials_global, "num_trials_per_iter": self.num_trials_per_iter,
                "strategy": strategy}


def tune_tir(mod: Any, target: Any, work_dir: str, max_trials_global: "int | None" = None,
             num_trials_per_iter: int = 64, space: Any = None, strategy: Any = "evolutionary",
             seed: "int | None" = None, cost_model: Any = "xgb", num_workers: "int | None" = None, *,
             task_name: "str | None" = None, database: "Database | None" = None, builder: Any = None,
             runner: Any = None, runner_config: Any = None, verbose: int = 1, config: "TuneConfig | None" = None):
    """Tune one tensor program; returns the best `Schedule` found (None when no candidate ran).

    ``space``: a `SpaceGenerator` (e.g. ``ScheduleFn(fn)``), a function ``fn(sch)``, or None for
    the default space from schedule rules. ``strategy``: ``"evolutionary"``, ``"replay"`` or a
    `SearchStrategy`. ``cost_model``: ``"xgb"``, ``"random"`` or a `CostModel`.
    ``num_workers``: builder processes (default: cores). ``config=TuneConfig(...)`` (TVM's older
    spelling) gives ``max_trials_global``, ``num_trials_per_iter`` and ``strategy`` instead.

    Example:
        >>> # sch = tune_tir(matmul, "llvm -num-cores=2", "./tune_tmp", max_trials_global=16, seed=0)
        >>> # print(sch.trace)
        >>> tune_tir(None, "llvm", "./tune_tmp")
        Traceback (most recent call last):
        ...
        TypeError: tune_tir: give max_trials_global=N (and num_trials_per_iter=, strategy=), or TVM's config=TuneConfig(max_trials_global=N, ...)
    """
    if config is not None:
        if not isinstance(config, TuneConfig):
            raise TypeError(f"tune_tir: config must be an ingot.tune.TuneConfig, got {type(config).__name__}; "
                            f"or pass max_trials_global=, num_trials_per_iter=, strategy= directly")
        if max_trials_global is not None:
            raise TypeError("tune_tir: give max_trials_global either directly or in config=TuneConfig(...), not both")
        if config.max_trials_per_task is not None and config.max_trials_per_task > config.max_trials_global:
            raise ValueError(f"TuneConfig: max_trials_per_task={config.max_trials_per_task} exceeds "
                             f"max_trials_global={config.max_trials_global}")
        kwargs = config.as_kwargs()
        max_trials_global, num_trials_per_iter, strategy = (kwargs["max_trials_global"], kwargs["num_trials_per_iter"],
                                                            kwargs["strategy"])
    if max_trials_global is None:
        raise TypeError("tune_tir: give max_trials_global=N (and num_trials_per_iter=, strategy=), or TVM's "
                        "config=TuneConfig(max_trials_global=N, ...)")
    from .space_generator import ScheduleFn, SpaceGenerator
    from .tune_context import TuneContext

    mod = as_module(mod)
    if space is not None and not isinstance(space, SpaceGenerator):
        if callable(space):
            space = ScheduleFn(space)
        else:
            raise TypeError(f"tune_tir: space must be a SpaceGenerator or a function taking a Schedule, got {space!r}")
    ctx = TuneContext(mod, target, space_generator=space, search_strategy=strategy, task_name=task_name, seed=seed)
    db = tune_tasks([ctx], work_dir, max_trials_global, num_trials_per_iter, builder=builder, runner=runner,
                    database=database, cost_model=cost_model, task_scheduler="round-robin", num_workers=num_workers,
                    runner_config=runner_config, seed=seed, verbose=verbose)
    return db.query_schedule(mod, ctx.target)


def apply_best(mod: Any, database: Database, target: Any = None):
    """``mod`` with every PrimFunc that has a tuned record replaced by its best schedule
    (each function is looked up as the workload ``{"main": func}``); others are kept.

    Example:
        >>> # tuned = apply_best(mod, SQLiteDatabase("tune_tmp/database.db"), "llvm -num-cores=2")
        >>> # lib = ingot.build(tuned, "llvm -num-cores=2")
    """
    from ingot.ir import IRModule
    from ingot.tir.function import PrimFunc

    mod = as_module(mod)
    funcs = {}
    for name, func in mod.items():
        if isinstance(func, PrimFunc):
            workload = mod if len(mod) == 1 and name == "main" else IRModule({"main": func})
            sch = database.query_schedule(workload, target)
            if sch is not None:
                func = sch.mod["main"]
        funcs[name] = func
    return IRModule(funcs, attrs=dict(mod.attrs) if getattr(mod, "attrs", None) else None)


__all__ = ["TuneConfig", "tune_tir", "tune_tasks", "apply_best"]
