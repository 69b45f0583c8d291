"""Tuning record schema v2: records say how they were timed (cache-flush policy); v1 files and
lines still read (policy "unknown"); merge and query never compare two policies."""
import json
import logging
import sqlite3

import pytest

from ingot.testing.kernels import matmul_func  # noqa: E402

from ingot.tune.database import (  # noqa: E402
    SCHEMA_VERSION, UNKNOWN_FLUSH, MemoryDatabase, SQLiteDatabase, TuningRecord, measurement,
)
from ingot.tune.runner import RunnerConfig  # noqa: E402

COLD = measurement(RunnerConfig(number=3, repeat=20, min_repeat_ms=1, cache_flush="weights"), kept="min")
WARM = measurement(RunnerConfig(), kept="all")


def _trace(n):
    return {"version": 1, "insts": [["sample_categorical", [], [[1, 2], [0.5, 0.5]], ["v0"]]], "decisions": [[0, n]]}


@pytest.fixture(params=["memory", "sqlite"])
def db(request, tmp_path):
    return MemoryDatabase() if request.param == "memory" else SQLiteDatabase(tmp_path / "db.sqlite")


def test_measurement_and_json_roundtrip_v2(tmp_path):
    assert SCHEMA_VERSION == 2
    assert COLD == {"cache_flush": "weights", "number": 3, "repeat": 20, "min_repeat_ms": 1, "kept": "min"}
    r = TuningRecord(_trace(1), "ab", [1e-3], "llvm", timestamp=5.0, candidate_hash="cd", measure=COLD)
    data = r.as_json()
    assert data["schema_version"] == 2 and data["measure"]["cache_flush"] == "weights"
    back = TuningRecord.from_json(json.dumps(data))
    assert back == r and back.cache_flush == "weights"
    assert TuningRecord(_trace(1), "ab", [1e-3], "llvm", measure=WARM).cache_flush is False
    with pytest.raises(ValueError, match="not a cache-flush policy"):
        TuningRecord.from_json({**data, "measure": {"cache_flush": "lukewarm"}})
    # A version-1 line: no measure, policy unknown (a stray "measure" in a v1 line is ignored).
    v1 = {k: v for k, v in data.items() if k != "measure"} | {"schema_version": 1}
    old = TuningRecord.from_json(v1)
    assert old.cache_flush == UNKNOWN_FLUSH and old.measure is None and old.schema_version == 1
    assert TuningRecord.from_json({**v1, "measure": COLD}).measure is None


def test_sqlite_roundtrip_v2(tmp_path):
    db = SQLiteDatabase(tmp_path / "db.sqlite")
    wl = db.commit_workload(matmul_func())
    recs = [TuningRecord(_trace(0), wl.shash, [2e-3], "llvm", measure=COLD),
            TuningRecord(_trace(1), wl.shash, [1e-3], "llvm", measure=WARM),
            TuningRecord(_trace(2), wl.shash, None, "llvm", error_msg="RunError", measure=COLD)]
    db.commit_tuning_records(recs)
    db.close()
    again = SQLiteDatabase(tmp_path / "db.sqlite")
    assert again.get_all_tuning_records() == recs
    assert [r.trace_json for r in again.get_records(wl.shash, cache_flush="weights")] == [_trace(0), _trace(2)]
    # JSON lines carry the field both ways.
    again.export_jsonl(tmp_path / "r.jsonl")
    lines = [json.loads(x) for x in open(tmp_path / "r.jsonl")]
    assert [x.get("measure", {}).get("cache_flush") for x in lines if x["type"] == "record"] == ["weights", False,
                                                                                                  "weights"]
    mem = MemoryDatabase()
    mem.import_jsonl(tmp_path / "r.jsonl")
    assert mem.get_all_tuning_records() == recs


