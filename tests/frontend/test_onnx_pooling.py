"""ONNX pooling converter regressions against ONNX Runtime: 3-D MaxPool/AveragePool (two separable 2-D
poolings) and ceil_mode with count_include_pad=1 (the extra ceil cells are not counted, the real pads are)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402

rng = np.random.default_rng(0)


def _pool_model(op, in_shape, **attrs):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * len(in_shape))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)


def _check(model, x):
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None,
                                                                                                     {"x": x})[0]
    mod, _ = from_onnx(model)
    got = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](x).numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


CASES_3D = [
    ("MaxPool", dict(kernel_shape=[3, 2, 2], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0])),
    ("MaxPool", dict(kernel_shape=[2, 2, 2], dilations=[2, 1, 2], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[3, 3, 2], strides=[2, 2, 1], pads=[1, 1, 0, 1, 0, 1], count_include_pad=0)),
    ("AveragePool", dict(kernel_shape=[3, 2, 3], strides=[2, 2, 2], pads=[1, 1, 1, 1, 1, 1], count_include_pad=1,
                         ceil_mode=1, dilations=[1, 2, 1])),
]


@pytest.mark.compiler
@pytest.mark.parametrize("op,attrs", CASES_3D, ids=[f"{o}-{i}" for i, (o, _) in enumerate(CASES_3D)])
def test_pool3d_matches_onnxruntime(op, attrs):
    x = rng.standard_normal((1, 2, 7, 6, 8)).astype("float32")
    _check(_pool_model(op, list(x.shape), **attrs), x)


@pytest.mark.compiler
@pytest.mark.parametrize("pads", [[0, 0, 0, 0], [1, 0, 1, 1]])
def test_avgpool2d_ceil_mode_counts_real_pads_only(pads):
    x = rng.standard_normal((1, 3, 7, 8)).astype("float32")
    _check(_pool_model("AveragePool", list(x.shape), kernel_shape=[3, 3], strides=[2, 2], pads=pads, ceil_mode=1,
                       count_include_pad=1), x)
