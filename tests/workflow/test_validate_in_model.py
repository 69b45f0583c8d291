"""In-model validation (ingot/workflow/validate.py): a tuned schedule that is not faster inside the
model is reverted to the default, durably (records of policy "in-model" read by apply-best), and a
later validation redoes only the tasks whose best record changed."""
import json
import os

import numpy as np
import pytest

import ingot
from ingot.testing.tune_mlp import TARGET, N, fast_runner, mlp_model, mlp_params, mlp_reference, write_mlp_onnx
from ingot.tune.database import IN_MODEL, SQLiteDatabase, TuningRecord
from ingot.tune.tasks.records import applied_us
from ingot.workflow import validate as V

FAST = dict(num_trials_per_iter=3, seed=0, num_workers=2, verbose=0)
REAL_KERNEL_TIMES = V._kernel_times
V.WHOLE_TURN_S = 0.01  # the whole-model check: a short window is enough to check the flow


@pytest.fixture(scope="module")
def defaults_only(tmp_path_factory):
    """A work dir whose two tasks have only their default schedule measured (validation off)."""
    work = tmp_path_factory.mktemp("validate") / "w"
    ingot.workflow.tune(mlp_model(), target=TARGET, trials=2, work_dir=str(work), runner_config=fast_runner(),
               validate=False, **FAST)
    return work


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def _add_tuned(work, tag, factor=0.5):
    """A "tuned" record per task: the default's trace (so it replays) under another candidate hash,
    ``factor`` x the default's isolated time: apply-best applies it unless the model says otherwise."""
    db = SQLiteDatabase(os.path.join(work, "database.db"))
    tasks = json.load(open(os.path.join(work, "tasks.json")))["tasks"]
    for t in tasks:
        d = next(r for r in db.get_records(t["workload_hash"]) if r.candidate_hash == t["default_hash"])
        db.commit_tuning_record(TuningRecord(d.trace_json, d.workload_hash, [d.mean_sec * factor], d.target,
                                             candidate_hash=f"{tag}-{t['name']}", measure=dict(d.measure)))
    return db, tasks


def _scaled_times(monkeypatch, slower):
    """The real interleaved timing, then the tuned kernels of tasks in ``slower`` made 2x slower and
    the others 2x faster: a deterministic verdict on real measurements."""
    real = REAL_KERNEL_TIMES

    def fake(packages, arrays, rounds):
        best = real(packages, arrays, rounds)
        for k in best["tuned"]:
            best["tuned"][k] *= 2.0 if any(k.startswith(s) for s in slower) else 0.5
        return best

    monkeypatch.setattr(V, "_kernel_times", fake)


def test_reverts_kernels_slower_in_the_model_and_revalidates_changed(defaults_only, tmp_path, monkeypatch, capsys):
    work = _copy(defaults_only, tmp_path / "w")
    db, tasks = _add_tuned(work, "t1")
    names = sorted(t["name"] for t in tasks)
    slow, fast = names[0], names[1]
    # Before validation, both tuned records apply (isolated times say 2x faster).
    assert ingot.compile(mlp_model(), TARGET, tuning_records=str(work)).schedule_report.num_tuned == 2

    # Step 1: validation: the kernel that is slower in the model goes back to its default.
    _scaled_times(monkeypatch, [slow])
    report = V.validate_in_model(mlp_model(), str(work), TARGET, rounds=3, verbose=0)
    verdicts = {v.name: v for v in report.verdicts}
    assert set(verdicts) == set(names)
    assert not verdicts[slow].kept and verdicts[fast].kept and report.num_reverted == 1
    assert verdicts[slow].tuned_us > verdicts[slow].default_us > 0
    assert set(report.latency_ms) == set(report.kernel_sum_ms) == {"default", "tuned", "validated"}
    # validated = default + the kept task's (halved) kernel time difference
    assert report.kernel_sum_ms["validated"] < report.kernel_sum_ms["default"]
    in_model = [r for r in db.get_all_tuning_records() if r.cache_flush == IN_MODEL]
    assert len(in_model) == 4 and len({r.measure["validation"] for r in in_model}) == 1
    info = json.load(open(os.path.join(work, "tasks.json")))
    assert len(info["in_model"]["tasks"]) == 2
    # each task row carries its verdict: the estimate and the per-task table count a reverted task
    # at its default's time
    rows = {t["name"]: t for t in info["tasks"]}
    assert rows[slow]["in_model_kept"] is False and rows[fast]["in_model_kept"] is True
    assert applied_us(dict(rows[slow], best_us=1e-3)) == rows[slow]["default_us"]

    # Step 2: the decision is durable: a fresh compile from the work dir keeps the default there.
    capsys.readouterr()
    package = ingot.compile(mlp_model(), TARGET, tuning_records=str(work))
    counts = package.schedule_report.counts
    assert counts["tuned"] == 1 and counts["kept-default-in-model"] == 1
    assert "1 kept default (slower in the model)" in capsys.readouterr().err
    x = np.random.default_rng(1).standard_normal((1, N)).astype("float32")
    np.testing.assert_allclose(ingot.run(package, {"x": x})["y"], mlp_reference(x, mlp_params()),
                               rtol=1e-4, atol=1e-5)

    # Step 3: nothing changed: nothing is re-timed, the verdicts stand.
    again = V.validate_in_model(mlp_model(), str(work), TARGET, rounds=3, verbose=0)
    assert again.verdicts == [] and again.already_validated == 2

    # Step 4: a resumed tune finds a faster record for the slow task: it applies on its isolated
    # time until validated, then only that task is validated again.
    db.commit_tuning_record(TuningRecord(*_retagged(db, tasks, slow, "t2")))
    status = ingot.compile(mlp_model(), TARGET, tuning_records=str(work)).schedule_report
    assert status.num_tuned == 2
    _scaled_times(monkeypatch, [])
    third = V.validate_in_model(mlp_model(), str(work), TARGET, rounds=3, verbose=0, whole_model=False)
    assert [v.name for v in third.verdicts] == [slow] and third.verdicts[0].kept and third.already_validated == 1
    assert ingot.compile(mlp_model(), TARGET, tuning_records=str(work)).schedule_report.num_tuned == 2


