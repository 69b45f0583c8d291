"""The model tuner flushes exactly a kernel's weights: task extraction finds the kernel parameters
bound to graph constants, and tune_model hands them to the runner (`RunnerInput.weight_args`).
A residual add's second input is an activation (hot inside the model): it is not flushed."""
import numpy as np
import pytest

TARGET = "llvm -num-cores=2"


def _residual_conv_model():
    """x -> relu(conv(x, w0) + b0) -> relu(conv(., w1) + x): two conv kernels, the second with a residual."""
    from ingot import graph as G

    rng = np.random.default_rng(0)
    x = G.Var("x", G.TensorStructInfo((1, 8, 8, 8), "float32"))
    w0, w1 = (G.const((rng.standard_normal((8, 8, 3, 3)) / 24).astype("float32")) for _ in range(2))
    b0 = G.const(rng.standard_normal((1, 8, 1, 1)).astype("float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(G.op.relu(bb.emit(G.op.add(bb.emit(G.op.conv2d(x, w0, padding=1)), b0))))
            out = bb.emit_output(G.op.relu(bb.emit(G.op.add(bb.emit(G.op.conv2d(h, w1, padding=1)), x))))
        bb.emit_func_output(out)
    return bb.get()


@pytest.fixture(scope="module")
def tasks():
    from ingot.tune.tasks.extract import extract_tasks

    return extract_tasks(_residual_conv_model(), TARGET)


def test_extracted_weight_params(tasks):
    assert tasks
    for t in tasks:
        params = t.mod["main"].params
        assert t.output_params == (len(params) - 1,)
        # every weight is a parameter of the kernel's inputs, and the first input (the activation) is not one
        assert all(0 < i < len(params) - 1 for i in t.weight_params), (t, t.weight_params)
    convs = [t for t in tasks if "conv" in t.name]
    assert convs and all(t.weight_params for t in convs)
    # the residual kernel has two activation inputs (h and x): only its conv weight is flushed
    residual = [t for t in convs if len(t.mod["main"].params) - 1 - len(t.weight_params) >= 2]
    assert residual, [(t.name, t.weight_params, len(t.mod["main"].params)) for t in convs]


def test_tuner_passes_the_weight_indices(tasks, tmp_path, monkeypatch):
    import json

    import ingot
    from ingot.tune.runner import LocalRunner, RunnerConfig

    seen = []
    original = LocalRunner.run_one

    def spy(self, inp):
        seen.append((inp.weight_args, inp.output_args, self.config.cache_flush))
        return original(self, inp)

    monkeypatch.setattr(LocalRunner, "run_one", spy)
    cfg = RunnerConfig(number=1, repeat=1, min_repeat_ms=0, timeout_s=60, cache_flush="weights")
    ingot.workflow.tune(_residual_conv_model(), target=TARGET, trials=1, work_dir=str(tmp_path / "w"), runner_config=cfg,
               num_trials_per_iter=1, num_workers=1, verbose=0, patience=0, seed=0, max_tasks=1)
    want = (tasks[0].weight_params, tasks[0].output_params, "weights")
    assert seen and all(s == want for s in seen), (seen, want)
    info = json.loads((tmp_path / "w" / "tasks.json").read_text())
    assert info["runner_config"]["cache_flush"] == "weights"
    assert info["tasks"][0]["weight_params"] == list(tasks[0].weight_params)
