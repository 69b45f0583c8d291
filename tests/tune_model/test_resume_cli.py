"""Resume after a kill (a tuning subprocess stopped mid-run) and the `ingot tune` CLI."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from ingot.testing.tune_mlp import TARGET, write_mlp_onnx
from ingot.tune.database import SQLiteDatabase

_SCRIPT = textwrap.dedent("""
    import sys
    from ingot.testing.tune_mlp import TARGET, fast_runner, mlp_model
    import ingot
    ingot.workflow.tune(mlp_model(), target=TARGET, trials={trials}, work_dir={work!r}, runner_config=fast_runner(),
               num_trials_per_iter=2, seed={seed}, num_workers=2, verbose=0, patience=0)
""")


def test_resume_after_kill_loses_nothing(tmp_path):
    work = str(tmp_path / "w")
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT.format(trials=1000, work=work, seed=0)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    db_path = os.path.join(work, "database.db")
    deadline = time.time() + 90
    seen = 0
    try:
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
            if os.path.exists(db_path):
                seen = len(SQLiteDatabase(db_path))
                if seen >= 3:
                    break
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert seen >= 3, proc.stderr.read().decode()[-2000:]
    before = SQLiteDatabase(db_path).get_all_tuning_records()
    assert len(before) >= seen
    # Resume: a budget of len(before) + 3 trials measures exactly 3 more, none twice, keeps the old ones.
    target_trials = len(before) + 3
    subprocess.run([sys.executable, "-c", _SCRIPT.format(trials=target_trials, work=work, seed=1)],
                   check=True, timeout=120, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The run ends with in-model validation: its "in-model" records are verdicts, not trials.
    after = [r for r in SQLiteDatabase(db_path).get_all_tuning_records() if r.cache_flush != "in-model"]
    assert len(after) == target_trials
    assert {r.candidate_hash for r in before} <= {r.candidate_hash for r in after}
    assert len({(r.workload_hash, r.candidate_hash) for r in after}) == len(after)
    info = json.loads((tmp_path / "w" / "tasks.json").read_text())
    assert sum(t["trials"] for t in info["tasks"]) == target_trials


def test_cli_tune_then_compile(tmp_path):
    from click.testing import CliRunner

    from ingot.cli.main import main

    model = tmp_path / "mlp.onnx"
    write_mlp_onnx(model)
    work = tmp_path / "w"
    r = CliRunner().invoke(main, ["tune", str(model), "--target", TARGET, "--trials", "4", "--work-dir", str(work),
                                  "--trials-per-round", "2", "--seed", "0"])
    assert r.exit_code == 0, r.output
    assert "--tuning-records" in r.output and (work / "database.db").exists()
    out = tmp_path / "m.ingot"
    r = CliRunner().invoke(main, ["compile", str(model), "-o", str(out), "--target", TARGET,
                                  "--tuning-records", str(work)])
    assert r.exit_code == 0, r.output
    assert "tuned" in r.output
    r = CliRunner().invoke(main, ["tune", str(model), "--time-budget", "soon", "--work-dir", str(work)])
    assert r.exit_code != 0 and "30m" in r.output