def test_query_best_compares_one_policy(db, caplog):
    """A warm record 2x faster than every cold one is never 'best' when cold is asked for, and the
    default choice among mixed policies is announced."""
    mod = matmul_func()
    wl = db.commit_workload(mod)
    db.commit_tuning_records([TuningRecord(_trace(0), wl.shash, [2e-3], "llvm", measure=COLD),
                              TuningRecord(_trace(1), wl.shash, [3e-3], "llvm", measure=COLD),
                              TuningRecord(_trace(0), wl.shash, [1e-3], "llvm", measure=WARM)])
    assert db.query_best(mod, "llvm", cache_flush="weights").run_secs == [2e-3]
    assert db.query_best(mod, cache_flush=False).run_secs == [1e-3]
    assert [r.run_secs for r in db.get_top_k(wl, 5, cache_flush="weights")] == [[2e-3], [3e-3]]
    assert caplog.records == []
    with caplog.at_level(logging.WARNING, logger="ingot.tune"):
        best = db.query_best(mod)  # no preference: the policy with the most records (cold)
    assert best.cache_flush == "weights" and best.run_secs == [2e-3]
    assert "2 cache-flush policies" in caplog.text and "weights: 2" in caplog.text
    # Asked for a policy nobody measured: the others are still not mixed.
    assert db.query_best(mod, cache_flush=True).cache_flush == "weights"
    with pytest.raises(ValueError, match="cache-flush policy"):
        db.query_best(mod, cache_flush="cold")


def _v1_database(path, shash, rows):
    """A database file written with the schema-1 SQL of session 4, verbatim."""
    con = sqlite3.connect(path)
    con.executescript("""
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS workloads(shash TEXT PRIMARY KEY, name TEXT, mod_text TEXT, created REAL);
CREATE TABLE IF NOT EXISTS records(
    id INTEGER PRIMARY KEY AUTOINCREMENT, workload_hash TEXT NOT NULL, target TEXT NOT NULL,
    trace_json TEXT NOT NULL, run_secs TEXT, mean_sec REAL, error_msg TEXT, args_info TEXT,
    candidate_hash TEXT, timestamp REAL, schema_version INTEGER);
CREATE INDEX IF NOT EXISTS records_by_workload ON records(workload_hash, target, mean_sec);
""")
    con.execute("INSERT INTO meta VALUES('schema_version', '1')")
    con.execute("INSERT INTO workloads VALUES(?, 'main', '', 1.0)", (shash,))
    for i, secs in enumerate(rows):
        con.execute("INSERT INTO records(workload_hash, target, trace_json, run_secs, mean_sec, error_msg, args_info, "
                    "candidate_hash, timestamp, schema_version) VALUES(?,?,?,?,?,?,?,?,?,1)",
                    (shash, "llvm -num-cores=2", json.dumps(_trace(i), sort_keys=True),
                     json.dumps(secs) if secs else None, secs[0] if secs else None, None if secs else "RunError",
                     "[]", f"c{i}", 10.0 + i))
    con.commit()
    con.close()


def test_sqlite_migrates_v1_in_place(tmp_path):
    shash = SQLiteDatabase(tmp_path / "probe.db").commit_workload(matmul_func()).shash
    path = str(tmp_path / "v1.db")
    _v1_database(path, shash, [[3e-3], None, [1e-3]])
    db = SQLiteDatabase(path)  # migrates
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("2",)
    assert {"measure", "cache_flush"} <= {row[1] for row in con.execute("PRAGMA table_info(records)")}
    con.close()
    old = db.get_all_tuning_records()
    assert [r.run_secs for r in old] == [[3e-3], None, [1e-3]]  # no row lost
    assert {r.cache_flush for r in old} == {UNKNOWN_FLUSH} and {r.schema_version for r in old} == {1}
    assert db.query_best(shash).run_secs == [1e-3]
    # New records beside the old ones: known policies are preferred over unknown by default.
    db.commit_tuning_record(TuningRecord(_trace(7), shash, [5e-3], "llvm -num-cores=2", measure=COLD))
    assert db.query_best(shash, "llvm -num-cores=2").trace_json == _trace(7)
    assert db.query_best(shash, cache_flush=UNKNOWN_FLUSH).run_secs == [1e-3]
    assert len(SQLiteDatabase(path)) == 4  # opening again: already version 2, nothing to do


