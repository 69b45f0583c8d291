"""TVM's older ``tune_tir(..., config=TuneConfig(...))`` spelling."""
import pytest

from ingot import tune as ms
from ingot.tune import tune as tune_module


def test_config_is_unpacked_into_tune_tir_arguments(monkeypatch):
    seen = {}

    def fake_tune_tasks(tasks, work_dir, max_trials_global, num_trials_per_iter, **kwargs):
        seen.update(max_trials_global=max_trials_global, num_trials_per_iter=num_trials_per_iter,
                    strategy=tasks[0].search_strategy)
        raise RuntimeError("stop")

    monkeypatch.setattr(tune_module, "tune_tasks", fake_tune_tasks)
    from ingot import te

    A = te.placeholder((8,), name="A")
    func = te.create_prim_func([A, te.compute((8,), lambda i: A[i] * 2.0, name="B")])
    config = ms.TuneConfig(max_trials_global=4, num_trials_per_iter=2, max_trials_per_task=4, strategy="replay_trace")
    with pytest.raises(RuntimeError, match="stop"):
        ms.tune_tir(mod=func, target="llvm -num-cores=1", config=config, work_dir="unused", task_name="main")
    assert seen["max_trials_global"] == 4 and seen["num_trials_per_iter"] == 2
    assert "replay" in type(seen["strategy"]).__name__.lower() or seen["strategy"] == "replay"


def test_missing_budget_names_both_spellings():
    with pytest.raises(TypeError, match=r"max_trials_global=N.*config=TuneConfig"):
        ms.tune_tir(None, "llvm", "unused")
    with pytest.raises(TypeError, match="not both"):
        ms.tune_tir(None, "llvm", "unused", 8, config=ms.TuneConfig(max_trials_global=8))
    with pytest.raises(TypeError, match="TuneConfig"):
        ms.tune_tir(None, "llvm", "unused", config={"max_trials_global": 8})


def test_unknown_tune_config_fields_name_the_tune_tir_argument():
    with pytest.raises(TypeError, match=r"num_tuning_cores -> tune_tir num_workers="):
        ms.TuneConfig(max_trials_global=8, num_tuning_cores=2)
