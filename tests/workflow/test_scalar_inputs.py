"""Graph inputs of rank 0 (a Clip bound, a CumSum axis) reach the kernels as rank 0."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import ingot  # noqa: E402


def test_rank0_inputs_through_load_compile_run(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["c"]), helper.make_node("CumSum", ["c", "axis"], ["y"])],
        "scalars",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("lo", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("hi", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("axis", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])])
    path = tmp_path / "scalars.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)
    package = ingot.compile(ingot.load(str(path)), target="llvm")
    x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    for axis in (0, 1):
        inputs = {"x": x, "lo": np.array(-0.5, "float32"), "hi": np.array(0.7, "float32"),
                  "axis": np.array(axis, "int64")}
        (y,) = ingot.run(package, inputs).values()
        np.testing.assert_allclose(y, np.cumsum(np.clip(x, -0.5, 0.7), axis=axis), rtol=1e-6)
