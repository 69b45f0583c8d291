"""The onnxruntime backend: ``ingot.compile(model, fallback="onnxruntime")`` for an ONNX op Ingot's
importer lacks (``GlobalLpPool``) between native ops, ``byoc=["onnxruntime"]`` for ops Ingot can compile,
export → load in a fresh process, and the errors (no fallback, unknown shapes, onnxruntime missing).
Numbers are compared with ONNX Runtime running the whole model."""
from __future__ import annotations

import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ingot.frontend.errors import ConversionError, UnsupportedOpsError  # noqa: E402
from ingot.frontend.onnx import from_onnx, supported_ops  # noqa: E402
from ingot.workflow import model as M  # noqa: E402

from _fresh_process import run_exported  # noqa: E402

RNG = np.random.default_rng(0)
W = (RNG.standard_normal((3, 3)) * 0.5).astype("float32")
B = RNG.standard_normal((3,)).astype("float32")


def _save(tmp, nodes, inputs, outputs, inits=(), name="m.onnx", opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    path = tmp / name
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), str(path))
    return path


def _det_model(tmp):
    """x[2,3,3] → MatMul → Add → GlobalLpPool (no Ingot converter) → Tanh → Mul: native ops around one
    GlobalLpPool (an op ONNX Runtime runs and Ingot lacks; Det was the example until it got a converter)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("GlobalLpPool", ["hb"], ["d"], name="lppool0"), helper.make_node("Tanh", ["d"], ["t"]),
             helper.make_node("Mul", ["t", "d"], ["y"])]
    return _save(tmp, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 1])],
                 [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")])


def _onnxruntime(path, feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.fixture(scope="module")
def det_package(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("det")
    path = _det_model(tmp)
    return path, M.compile(str(path), fallback="onnxruntime")


def test_the_fallback_example_op_is_unsupported_by_the_importer():
    # The fallback tests need an op Ingot lacks; pick another (one ONNX Runtime runs) if GlobalLpPool gets one.
    assert "GlobalLpPool" not in supported_ops()


def test_fallback_matches_onnxruntime_and_loads_in_a_fresh_process(det_package, tmp_path):
    path, package = det_package
    assert [(r["onnx_op"], r["node"]) for r in package.fallback_ops] == [("GlobalLpPool", "lppool0")]
    assert sorted(package.executable.external) == ["onnxruntime_main_0"]  # GlobalLpPool alone; the rest is native
    data = {"x": RNG.standard_normal((2, 3, 3)).astype("float32")}
    out = M.run(package, data)
    name = next(iter(out))
    np.testing.assert_allclose(out[name], _onnxruntime(path, data)[0], rtol=1e-5, atol=1e-6)

    fresh, printed = run_exported(package, data, tmp_path)
    assert "onnxruntime_main_0" in printed
    np.testing.assert_array_equal(fresh[name], out[name])


def test_without_fallback_the_error_names_the_op_and_the_fix(det_package):
    path, _ = det_package
    with pytest.raises(UnsupportedOpsError, match=r'GlobalLpPool \(1 node, e\.g\. lppool0\)[\s\S]*fallback="onnxruntime"'):
        M.load(str(path))
    kept = M.load(str(path), fallback="onnxruntime")  # kept as onnx_node, then compiled without a fallback
    with pytest.raises(Exception, match=r"ONNX ops Ingot cannot compile: GlobalLpPool \(node 'lppool0'\).*fallback=\"onnxruntime\""):
        M.compile(kept)


def test_unknown_output_shape_is_refused(tmp_path):
    # A custom-domain op: ONNX shape inference knows nothing of its outputs.
    node = helper.make_node("Mystery", ["x"], ["y"], name="m0", domain="com.example")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with pytest.raises(ConversionError, match=r"'m0' \(Mystery\).*no static shape/dtype for output 'y'.*shape_dict"):
        from_onnx(model, keep_unsupported=True)


def test_missing_onnxruntime_names_the_package(det_package, tmp_path, monkeypatch):
    from ingot.byoc.onnxruntime import OnnxRuntimeMissingError

    pkg = det_package[1].export(str(tmp_path / "m.ingot"))
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` raises ImportError
    with pytest.raises(OnnxRuntimeMissingError, match="needs the Python package 'onnxruntime'.*pip install onnxruntime"):
        M.load_package(pkg)


def test_byoc_onnxruntime_runs_a_tiny_mlp(tmp_path):
    w1 = RNG.standard_normal((8, 16)).astype("float32")
    b1 = RNG.standard_normal((16,)).astype("float32")
    w2 = RNG.standard_normal((16, 4)).astype("float32")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    path = _save(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                 [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                  numpy_helper.from_array(w2, "w2")], name="mlp.onnx")
    package = M.compile(str(path), byoc=["onnxruntime"])
    assert sorted(package.executable.external) == ["onnxruntime_main_0"]  # the whole MLP, one region
    assert package.partition_report and all(r["accepted"] for r in package.partition_report)
    data = {"x": RNG.standard_normal((2, 8)).astype("float32")}
    out = M.run(package, data)
    np.testing.assert_allclose(next(iter(out.values())), _onnxruntime(path, data)[0], rtol=1e-5, atol=1e-5)


def test_cli_compile_fallback(det_package, tmp_path):
    click_testing = pytest.importorskip("click.testing")
    from ingot.cli.main import main

    path, _ = det_package
    pkg = tmp_path / "m.ingot"
    runner = click_testing.CliRunner()
    r = runner.invoke(main, ["compile", str(path), "-o", str(pkg), "--fallback", "onnxruntime"])
    assert r.exit_code == 0, r.output
    assert "fallback: 1 op(s) run on onnxruntime: GlobalLpPool (lppool0)" in r.output
    r = runner.invoke(main, ["run", str(pkg)])
    assert r.exit_code == 0, r.output


def test_a_node_its_converter_refuses_falls_back_too(tmp_path):
    # Ingot's LpPool converter refuses ceil_mode=1 (partial edge windows); ONNX Runtime runs it.
    node = helper.make_node("LpPool", ["x"], ["y"], name="lppool0", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    path = _save(tmp_path, [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 3])], name="lppool.onnx", opset=18)
    with pytest.raises(ConversionError, match=r'ceil_mode[\s\S]*fallback="onnxruntime"'):
        M.load(str(path))
    package = M.compile(str(path), fallback="onnxruntime")
    assert [(r["onnx_op"], r["node"]) for r in package.fallback_ops] == [("LpPool", "lppool0")]
    data = {"x": RNG.standard_normal((1, 2, 5, 5)).astype("float32")}
    np.testing.assert_allclose(next(iter(M.run(package, data).values())), _onnxruntime(path, data)[0], rtol=1e-6)
