"""Cold-cache measurement in the tuner: RunnerConfig.cache_flush reaches the measuring child, model
tuning turns it on, and a work dir is never resumed with the other kind of measurement."""
import json
import sys

import numpy as np
import pytest

from ingot.codegen.prelude import C_PRELUDE, emit_metadata_c
from ingot.codegen.toolchain import compile_shared_library
from ingot.tune.database import ArgInfo
from ingot.tune.model import MODEL_FLUSH_POLICY, MODEL_RUNNER_CONFIG, _runner_config, measured_cold, measured_flush
from ingot.tune.runner import FLUSH_MIN_REPEAT, LocalRunner, RunnerConfig, RunnerInput, flush_args

# main(A: float32[1024], B: float32[1024]): B = A + 1
_SRC = C_PRELUDE + r"""
INGOT_EXPORT int32_t ingot_main(IngotValue* args, int32_t* type_codes, int32_t num_args,
                                char* err, int32_t err_len) {
  INGOT_CHECK(ingot_check_num_args("main", num_args, 2, err, err_len));
  INGOT_CHECK(ingot_check_tensor("main", "A", args[0], type_codes[0], 1, kDLFloat, 32, 1, err, err_len));
  INGOT_CHECK(ingot_check_tensor("main", "B", args[1], type_codes[1], 1, kDLFloat, 32, 1, err, err_len));
  {
    const float* A = (const float*)ingot_tensor_data(INGOT_TENSOR(args, 0));
    float* B = (float*)ingot_tensor_data(INGOT_TENSOR(args, 1));
    for (int i = 0; i < 1024; ++i) B[i] = A[i] + 1.0f;
  }
  return INGOT_OK;
}
""" + emit_metadata_c({"version": 1, "target": "llvm", "source_included": False, "functions": {"main": {
    "symbol": "ingot_main", "params": [{"name": "A", "kind": "tensor", "dtype": "float32", "shape": [1024]},
                                       {"name": "B", "kind": "tensor", "dtype": "float32", "shape": [1024]}]}}})
ARGS = [ArgInfo("float32", (1024,))] * 2


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return compile_shared_library(_SRC, cache_dir=tmp_path_factory.mktemp("kcache"))


def test_config_timing():
    assert RunnerConfig().cache_flush is False  # tune_tir and single-op tuning: warm by convention
    cold = RunnerConfig(number=5, repeat=2, min_repeat_ms=20, cache_flush=True).timing()
    assert cold == dict(number=1, repeat=FLUSH_MIN_REPEAT, min_repeat_ms=0, cache_flush=True)
    assert RunnerConfig(repeat=30, cache_flush=True).timing()["repeat"] == 30
    assert RunnerConfig(number=5, repeat=2).timing() == dict(number=5, repeat=2, min_repeat_ms=20, cache_flush=False)
    assert MODEL_RUNNER_CONFIG["cache_flush"] == MODEL_FLUSH_POLICY == "weights"  # model tuning: weights cold


def test_flush_policies():
    inp = RunnerInput("k.so", ARGS, weight_args=(1, 2), output_args=(3,))
    assert flush_args(True, inp) is True and flush_args(False, inp) is False
    assert flush_args("weights", inp) == [1, 2]
    assert flush_args("weights+outputs", inp) == [1, 2, 3]
    assert RunnerConfig(repeat=12, cache_flush="weights").timing(inp) == dict(number=1, repeat=12, min_repeat_ms=0,
                                                                                cache_flush=[1, 2])
    with pytest.raises(ValueError, match=r"needs the kernel's weight arguments.*cache_flush=True"):
        RunnerConfig(cache_flush="weights").timing(RunnerInput("k.so", ARGS))
    with pytest.raises(ValueError, match=r"cache_flush must be one of.*'weights'"):
        RunnerConfig(cache_flush="inputs")


def test_flag_reaches_the_child(lib):
    inp = RunnerInput(lib, ARGS, workload_key="flush-test")
    with LocalRunner(RunnerConfig(number=2, repeat=3, min_repeat_ms=0, cache_flush=True, slow_cutoff=0)) as r:
        [cold] = r.run([inp])
    with LocalRunner(RunnerConfig(number=2, repeat=3, min_repeat_ms=0, slow_cutoff=0)) as r:
        [warm] = r.run([inp])
    assert cold.ok and warm.ok, (cold.error_msg, warm.error_msg)
    assert len(cold.run_secs) == FLUSH_MIN_REPEAT and all(s > 0 for s in cold.run_secs)
    assert len(warm.run_secs) == 3


