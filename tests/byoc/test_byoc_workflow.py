"""BYOC through the model workflow and the CLI: ``ingot.compile(model, byoc=["cblas"])`` and
``ingot compile --byoc cblas``; the package loads in a fresh process and matches the native build."""
from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ingot.workflow import model as M  # noqa: E402

from _fresh_process import run_exported  # noqa: E402


@pytest.fixture()
def model_path(tmp_path):
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((16, 32)).astype("float32")
    b1 = rng.standard_normal((32,)).astype("float32")
    w2 = rng.standard_normal((32, 8)).astype("float32")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("Sigmoid", ["r"], ["s"]),
             helper.make_node("MatMul", ["s", "w2"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                           numpy_helper.from_array(w2, "w2")])
    import onnx

    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def test_compile_with_byoc_matches_native_and_reloads(model_path, tmp_path):
    data = {"x": np.random.default_rng(1).standard_normal((4, 16)).astype("float32")}
    native = M.run(M.compile(M.load(str(model_path))), data)
    package = M.compile(M.load(str(model_path)), byoc=["cblas"])
    assert sorted(package.executable.external) == ["cblas_main_0", "cblas_main_1"]
    assert any(r["accepted"] for r in package.partition_report)
    out = M.run(package, data)
    name = next(iter(out))
    np.testing.assert_allclose(out[name], native[name], rtol=1e-4, atol=1e-5)
    fresh, printed = run_exported(package, data, tmp_path)
    assert "cblas_main_0" in printed
    np.testing.assert_array_equal(fresh[name], out[name])


def test_unknown_backend_is_named(model_path):
    with pytest.raises(Exception, match="no BYOC backend 'npu'"):
        M.compile(M.load(str(model_path)), byoc=["npu"])


def test_cli_compile_byoc(model_path, tmp_path):
    click_testing = pytest.importorskip("click.testing")
    from ingot.cli.main import main

    pkg = tmp_path / "m.ingot"
    runner = click_testing.CliRunner()
    r = runner.invoke(main, ["compile", str(model_path), "-o", str(pkg), "--byoc", "cblas"])
    assert r.exit_code == 0, r.output
    assert "cblas" in r.output
    assert M.load_package(str(pkg)).executable.external
    r = runner.invoke(main, ["run", str(pkg)])
    assert r.exit_code == 0, r.output


def test_exported_weights_are_stored_once_whichever_backend_runs_them(tmp_path):
    # Issue 19: an artifact with BYOC regions is at most 1.05x the native one (a backend reads the
    # package's one weights blob; nothing is copied into its region). 2 x 512 x 512 weights = 2 MiB.
    import os

    import onnx

    rng = np.random.default_rng(0)
    w1, w2 = (rng.standard_normal((512, 512)).astype("float32") for _ in range(2))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 512])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 512])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    path = tmp_path / "big.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    sizes = {}
    for name, byoc in (("native", None), ("cblas", ["cblas"]), ("onnxruntime", ["onnxruntime"])):
        package = M.compile(M.load(str(path)), byoc=byoc)
        assert bool(package.executable.external) == (byoc is not None), name
        exported = package.export(str(tmp_path / f"{name}.ingot"))
        sizes[name] = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(exported) for f in files)
    assert sizes["native"] > 2 * 512 * 512 * 4
    assert max(sizes["cblas"], sizes["onnxruntime"]) <= 1.05 * sizes["native"], sizes
