"""Task extraction and apply-best without tuning (records made by hand): fast."""

import numpy as np
import pytest

import ingot
from ingot import graph as G
from ingot.testing.tune_mlp import TARGET, N, mlp_model, mlp_module, mlp_params, mlp_reference
from ingot.tune.database import MemoryDatabase, TuningRecord
from ingot.tune.tasks import extract_tasks, fused_kernels, workload_key, workload_module


def test_extract_tasks_dedup_weight_flops():
    tasks = extract_tasks(mlp_module(), TARGET, params=mlp_params())
    assert [(t.weight, len(t.kernels)) for t in tasks] == [(2, 1), (1, 1)]
    fused, plain = tasks
    assert "relu" in fused.name and fused.name != plain.name
    # 2*N*N multiply-adds per linear; the fused one adds N relu max ops.
    assert plain.flop_count == 2 * N * N
    assert fused.flop_count == 2 * N * N + N
    # The task workload is the build's kernel with its name normalized (structurally equal).
    _, kernels = fused_kernels(mlp_module(), mlp_params())
    assert ingot.structural_equal(fused.mod, workload_module(kernels[fused.kernels[0]]))
    # Same computation under another kernel name: same key.
    k = kernels[plain.kernels[0]]
    assert workload_key(k.with_attr("global_symbol", "other_name")) == plain.workload_hash


def test_extract_tasks_from_model_and_errors():
    tasks = extract_tasks(mlp_model(), TARGET)
    assert sum(t.weight for t in tasks) == 3
    with pytest.raises(TypeError, match="ingot.load"):
        extract_tasks("not a model", TARGET)


def _record(func_or_mod, schedule_fn, secs=1e-5):
    from ingot.tir.schedule import Schedule

    wl = workload_module(func_or_mod) if not isinstance(func_or_mod, ingot.IRModule) else func_or_mod
    sch = Schedule(wl)
    schedule_fn(sch)
    return wl, TuningRecord(sch.trace.as_json(), ingot.structural_hash(wl), [secs], TARGET)


def _split_dense(sch):
    block = sch.get_block("T_dense")
    loops = sch.get_loops(block)
    sch.split(loops[1], [None, 8])


def test_apply_records_hit_miss_failed_counts():
    tasks = extract_tasks(mlp_module(), TARGET, params=mlp_params())
    fused, plain = tasks
    db = MemoryDatabase()
    # hit: the fused kernel has a valid trace.
    wl, rec = _record(fused.mod, _split_dense)
    db.commit_workload(wl)
    db.commit_tuning_record(rec)
    # failed: the plain linear kernel's record holds a trace naming a block it does not have.
    wl2, bad = _record(fused.mod, lambda s: s.get_block("T_relu"))
    db.commit_workload(plain.mod)
    db.commit_tuning_record(TuningRecord(bad.trace_json, plain.workload_hash, [1e-5], TARGET))
    hook = ingot.tune.apply_records(db, TARGET)
    mod = G.transform.BindParams("main", mlp_params())(mlp_module())
    with pytest.warns(RuntimeWarning, match="does not apply"):
        ex = G.build(mod, TARGET, apply_schedule=hook)
    report = hook.report(ex.schedule_report)
    assert report.counts == {"tuned": 1, "default": 0, "failed": 1}
    assert "1 tuned" in str(report) and "1 failed" in str(report)
    x = np.random.default_rng(1).standard_normal((1, N)).astype("float32")
    y = G.Executor(ex, ingot.cpu())["main"](x).numpy()
    np.testing.assert_allclose(y, mlp_reference(x, mlp_params()), rtol=1e-4, atol=1e-5)
    # miss: another target has no records → every kernel default.
    hook2 = ingot.tune.apply_records(db, "llvm -num-cores=1")
    ex2 = G.build(mod, "llvm -num-cores=1", apply_schedule=hook2)
    assert hook2.report(ex2.schedule_report).counts == {"tuned": 0, "default": 2, "failed": 0}


def test_tuned_kernel_keeps_its_name_and_trace_applies():
    fused = extract_tasks(mlp_module(), TARGET, params=mlp_params())[0]
    db = MemoryDatabase()
    wl, rec = _record(fused.mod, _split_dense)
    db.commit_workload(wl)
    db.commit_tuning_record(rec)
    _, kernels = fused_kernels(mlp_module(), mlp_params())
    kernel = kernels[fused.kernels[0]]
    out = ingot.tune.apply_records(db, TARGET)(kernel)
    assert out.attrs["global_symbol"] == kernel.attrs["global_symbol"]
    expected = db.query_schedule(wl, TARGET).mod["main"]
    assert ingot.structural_equal(out.body, expected.body)


def test_compile_with_tuning_records_reports(tmp_path, capsys):
    from ingot.tune.database import SQLiteDatabase
    from ingot.workflow.model import compile as compile_model
    from ingot.workflow.model import run

    tasks = extract_tasks(mlp_model(), TARGET)
    work = tmp_path / "w"
    work.mkdir()
    db = SQLiteDatabase(work / "database.db")
    wl, rec = _record(tasks[1].mod, _split_dense)
    db.commit_workload(wl)
    db.commit_tuning_record(rec)
    package = compile_model(mlp_model(), TARGET, tuning_records=str(work))
    assert package.schedule_report.counts == {"tuned": 1, "default": 1, "failed": 0}
    assert "1 tuned, 1 default" in capsys.readouterr().err
    x = np.random.default_rng(2).standard_normal((1, N)).astype("float32")
    np.testing.assert_allclose(run(package, {"x": x})["y"], mlp_reference(x, mlp_params()), rtol=1e-4, atol=1e-5)


def test_apply_records_bad_source():
    with pytest.raises(FileNotFoundError, match="work dir"):
        ingot.tune.apply_records("/nonexistent/tune_dir", TARGET)


def test_parse_duration():
    from ingot.tune.tasks import parse_duration

    assert parse_duration("30m") == 1800 and parse_duration("1h30m") == 5400 and parse_duration("2.5s") == 2.5
    with pytest.raises(ValueError, match="30m"):
        parse_duration("soon")


def test_apply_records_match_by_normalized_target():
    """Issue 7: records tuned for ``llvm -num-cores=2`` apply when the model is compiled for the
    same machine spelled otherwise (option order, -mcpu with the same vector width, -opt-level),
    not for another core count."""
    from ingot.target import Target

    fused = extract_tasks(mlp_module(), TARGET, params=mlp_params())[0]
    db = MemoryDatabase()
    wl, rec = _record(fused.mod, _split_dense)
    db.commit_workload(wl)
    db.commit_tuning_record(rec)
    _, kernels = fused_kernels(mlp_module(), mlp_params())
    kernel = kernels[fused.kernels[0]]
    bits = Target(TARGET).vector_width_bits
    for spelling in (f"llvm -opt-level=3 -vector-width={bits} -num-cores=2", "llvm -keys=cpu -num-cores=2"):
        hook = ingot.tune.apply_records(db, spelling)
        assert hook(kernel) is not None, spelling
    assert ingot.tune.apply_records(db, "llvm -num-cores=1")(kernel) is None