def test_merge_warm_and_cold_dirs(tmp_path, caplog):
    """merge_records of a warm and a cold work dir keeps every record, takes best_us among the
    chosen policy's only, says so, and apply-best's default comparison stays within one policy."""
    from ingot.tune.apply import ApplyBest, preferred_flush
    from ingot.tune.tasks.records import merge_records, write_tasks_file

    mod = matmul_func()

    def work_dir(name, measure, secs, flush):
        d = tmp_path / name
        db = SQLiteDatabase(d / "database.db")
        wl = db.commit_workload(mod)
        db.commit_tuning_records([TuningRecord(_trace(i), wl.shash, [s], "llvm -num-cores=2", measure=measure,
                                               candidate_hash=f"c{i}") for i, s in enumerate(secs)])
        write_tasks_file(str(d), {"target": "llvm -num-cores=2", "runner_config": {"cache_flush": flush},
                                  "tasks": [{"name": "mm", "workload_hash": wl.shash, "weight": 1, "flop_count": 1.0,
                                             "default_us": secs[0] * 1e6, "best_us": min(secs) * 1e6,
                                             "default_hash": "c0", "trials": len(secs)}]})
        return d, wl.shash

    cold, shash = work_dir("cold", COLD, [4e-3, 3e-3], "weights")
    warm, _ = work_dir("warm", WARM, [2e-3, 1e-3, 1.5e-3], False)
    with caplog.at_level(logging.WARNING, logger="ingot.tune"):
        merged = merge_records([cold, warm], tmp_path / "all")
    assert "different cache-flush policies" in caplog.text and "warm" in caplog.text
    assert len(merged.database) == 5  # trace 0 and 1 timed warm and cold: four records, not two
    [task] = merged.tasks
    assert task["best_us"] == pytest.approx(3e3) and task["default_us"] == pytest.approx(4e3)
    assert merged.info["runner_config"]["cache_flush"] == "weights" and preferred_flush(merged) == "weights"
    assert merged.database.query_best(shash, "llvm -num-cores=2", "weights").run_secs == [3e-3]
    # Choosing warm instead: the warm figures.
    warm_all = merge_records([cold, warm], tmp_path / "all_warm", cache_flush=False)
    assert warm_all.tasks[0]["best_us"] == pytest.approx(1e3) and warm_all.tasks[0]["default_us"] == pytest.approx(2e3)
    # Apply-best compares the cold best with the cold default (3 vs 4 ms: applied), never with the warm one.
    hook = ApplyBest(merged.database, "llvm -num-cores=2", "weights")
    best = merged.database.query_best(shash, "llvm -num-cores=2", "weights")
    defaults = [r.mean_sec for r in merged.database.get_records(shash, "llvm -num-cores=2", best.cache_flush)
                if r.candidate_hash == "c0"]
    assert defaults == [4e-3] and hook.cache_flush == "weights"


def test_work_dir_policy_adopts_its_v1_records(tmp_path, caplog):
    """A session-4 work dir (v1 records, tasks.json says "weights") resumed or merged: its old
    records join the weights group instead of being shelved as "unknown"."""
    from ingot.tune.tasks.records import merge_records, write_tasks_file

    shash = SQLiteDatabase(tmp_path / "probe.db").commit_workload(matmul_func()).shash
    old_dir = tmp_path / "old"
    old_dir.mkdir()
    _v1_database(str(old_dir / "database.db"), shash, [[3e-3], [1e-3]])
    write_tasks_file(str(old_dir), {"target": "llvm -num-cores=2", "runner_config": {"cache_flush": "weights"},
                                    "tasks": [{"name": "mm", "workload_hash": shash, "weight": 1, "flop_count": 1.0,
                                               "default_us": 3e3, "best_us": 1e3, "trials": 2}]})
    new = MemoryDatabase()
    new.commit_workload(matmul_func())
    new.commit_tuning_record(TuningRecord(_trace(5), shash, [2e-3], "llvm -num-cores=2", measure=COLD))
    new.export_jsonl(tmp_path / "new.jsonl")
    with caplog.at_level(logging.WARNING, logger="ingot.tune"):
        merged = merge_records([old_dir, tmp_path / "new.jsonl"], tmp_path / "all")
    assert "different cache-flush policies" not in caplog.text and "2 cache-flush policies" not in caplog.text
    assert merged.tasks[0]["best_us"] == pytest.approx(1e3)
    assert {r.cache_flush for r in merged.database.get_all_tuning_records()} == {"weights"}
    assert SQLiteDatabase(old_dir / "database.db").get_all_tuning_records()[0].cache_flush == UNKNOWN_FLUSH  # source untouched
    # In place (what tune_model does on resume): rows keep their order, lines round-trip as v2.
    db = SQLiteDatabase(old_dir / "database.db")
    assert db.assume_flush_policy("weights") == 2 and db.assume_flush_policy("weights") == 0
    recs = db.get_all_tuning_records()
    assert [r.run_secs for r in recs] == [[3e-3], [1e-3]] and recs[0].measure == {"cache_flush": "weights",
                                                                                  "assumed": "tasks.json"}
    assert TuningRecord.from_json(recs[0].as_json()) == recs[0]
