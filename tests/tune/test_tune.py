"""End to end: tune_tir on a 64x64 matmul (16 trials), resume from work_dir, ScheduleFn spaces, apply_best."""

import numpy as np

from ingot.testing.kernels import add_func, matmul_func  # noqa: E402

import ingot  # noqa: E402
from ingot import tune as ms  # noqa: E402
from ingot.tune.database import SQLiteDatabase  # noqa: E402
from ingot.tune.runner import RunnerConfig  # noqa: E402
from ingot.tune.search_strategy import EvolutiveSearch  # noqa: E402

TARGET = "llvm -num-cores=2"
FAST = RunnerConfig(number=2, repeat=1, min_repeat_ms=0, timeout_s=20)


def _check_matmul(mod):
    a, b = np.random.rand(64, 64).astype("float32"), np.random.rand(64, 64).astype("float32")
    c = np.zeros((64, 64), "float32")
    ingot.build(mod, TARGET)["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_tune_tir_default_space_then_resume(tmp_path, kernel_cache):
    work = tmp_path / "tune"
    strategy = EvolutiveSearch(population_size=16, genetic_num_iters=1, seed=0)
    sch = ms.tune_tir(matmul_func(), TARGET, str(work), max_trials_global=16, num_trials_per_iter=8,
                      strategy=strategy, seed=0, cost_model="xgb", num_workers=2, runner_config=FAST, verbose=0)
    assert sch is not None
    _check_matmul(sch.mod)
    db = SQLiteDatabase(work / "database.db")
    records = db.get_records(matmul_func())
    assert len(records) == 16 and len({r.candidate_hash for r in records}) == 16
    best = db.query_best(matmul_func(), TARGET)
    assert best.is_valid and best.trace_json == sch.trace.as_json()
    log = (work / "logs" / "tune.log").read_text()
    assert "search" in log and "build" in log and "run" in log and "GFLOP/s" in log
    # Resume: the same budget measures nothing new; a bigger one continues without repeats.
    ms.tune_tir(matmul_func(), TARGET, str(work), max_trials_global=16, num_trials_per_iter=8,
                strategy=EvolutiveSearch(population_size=16, genetic_num_iters=1, seed=1), seed=1,
                num_workers=2, runner_config=FAST, verbose=0)
    assert len(db) == 16
    sch2 = ms.tune_tir(matmul_func(), TARGET, str(work), max_trials_global=24, num_trials_per_iter=8,
                       strategy=EvolutiveSearch(population_size=16, genetic_num_iters=1, seed=2), seed=2,
                       num_workers=2, runner_config=FAST, verbose=0)
    records = db.get_records(matmul_func())
    assert len(records) == 24 and len({r.candidate_hash for r in records}) == 24
    assert db.query_best(matmul_func(), TARGET).mean_sec <= best.mean_sec
    _check_matmul(sch2.mod)
    # apply_best puts the tuned schedule into a module.
    tuned = ms.apply_best(ingot.IRModule({"main": matmul_func()}), db, TARGET)
    assert ingot.structural_equal(tuned, sch2.mod)


def _user_space(sch):
    b = sch.get_block("C")
    i, j, k = sch.get_loops(b)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, k, i1, j1)
    sch.parallel(i0)
    sch.vectorize(j1)


def test_tune_tir_schedule_fn_replay_strategy(tmp_path, kernel_cache):
    sch = ms.tune_tir(matmul_func(), TARGET, str(tmp_path / "w"), max_trials_global=6, num_trials_per_iter=3,
                      space=ms.space.ScheduleFn(_user_space), strategy="replay", cost_model="random", seed=0,
                      num_workers=2, runner_config=FAST, verbose=0)
    assert sch is not None
    assert "sample_perfect_tile" in str(sch.trace)
    _check_matmul(sch.mod)


def test_tune_tasks_two_tasks_gradient(tmp_path, kernel_cache):
    tasks = [ms.TuneContext(matmul_func(), TARGET, task_name="matmul", weight=2.0, seed=0,
                            search_strategy="replay"),
             ms.TuneContext(add_func(), TARGET, task_name="add", weight=1.0, seed=0, search_strategy="replay")]
    db = ms.tune_tasks(tasks, str(tmp_path / "w"), max_trials_global=8, num_trials_per_iter=2, cost_model="random",
                       num_workers=2, runner_config=FAST, verbose=0)
    assert db.query_best(matmul_func(), TARGET) is not None
    assert db.query_best(add_func(), TARGET) is not None
    sched = ms.tune_tasks.last_scheduler
    assert sum(sched.trials) <= 8 and set(sched.time_split) == {"search", "build", "run", "other"}
