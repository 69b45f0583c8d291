"""ONNX converter regressions: BatchNormalization with training_mode=1 (batch statistics, updated running
mean/variance) and SpaceToDepth's CRD mode, compiled, against numpy."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402

rng = np.random.default_rng(0)
F = TensorProto.FLOAT


def _run(nodes, inputs, outputs, arrays, opset=15):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, F, s) for n, s in outputs])
    mod, _ = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8))
    out = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](*arrays)
    return [o.numpy() for o in (out if isinstance(out, tuple) else [out])]


@pytest.mark.compiler
def test_batchnorm_training_mode_outputs_batch_stats_and_running_updates():
    x = rng.standard_normal((2, 3, 4, 5)).astype("float32")
    s, b = rng.random(3).astype("float32") + 0.5, rng.standard_normal(3).astype("float32")
    mean, var = rng.standard_normal(3).astype("float32"), rng.random(3).astype("float32") + 0.5
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1,
                            momentum=0.8, epsilon=1e-3)
    y, rm, rv = _run([node], [("x", x.shape), ("s", [3]), ("b", [3]), ("m", [3]), ("v", [3])],
                     [("y", x.shape), ("rm", [3]), ("rv", [3])], [x, s, b, mean, var])
    bm, bv = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    c = (1, 3, 1, 1)
    np.testing.assert_allclose(y, (x - bm.reshape(c)) / np.sqrt(bv.reshape(c) + 1e-3) * s.reshape(c) + b.reshape(c),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rm, mean * 0.8 + bm * 0.2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rv, var * 0.8 + bv * 0.2, rtol=1e-5, atol=1e-6)


@pytest.mark.compiler
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_modes(mode):
    x = rng.standard_normal((1, 2, 4, 6)).astype("float32")
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode=mode)
    (y,) = _run([node], [("x", x.shape)], [("y", [1, 8, 2, 3])], [x], opset=28)
    t = x.reshape(1, 2, 2, 2, 3, 2)
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    np.testing.assert_array_equal(y, t.transpose(perm).reshape(1, 8, 2, 3))
