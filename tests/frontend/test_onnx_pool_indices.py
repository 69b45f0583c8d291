"""MaxPool's Indices output (and MaxUnpool consuming it), issue 17: compiled and compared with the ONNX
reference (`onnx.reference.ReferenceEvaluator`) and ONNX Runtime.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from ingot.testing.onnx_run import run_compiled  # noqa: E402

pytestmark = pytest.mark.compiler


def _model(nodes: list, inputs: list, outputs: list, opset: int = 22, inits: "list | None" = None):
    rank = len(inputs[0][2])   # outputs: the input's rank, sizes left to shape inference
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(n, t, [None] * rank) for n, t in outputs], inits or [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


_CASES = [  # (input shape, attributes)
    ((2, 3, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((2, 3, 7, 8), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1])),
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 1], dilations=[2, 1], ceil_mode=1)),
    ((2, 2, 6, 5), dict(kernel_shape=[2, 2], strides=[2, 2], storage_order=1, auto_pad="SAME_UPPER")),
    ((1, 2, 5, 4, 6), dict(kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[0, 1, 1, 1, 1, 0])),
    ((1, 1, 4, 5, 3), dict(kernel_shape=[2, 2, 2], storage_order=1)),
]


@pytest.mark.parametrize("shape,attrs", _CASES)
def test_maxpool_indices_match_onnx_reference(shape, attrs):
    # Small integers: many ties, where the first window element in row-major order must win.
    x = np.random.default_rng(len(shape) + len(attrs)).integers(-3, 4, shape).astype(np.float32)
    model = _model([helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)], [("x", TP.FLOAT, list(shape))],
                   [("y", TP.FLOAT), ("i", TP.INT64)], opset=12)
    got = run_compiled(model, {"x": x})
    if len(shape) == 5 and attrs.get("storage_order"):
        # onnx.reference 1.23 gives row-major indices for 3-D whatever storage_order says; ONNX Runtime
        # follows it (h + w*H + d*H*W), as the spec does.
        ort = pytest.importorskip("onnxruntime")
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    else:
        want = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].dtype == np.int64
    np.testing.assert_array_equal(got[1], want[1])


def test_maxpool_indices_feed_maxunpool_like_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng(3).standard_normal((2, 3, 6, 6)).astype(np.float32)
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxUnpool", ["y", "i"], ["z"], kernel_shape=[2, 2], strides=[2, 2])]
    model = _model(nodes, [("x", TP.FLOAT, [2, 3, 6, 6])], [("i", TP.INT64), ("z", TP.FLOAT)], opset=11)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = run_compiled(model, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
