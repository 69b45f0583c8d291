"""3-D ConvTranspose (issue 17: one 2-D transposed convolution per depth tap), compiled and compared with
ONNX Runtime: strides, pads, dilations, output_padding, groups, auto_pad, output_shape, bias.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP, helper  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402

pytestmark = pytest.mark.compiler

_CASES = [  # (x shape, w shape, attributes, with bias)
    ((1, 2, 3, 4, 5), (2, 3, 2, 3, 2), {}, True),
    ((2, 4, 3, 3, 4), (4, 1, 3, 2, 2), dict(strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 0], group=2), False),
    ((1, 2, 4, 3, 3), (2, 2, 2, 2, 3), dict(strides=[3, 2, 1], dilations=[2, 1, 2], output_padding=[1, 1, 0]), True),
    ((1, 1, 3, 3, 3), (1, 2, 3, 3, 3), dict(strides=[2, 2, 2], auto_pad="SAME_UPPER"), False),
    ((1, 2, 2, 3, 2), (2, 1, 2, 2, 2), dict(strides=[2, 2, 2], output_shape=[5, 7, 5]), True),
    ((1, 1, 2, 2, 2), (1, 1, 2, 2, 2), dict(strides=[1, 1, 1], pads=[1, 1, 1, 1, 1, 1]), False),
]


@pytest.mark.parametrize("xs,ws,attrs,bias", _CASES)
def test_convtranspose3d_matches_onnxruntime(xs, ws, attrs, bias):
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    co = ws[1] * attrs.get("group", 1)
    inits = [helper.make_tensor("w", TP.FLOAT, ws, w.reshape(-1).tolist())]
    inputs = ["x", "w"]
    if bias:
        inits.append(helper.make_tensor("b", TP.FLOAT, [co], rng.standard_normal(co).astype(np.float32).tolist()))
        inputs.append("b")
    node = helper.make_node("ConvTranspose", inputs, ["y"], kernel_shape=list(ws[2:]), **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.FLOAT, list(xs))],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [None] * 5)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    mod, _ = from_onnx(model, shape_dict={"x": list(xs)})
    got = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](x).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