def _retagged(db, tasks, name, tag):
    t = next(t for t in tasks if t["name"] == name)
    d = next(r for r in db.get_records(t["workload_hash"]) if r.candidate_hash == t["default_hash"])
    return (d.trace_json, d.workload_hash, [d.mean_sec * 0.25], d.target, d.args_info, d.timestamp, d.schema_version,
            None, f"{tag}-{name}", dict(d.measure))


def test_in_model_records_never_compete_with_tuner_times(defaults_only, tmp_path):
    # In-model times are another quantity: the tuner's own queries never pick them, nor warn about them.
    work = _copy(defaults_only, tmp_path / "w")
    db, tasks = _add_tuned(work, "t1")
    t = tasks[0]
    best = db.query_best(t["workload_hash"], TARGET)
    db.commit_tuning_record(TuningRecord(best.trace_json, best.workload_hash, [1e-12], best.target,
                                         candidate_hash="x", measure={"cache_flush": IN_MODEL}))
    assert db.query_best(t["workload_hash"], TARGET).cache_flush != IN_MODEL
    assert db.query_best(t["workload_hash"], TARGET, IN_MODEL).candidate_hash == "x"


def test_tune_model_ends_with_validation(tmp_path, capsys):
    # validate=True (default): the run ends with the validation; with defaults only nothing is applied
    # tuned, so nothing is timed and the work dir says so in its log, not in an error.
    records = ingot.workflow.tune(mlp_model(), target=TARGET, trials=2, work_dir=str(tmp_path / "w"),
                         runner_config=fast_runner(), **FAST)
    assert records.tasks and "in_model" not in records.info


def test_cli_no_validate_then_validate_only(tmp_path):
    from click.testing import CliRunner

    from ingot.cli.main import main

    model, work = tmp_path / "mlp.onnx", tmp_path / "w"
    write_mlp_onnx(model)
    r = CliRunner().invoke(main, ["tune", str(model), "--target", TARGET, "--trials", "2", "--work-dir", str(work),
                                  "--no-validate"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["tune", str(model), "--target", TARGET, "--work-dir", str(work), "--validate-only"])
    assert r.exit_code == 0, r.output
    assert "in-model validation: nothing new to validate" in r.output


def test_resumed_rows_keep_the_verdict_of_an_unchanged_best():
    # tasks.json rows are rebuilt after every round: a task whose best record is the one validated
    # keeps its verdict; a task with a new best is unvalidated (no "in_model_kept") until Step 5.
    from types import SimpleNamespace

    from ingot.tune.model import _task_rows

    task = SimpleNamespace(name="k", workload_hash="h", weight=1, flop_count=1.0, kernels=["k"],
                           weight_params=[], output_params=[])
    sched = SimpleNamespace(best_secs=[5e-6], default_secs=[1e-5], default_hash=["d"], skipped=[False],
                            trials=[4], done=[False])
    previous = [{"workload_hash": "h", "best_us": 5.0, "in_model_kept": False}]
    assert _task_rows(sched, [task], previous)[0]["in_model_kept"] is False
    sched.best_secs = [4e-6]
    assert "in_model_kept" not in _task_rows(sched, [task], previous)[0]
