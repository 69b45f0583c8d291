"""ONNX importer: errors, names, symbolic dims, shape folding, numerics (reference evaluator)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ingot.frontend import ModelLoadError, ShapeDictError, UnsupportedOpsError  # noqa: E402
from ingot.frontend.onnx import from_onnx, inspect_onnx  # noqa: E402
from ingot.frontend.reference import evaluate  # noqa: E402


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def test_truncated_file_names_the_file(tmp_path):
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString()[:20])
    with pytest.raises(ModelLoadError, match="m.onnx"):
        from_onnx(str(path))
    with pytest.raises(ModelLoadError, match="no such file"):
        from_onnx(str(tmp_path / "missing.onnx"))


def test_all_unsupported_ops_listed_at_once():
    nodes = [helper.make_node("Foo", ["x"], ["a"], name="f0"), helper.make_node("Foo", ["a"], ["b"], name="f1"),
             helper.make_node("Bar", ["b"], ["y"], name="b0")]
    m = _model(nodes, [_vi("x", [2])], [_vi("y", [2])])
    m.graph.node[0].domain = m.graph.node[1].domain = m.graph.node[2].domain = ""
    with pytest.raises(UnsupportedOpsError) as info:
        from_onnx(m.SerializeToString())
    assert info.value.ops == {"Foo": ["f0", "f1"], "Bar": ["b0"]}


def test_unsupported_ops_error_message():
    err = UnsupportedOpsError({"Loop": ["l0", "l1"], "If": ["i0"]}, "m.onnx", 17)
    text = str(err)
    assert "Loop (2 nodes" in text and "If (1 node" in text and "m.onnx" in text


def test_wrong_shape_dict_key_lists_real_inputs():
    m = _model([helper.make_node("Relu", ["data"], ["y"])], [_vi("data", [1, 4])], [_vi("y", [1, 4])])
    with pytest.raises(ShapeDictError, match=r"\['data'\]"):
        from_onnx(m, shape_dict={"input": [1, 4]})


def test_weird_node_and_tensor_names():
    name = 'x"\n*/ weird\'; DROP'
    nodes = [helper.make_node("Relu", [name], ["y*/"], name='n"1\n*/'),
             helper.make_node("Neg", ["y*/"], ["out"], name="*/ /*")]
    m = _model(nodes, [_vi(name, [3])], [_vi("out", [3])])
    mod, _ = from_onnx(m)
    x = np.array([-1, 0, 2], "float32")
    np.testing.assert_array_equal(evaluate(mod, [x])[0], -np.maximum(x, 0))


def test_symbolic_batch_and_shape_subgraph_folds():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax"], ["bu"]),
             helper.make_node("Concat", ["bu", "m1"], ["shp"], axis=0),
             helper.make_node("Reshape", ["x", "shp"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, "int64"), "i0"), numpy_helper.from_array(np.array([0], "int64"), "ax"),
             numpy_helper.from_array(np.array([-1], "int64"), "m1")]
    m = _model(nodes, [_vi("x", ["N", 3, 4])], [_vi("y", ["N", 12])], inits)
    mod, _ = from_onnx(m)
    assert str(mod["main"].ret_struct_info) == 'R.Tensor((N, 12), dtype="float32")'
    mod, _ = from_onnx(m, shape_dict={"x": [2, 3, 4]})
    ops = [b.value.op.name for b in mod["main"].body.blocks[0].bindings if hasattr(b.value, "op")]
    assert ops == ["reshape"]  # Shape/Gather/Unsqueeze/Concat folded away
    x = np.arange(24, dtype="float32").reshape(2, 3, 4)
    np.testing.assert_array_equal(evaluate(mod, [x])[0], x.reshape(2, 12))


def test_keep_params_in_input():
    w = np.ones((4, 3), "float32")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", [2, 4])], [_vi("y", [2, 3])],
               [numpy_helper.from_array(w, "w")])
    mod, params = from_onnx(m, keep_params_in_input=True)
    assert [p.name_hint for p in mod["main"].params] == ["x", "w"] and set(params) == {"w"}
    mod, params = from_onnx(m)
    assert params == {} and len(mod["main"].params) == 1


def test_conv_bn_pool_gemm_vs_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(0)
    arrays = {"w": rng.standard_normal((8, 3, 3, 3)).astype("float32"), "b": rng.standard_normal(8).astype("float32"),
              "g": rng.random(8).astype("float32") + 0.5, "be": rng.standard_normal(8).astype("float32"),
              "mu": rng.standard_normal(8).astype("float32"), "var": rng.random(8).astype("float32") + 0.5,
              "fw": rng.standard_normal((5, 8)).astype("float32"), "fb": rng.standard_normal(5).astype("float32")}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
             helper.make_node("GlobalAveragePool", ["p"], ["gp"]), helper.make_node("Flatten", ["gp"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    m = _model(nodes, [_vi("x", [1, 3, 16, 16])], [_vi("y", [1, 5])],
               [numpy_helper.from_array(v, k) for k, v in arrays.items()])
    x = rng.standard_normal((1, 3, 16, 16)).astype("float32")
    expected = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    mod, _ = from_onnx(m)
    np.testing.assert_allclose(evaluate(mod, [x])[0], expected, rtol=1e-4, atol=1e-4)


def test_inspect_reports_histogram_and_unsupported():
    m = _model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
               [_vi("x", ["n", 4])], [_vi("y", ["n", 4])])
    info = inspect_onnx(m)
    assert info["ops"] == {"Relu": 2} and info["unsupported"] == {}
    assert info["inputs"] == [{"name": "x", "shape": ["n", 4], "dtype": "float32"}]
