"""A compiled model exported at graph level loads back through the runtime in a fresh process."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ingot
from ingot import graph as G

pytestmark = pytest.mark.compiler


def _mlp(rng):
    w0 = rng.standard_normal((32, 64)).astype("float32")
    b0 = rng.standard_normal(32).astype("float32")
    w1 = rng.standard_normal((10, 32)).astype("float32")
    b1 = rng.standard_normal(10).astype("float32")
    bb = G.BlockBuilder()
    x = G.Var("x", G.TensorStructInfo((1, 64), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(G.op.linear(x, G.const(w0), G.const(b0)))
            lv1 = bb.emit(G.op.relu(lv0))
            out = bb.emit_output(G.op.linear(lv1, G.const(w1), G.const(b1)))
        bb.emit_func_output(out)
    reference = lambda data: np.maximum(data @ w0.T + b0, 0) @ w1.T + b1  # noqa: E731
    return bb.get(), reference


def test_exported_model_runs_in_fresh_process_via_runtime_load_module(tmp_path):
    rng = np.random.default_rng(0)
    mod, reference = _mlp(rng)
    ex = G.build(mod, "llvm")
    path = str(tmp_path / "mlp.so")
    ex.export_library(path)
    data = rng.standard_normal((1, 64)).astype("float32")
    np.save(tmp_path / "x.npy", data)
    np.save(tmp_path / "ref.npy", reference(data))
    code = (
        "import numpy as np, ingot\n"
        f"ex = ingot.runtime.load_module({path!r})\n"
        "vm = ingot.runtime.Executor(ex, ingot.cpu())\n"
        f"out = vm['main'](np.load({str(tmp_path / 'x.npy')!r}))\n"
        f"np.testing.assert_allclose(out.numpy(), np.load({str(tmp_path / 'ref.npy')!r}), rtol=1e-4, atol=1e-4)\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_manifest_cannot_choose_code_outside_ingot(tmp_path):
    rng = np.random.default_rng(1)
    mod, _ = _mlp(rng)
    path = str(tmp_path / "mlp.so")
    G.build(mod, "llvm").export_library(path)
    manifest = tmp_path / "mlp.json"
    text = manifest.read_text().replace("ingot.graph.load_executable", "os.system")
    manifest.write_text(text)
    with pytest.raises(ingot.runtime.ModuleLoadError, match="not an ingot function"):
        ingot.runtime.load_module(path)
    assert os.path.exists(path)
