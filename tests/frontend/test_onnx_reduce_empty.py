"""ReduceMax/ReduceMin over an axis of size 0: ONNX wants -inf/+inf (lowest/highest for integers), not the
finite identity of the TE reduction."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402


def _model(op, elem, in_shape, out_shape, keepdims):
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    nodes = [helper.make_node("Constant", [], ["a"], value=axes),
             helper.make_node(op, ["x", "a"], ["y"], keepdims=keepdims)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, in_shape)],
                          [helper.make_tensor_value_info("y", elem, out_shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


@pytest.mark.compiler
@pytest.mark.parametrize("op,elem,dtype,keep,expected", [
    ("ReduceMax", TensorProto.FLOAT, "float32", 1, -np.inf),
    ("ReduceMin", TensorProto.FLOAT, "float32", 0, np.inf),
    ("ReduceMax", TensorProto.INT32, "int32", 1, np.iinfo("int32").min),
])
def test_reduce_max_min_over_empty_axis(op, elem, dtype, keep, expected):
    x = np.zeros((2, 0, 3), dtype)
    out_shape = [2, 1, 3] if keep else [2, 3]
    mod, _ = from_onnx(_model(op, elem, [2, 0, 3], out_shape, keep))
    got = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](x)
    got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
    assert got.shape == tuple(out_shape) and got.dtype == np.dtype(dtype)
    assert (got == expected).all()
