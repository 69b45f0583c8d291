"""Tuning database: records, top-k, SQLite persistence and concurrency, JSON lines, merge."""
import json
import multiprocessing as mp

import pytest

from ingot.testing.kernels import add_func, matmul_func  # noqa: E402

from ingot.tune.database import (  # noqa: E402
    MemoryDatabase, SQLiteDatabase, TuningRecord, Workload, workload_hash,
)

TRACE = {"version": 1, "insts": [], "decisions": []}


def _trace(n):
    return {"version": 1, "insts": [["sample_categorical", [], [[1, 2], [0.5, 0.5]], ["v0"]]], "decisions": [[0, n]]}


@pytest.fixture(params=["memory", "sqlite"])
def db(request, tmp_path):
    return MemoryDatabase() if request.param == "memory" else SQLiteDatabase(tmp_path / "db.sqlite")


def test_workload_hash_is_structural():
    assert workload_hash(matmul_func()) == workload_hash(matmul_func())
    assert workload_hash(matmul_func()) != workload_hash(matmul_func(32))
    assert Workload.create(matmul_func()).shash == workload_hash(matmul_func())


def test_commit_query_topk(db):
    mod = matmul_func()
    wl = db.commit_workload(mod)
    assert db.has_workload(mod) and not db.has_workload(add_func())
    for i, secs in enumerate([[3e-3], [1e-3, 1.2e-3], None, [2e-3]]):
        db.commit_tuning_record(TuningRecord(_trace(i), wl.shash, secs, "llvm -num-cores=2",
                                             error_msg=None if secs else "RunError: crash"))
    assert len(db) == 4
    top = db.get_top_k(wl, 2)
    assert [r.run_secs for r in top] == [[1e-3, 1.2e-3], [2e-3]]
    assert db.query_best(mod, "llvm -num-cores=2").trace_json == _trace(1)
    assert db.query_best(mod, "llvm -num-cores=4") is None
    assert db.query_best(add_func()) is None
    failed = [r for r in db.get_records(mod) if not r.is_valid]
    assert len(failed) == 1 and failed[0].error_msg == "RunError: crash"


def test_record_needs_workload(db):
    with pytest.raises(ValueError, match="commit_workload"):
        db.commit_tuning_record(TuningRecord(TRACE, "f" * 64, [1.0], "llvm"))


def test_record_json_roundtrip():
    r = TuningRecord(_trace(3), "ab", [1e-3], "llvm", timestamp=5.0, candidate_hash="cd")
    assert TuningRecord.from_json(json.dumps(r.as_json())) == r
    with pytest.raises(ValueError, match="schema version"):
        TuningRecord.from_json({**r.as_json(), "schema_version": 99})


def test_sqlite_persists(tmp_path):
    path = tmp_path / "db.sqlite"
    db = SQLiteDatabase(path)
    wl = db.commit_workload(matmul_func())
    db.commit_tuning_record(TuningRecord(TRACE, wl.shash, [1e-3], "llvm"))
    db.close()
    db2 = SQLiteDatabase(path)
    assert len(db2) == 1 and db2.has_workload(matmul_func())
    assert db2.query_best(matmul_func(), "llvm").run_secs == [1e-3]


def _writer(path, shash, tag, n):
    db = SQLiteDatabase(path)
    for i in range(n):
        db.commit_tuning_record(TuningRecord({"version": 1, "insts": [], "decisions": [[tag, i]]},
                                             shash, [1e-3 * (i + 1)], "llvm"))


def test_sqlite_two_processes_write_at_once(tmp_path):
    path = str(tmp_path / "db.sqlite")
    db = SQLiteDatabase(path)
    shash = db.commit_workload(matmul_func()).shash
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, shash, tag, 40)) for tag in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(db) == 80
    assert len({json.dumps(r.trace_json) for r in db.get_all_tuning_records()}) == 80


def test_jsonl_roundtrip_and_orphans(db, tmp_path):
    wl = db.commit_workload(matmul_func())
    db.commit_tuning_record(TuningRecord(_trace(0), wl.shash, [2e-3], "llvm"))
    path = tmp_path / "recs.jsonl"
    assert db.export_jsonl(path) == 1
    other = MemoryDatabase()
    report = other.import_jsonl(path)
    assert (report.workloads, report.records, report.orphan_records) == (1, 1, 0)
    assert other.query_best(matmul_func()).run_secs == [2e-3]
    # A record whose workload is not in the file is reported, not imported.
    with open(path, "a") as f:
        f.write(json.dumps({"type": "record", **TuningRecord(TRACE, "9" * 64, [1.0], "llvm").as_json()}) + "\n")
    report = MemoryDatabase().import_jsonl(path)
    assert report.orphans == {"9" * 64: 1} and report.records == 1


def test_merge_keeps_best(tmp_path):
    a, b = MemoryDatabase(), SQLiteDatabase(tmp_path / "b.sqlite")
    sa, sb = a.commit_workload(matmul_func()).shash, b.commit_workload(matmul_func()).shash
    a.commit_tuning_record(TuningRecord(_trace(0), sa, [5e-3], "llvm"))
    b.commit_tuning_record(TuningRecord(_trace(0), sb, [1e-3], "llvm"))
    b.commit_tuning_record(TuningRecord(_trace(1), sb, [9e-3], "llvm"))
    report = a.merge(b)
    assert report.records == 1 and report.duplicates_replaced == 1
    assert len(a) == 2 and a.query_best(matmul_func()).run_secs == [1e-3]
    report = b.merge(a)
    assert report.records == 0 and report.duplicates_skipped == 2 and len(b) == 2


def test_records_match_by_normalized_target(db):
    """Issue 7: a record is found for any spelling of the same machine (option order, mcpu vs
    vector width, irrelevant flags), never for another core count or vector width."""
    from ingot.tune.database import tuning_target_key

    mod = matmul_func()
    wl = db.commit_workload(mod)
    db.commit_tuning_record(TuningRecord(_trace(0), wl.shash, [2e-3], "llvm -mcpu=skylake-avx512 -num-cores=2"))
    db.commit_tuning_record(TuningRecord(_trace(1), wl.shash, [1e-3], "llvm -num-cores=2 -vector-width=512 -opt-level=3"))
    db.commit_tuning_record(TuningRecord(_trace(2), wl.shash, [1e-4], "llvm -num-cores=4 -vector-width=512"))
    db.commit_tuning_record(TuningRecord(_trace(3), wl.shash, [1e-5], "llvm -num-cores=2 -mcpu=haswell"))
    for spelling in ("llvm -vector-width=512 -num-cores=2", "llvm -num-cores=2 -mcpu=icelake-server -keys=cpu",
                     "llvm -mcpu=skylake-avx512 -num-cores=2"):
        assert db.query_best(mod, spelling).trace_json == _trace(1), spelling
        assert len(db.get_records(mod, spelling)) == 2
        assert [r.trace_json for r in db.get_top_k(wl, 5, spelling)] == [_trace(1), _trace(0)]
    assert db.query_best(mod, "llvm -num-cores=4 -mcpu=skylake-avx512").trace_json == _trace(2)
    assert db.query_best(mod, "llvm -mcpu=haswell -num-cores=2").trace_json == _trace(3)
    assert db.query_best(mod, "llvm -num-cores=1 -vector-width=512") is None
    assert tuning_target_key("llvm -num-cores=2 -opt-level=2") == tuning_target_key("llvm -link-params -num-cores=2")
