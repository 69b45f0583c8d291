"""The `ingot` command: compile → run → inspect → bench on a tiny model, and one-line errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
click_testing = pytest.importorskip("click.testing")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ingot.cli.main import main, parse_shapes  # noqa: E402


@pytest.fixture()
def model_path(tmp_path):
    w = np.random.default_rng(0).standard_normal((10, 8)).astype("float32")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Softmax", ["h"], ["y"])],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
                          [numpy_helper.from_array(w, "w")])
    path = tmp_path / "m.onnx"
    import onnx

    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def test_parse_shapes():
    assert parse_shapes("data:1x3x8x8,m:1x?") == {"data": [1, 3, 8, 8], "m": [1, None]}


def test_help_on_every_command():
    runner = click_testing.CliRunner()
    for cmd in ([], ["compile"], ["run"], ["inspect"], ["bench"]):
        result = runner.invoke(main, cmd + ["--help"])
        assert result.exit_code == 0 and "Usage" in result.output


def test_inspect(model_path):
    result = click_testing.CliRunner().invoke(main, ["inspect", str(model_path)])
    assert result.exit_code == 0, result.output
    assert "MatMul" in result.output and "all operators are supported" in result.output


def test_bad_file_one_line_error_nothing_written(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 3)
    out = tmp_path / "bad.ingot"
    result = click_testing.CliRunner().invoke(main, ["compile", str(bad), "-o", str(out)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output and "bad.onnx" in result.output
    assert not out.exists()


@pytest.mark.compiler
def test_compile_run_bench(model_path, tmp_path):
    runner = click_testing.CliRunner()
    pkg = tmp_path / "m.ingot"
    r = runner.invoke(main, ["compile", str(model_path), "-o", str(pkg)])
    assert r.exit_code == 0, r.output
    x = np.random.default_rng(1).standard_normal((1, 10)).astype("float32")
    np.savez(tmp_path / "in.npz", x=x)
    r = runner.invoke(main, ["run", str(pkg), "--inputs", str(tmp_path / "in.npz"), "--print-top", "2",
                             "--outputs", str(tmp_path / "out.npz")])
    assert r.exit_code == 0, r.output
    w = np.load(tmp_path / "in.npz")["x"]
    got = np.load(tmp_path / "out.npz")["y"]
    import onnxruntime as ort

    expected = ort.InferenceSession(str(model_path)).run(None, {"x": w})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    r = runner.invoke(main, ["bench", str(pkg), "--repeat", "3", "--warmup", "1"])
    assert r.exit_code == 0 and "p50" in r.output
    np.savez(tmp_path / "wrong.npz", x=x[:, :5])
    r = runner.invoke(main, ["run", str(pkg), "--inputs", str(tmp_path / "wrong.npz")])
    assert r.exit_code == 1 and "expected shape [1, 10]" in r.output


def test_bench_profile_lists_kernels(model_path, tmp_path):
    from ingot.workflow import model as M

    runner = click_testing.CliRunner()
    pkg = tmp_path / "m.ingot"
    assert runner.invoke(main, ["compile", str(model_path), "-o", str(pkg)]).exit_code == 0
    r = runner.invoke(main, ["bench", str(pkg), "--repeat", "3", "--warmup", "1", "--profile"])
    assert r.exit_code == 0, r.output
    assert "per-kernel profile" in r.output and "kernels total" in r.output
    # The same through the Python API: every kernel of the plan appears once per run, shares add up.
    package = M.load_package(str(pkg))
    prof = M.profile(package, {"x": np.ones((1, 10), "float32")}, repeat=3)
    steps = [s for s in package.executable.plans["main"]["steps"] if s["op"] == "call_tir"]
    assert sum(k.calls for k in prof.kernels) == len(steps) >= 1
    assert abs(sum(k.percent for k in prof.kernels) - 100.0) < 1e-6
    assert all(k.ms >= 0 for k in prof.kernels)
