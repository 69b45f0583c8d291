"""End to end: tune the 2-kernel MLP for a handful of trials, compile with the records, time
budget, merge, record format version."""
import json
import os

import numpy as np
import pytest

import ingot
from ingot.testing.tune_mlp import TARGET, N, fast_runner, mlp_model, mlp_params, mlp_reference
from ingot.tune.database import SQLiteDatabase

FAST = dict(num_trials_per_iter=3, seed=0, num_workers=2, verbose=0)


def test_tune_model_end_to_end_then_compile(tmp_path, capsys):
    work = tmp_path / "w"
    records = ingot.workflow.tune(mlp_model(), target=TARGET, trials=8, work_dir=str(work), runner_config=fast_runner(), **FAST)
    assert isinstance(records, ingot.tune.TuningRecords) and records.work_dir == str(work)
    info = json.loads((work / "tasks.json").read_text())
    assert info["format"] == "ingot-tune-model" and info["version"] == 1 and info["target"] == TARGET
    assert [t["weight"] for t in records.tasks] == [2, 1] and sum(t["trials"] for t in records.tasks) == 8
    # every task has its default schedule measured as the baseline, and a best latency
    assert all(t["default_us"] and t["best_us"] <= t["default_us"] for t in records.tasks)
    # the estimate counts what a compile applies: the tuned best only where it beat the default by 2 %
    applied = [t["best_us"] if t["best_us"] < 0.98 * t["default_us"] else t["default_us"] for t in records.tasks]
    assert records.estimated_latency_us == pytest.approx(sum(t["weight"] * a for t, a in zip(records.tasks, applied)))
    assert "estimated kernel time per run" in records.summary()
    db = SQLiteDatabase(work / "database.db")
    # 8 distinct candidates; the default may have been timed again (a second record of its hash)
    assert len({r.candidate_hash for r in db.get_all_tuning_records()}) == 8 and len(db) in (8, 9, 10)
    package = ingot.compile(mlp_model(), TARGET, tuning_records=records)
    n_tuned = sum(a < t["default_us"] for t, a in zip(records.tasks, applied))
    counts = package.schedule_report.counts
    assert counts["tuned"] == n_tuned and counts.get("kept-default", 0) == 2 - n_tuned
    assert counts["default"] == 0 and counts["failed"] == 0  # no misses: every kernel is a task
    assert f"{n_tuned} tuned" in capsys.readouterr().err
    x = np.random.default_rng(3).standard_normal((1, N)).astype("float32")
    out = ingot.run(package, {"x": x})["y"]
    np.testing.assert_allclose(out, mlp_reference(x, mlp_params()), rtol=1e-4, atol=1e-5)


def test_time_budget_is_honoured(tmp_path):
    budget = 8.0
    records = ingot.workflow.tune(mlp_model(), target=TARGET, time_budget=budget, work_dir=str(tmp_path / "w"),
                                  runner_config=fast_runner(), patience=0, **FAST)
    info = records.info
    assert "time budget" in info["stop_reason"], info["stop_reason"]
    # The tuner's own clock (setup and in-model validation excluded): it never starts a build/run chunk
    # that the previous one says cannot finish in time, so the overrun is at most one chunk, and it may
    # stop up to one round early (a round of 3.5 s on a loaded machine left 4.5 s, too little for the
    # next). The bounds are loose on purpose (a busy 2-core CI machine, tests running in parallel);
    # without the budget the run would not stop at all (no trial limit).
    assert budget * 0.25 <= info["elapsed_s"] <= budget * 2.0 + 4.0, info["elapsed_s"]
    assert sum(t["trials"] for t in records.tasks) >= 2


def _fake_work_dir(path, secs_by_trace):
    """A work dir with one workload and records of the given latencies (no tuning needed)."""
    from ingot.tune.database import TuningRecord
    from ingot.tune.tasks import extract_tasks
    from ingot.tune.tasks.records import write_tasks_file

    task = extract_tasks(mlp_model(), TARGET)[1]
    os.makedirs(path, exist_ok=True)
    db = SQLiteDatabase(os.path.join(path, "database.db"))
    db.commit_workload(task.mod)
    for i, secs in enumerate(secs_by_trace):
        trace = {"version": 1, "insts": [], "decisions": [], "tag": i}
        db.commit_tuning_record(TuningRecord(trace, task.workload_hash, [secs], TARGET, candidate_hash=f"c{i}"))
    write_tasks_file(path, {"target": TARGET, "tasks": [
        {"name": task.name, "workload_hash": task.workload_hash, "weight": 1, "flop_count": task.flop_count,
         "kernels": task.kernels, "default_us": 50.0, "best_us": min(secs_by_trace) * 1e6,
         "trials": len(secs_by_trace), "done": False}]})
    return task


def test_merge_records_keeps_best(tmp_path):
    task = _fake_work_dir(str(tmp_path / "a"), [3e-5, 2e-5])
    _fake_work_dir(str(tmp_path / "b"), [4e-5, 3e-5, 1e-5])  # trace "tag 0/1" duplicates a's, tag 2 is new
    merged = ingot.tune.merge_records([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "m"))
    db = merged.database
    assert db.query_best(task.workload_hash, TARGET).mean_sec == pytest.approx(1e-5)
    assert len(db) == 3  # duplicates of the same trace keep the faster one
    assert merged.tasks[0]["best_us"] == pytest.approx(10.0) and merged.tasks[0]["trials"] == 5
    top1 = ingot.tune.merge_records([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "t"), top_k=1)
    assert len(top1.database) == 2  # the best of each source (same workload, different traces)


def test_newer_format_is_refused(tmp_path):
    (tmp_path / "tasks.json").write_text(json.dumps({"format": "ingot-tune-model", "version": 99, "tasks": []}))
    with pytest.raises(ValueError, match="v99"):
        ingot.tune.TuningRecords(str(tmp_path))