def test_child_times_with_cache_flush(lib, monkeypatch):
    from ingot.runtime.module import Module
    from ingot.tune.runner import _child

    seen = []
    original = Module.time_evaluator

    def spy(self, name, dev, **kwargs):
        seen.append(kwargs)
        return original(self, name, dev, **kwargs)

    monkeypatch.setattr(Module, "time_evaluator", spy)
    inp = RunnerInput(lib, ARGS, workload_key="flush-spy")
    secs = _child._measure(inp, RunnerConfig(repeat=12, cache_flush=True, slow_cutoff=0), {})
    assert seen == [dict(number=1, repeat=12, min_repeat_ms=0, cache_flush=True)]
    assert len(secs) == 12 and np.all(np.asarray(secs) > 0)
    # the "weights" policy flushes exactly the candidate's weight arguments
    inp = RunnerInput(lib, ARGS, workload_key="flush-spy", weight_args=(1,), output_args=(1,))
    secs = _child._measure(inp, RunnerConfig(repeat=10, cache_flush="weights", slow_cutoff=0), {})
    assert seen[-1] == dict(number=1, repeat=10, min_repeat_ms=0, cache_flush=[1]) and len(secs) == 10


def _tasks_json(cache_flush=None):
    info = {"tasks": [{"name": "t", "default_us": 1.0}]}
    if cache_flush is not None:
        info["runner_config"] = {"cache_flush": cache_flush}
    return info


def test_runner_config_of_new_and_resumed_work_dirs():
    empty = {"tasks": []}
    assert measured_cold(empty) is None and measured_cold(_tasks_json()) is False
    assert measured_flush(_tasks_json("weights")) == "weights" and measured_cold(_tasks_json("weights")) is True
    assert _runner_config(None, None, empty, "w").cache_flush == "weights"  # new work dir: weights cold
    assert _runner_config(None, True, empty, "w").cache_flush == "weights"  # True: the model policy
    assert _runner_config(None, "weights+outputs", empty, "w").cache_flush == "weights+outputs"
    assert _runner_config(None, False, empty, "w").cache_flush is False  # turned off
    # A work dir from before cold timing (no runner_config) was measured warm: it stays warm.
    assert _runner_config(None, None, _tasks_json(), "w").cache_flush is False
    # One measured with round 1's policy (every argument but the first) keeps it.
    assert _runner_config(None, None, _tasks_json(True), "w").cache_flush is True
    assert _runner_config(None, None, _tasks_json("weights"), "w").cache_flush == "weights"
    mine = RunnerConfig(number=2, repeat=1, min_repeat_ms=0)
    assert _runner_config(mine, True, empty, "w") == RunnerConfig(number=2, repeat=1, min_repeat_ms=0,
                                                                  cache_flush="weights")
    assert _runner_config(mine, None, _tasks_json(False), "w") is mine
    with pytest.raises(ValueError, match=r"w_old holds records timed with warm caches.*enable_cpu_cache_flush=False"):
        _runner_config(None, True, _tasks_json(), "w_old")
    with pytest.raises(ValueError, match=r"every argument but the first.*cache_flush='weights'.*not comparable"):
        _runner_config(None, True, _tasks_json(True), "w")  # round 1's policy is not silently continued
    with pytest.raises(ValueError, match=r"timed with cold caches, cache_flush='weights'.*--enable-cpu-cache-flush"):
        _runner_config(mine, None, _tasks_json("weights"), "w")
    with pytest.raises(ValueError, match=r"enable_cpu_cache_flush must be"):
        _runner_config(None, "outputs", empty, "w")
    with pytest.raises(TypeError, match="RunnerConfig"):
        _runner_config({"number": 3}, None, empty, "w")


def test_tune_records_the_runner_config(tmp_path):
    import ingot
    from ingot.testing.tune_mlp import TARGET, mlp_model

    work = tmp_path / "w"
    cfg = RunnerConfig(number=1, repeat=1, min_repeat_ms=0, timeout_s=30)
    ingot.workflow.tune(mlp_model(), target=TARGET, trials=1, work_dir=str(work), runner_config=cfg, num_trials_per_iter=1,
               num_workers=1, verbose=0, patience=0, seed=0, enable_cpu_cache_flush=True)
    info = json.loads((work / "tasks.json").read_text())
    assert info["runner_config"]["cache_flush"] == "weights"
    # the packed weight of each dense kernel (parameter 1) is what is flushed; the output follows
    assert all(t["weight_params"] == [1] and t["output_params"] == [2] for t in info["tasks"])
    assert any(t["default_us"] for t in info["tasks"])  # the default schedule was timed cold too
    with pytest.raises(ValueError, match="not comparable"):
        ingot.workflow.tune(mlp_model(), target=TARGET, trials=2, work_dir=str(work), runner_config=cfg, verbose=0,
                   enable_cpu_cache_flush=False)


def test_cli_flag(monkeypatch, tmp_path):
    from click.testing import CliRunner

    import ingot.workflow.tune  # noqa: F401  (the module, patched below through sys.modules)
    from ingot.cli.main import main as cli

    calls = []

    class _Records:
        work_dir = str(tmp_path)

    def fake_tune(*args, **kwargs):
        calls.append(kwargs)
        return _Records()

    monkeypatch.setattr(sys.modules["ingot.workflow.tune"], "tune", fake_tune)
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")
    for flag, want in (([], None), (["--disable-cpu-cache-flush"], False), (["--enable-cpu-cache-flush"], True)):
        res = CliRunner().invoke(cli, ["tune", str(model), "--work-dir", str(tmp_path / "w")] + flag)
        assert res.exit_code == 0, res.output
        assert calls[-1]["enable_cpu_cache_flush"] is want
