"""ONNX Div by a one-element float constant imports as a multiply by the reciprocal: the graph
holds no divide, numbers stay within an ulp of numpy / onnxruntime (exact for powers of two)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ingot.frontend.onnx import from_onnx  # noqa: E402
from ingot.frontend.reference import evaluate  # noqa: E402

F = TensorProto.FLOAT
x = np.random.default_rng(0).standard_normal((4, 64)).astype("float32") * 3


def _div_model(c: np.ndarray, then_erf: bool = False):
    nodes = [helper.make_node("Div", ["x", "c"], ["d"])]
    out = "d"
    if then_erf:  # BERT's GELU: x * (erf(x / sqrt(2)) + 1) * 0.5
        nodes.append(helper.make_node("Erf", ["d"], ["y"]))
        out = "y"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, list(x.shape))],
                          [helper.make_tensor_value_info(out, F, list(x.shape))],
                          [numpy_helper.from_array(c, "c")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _ops(mod) -> list:
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings if hasattr(b.value, "op")]


def _run(model, **options):
    mod, _ = from_onnx(model, **options)
    return mod, np.asarray(evaluate(mod, [x])[0])


def test_power_of_two_divisor_is_exact():
    mod, y = _run(_div_model(np.array(4.0, "float32")))
    assert "divide" not in _ops(mod) and "multiply" in _ops(mod)
    np.testing.assert_array_equal(y, x / np.float32(4))


def test_sqrt2_divisor_within_one_ulp_and_compiled():
    c = np.array([1.4142135], "float32")
    mod, y = _run(_div_model(c))
    assert "divide" not in _ops(mod)
    exact = x / c
    assert np.all(np.abs(y - exact) <= np.spacing(np.abs(exact)))
    from ingot import graph as G
    import ingot

    mod, _ = from_onnx(_div_model(c, then_erf=True))
    out = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](x).numpy()
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(_div_model(c, then_erf=True).SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(out, ref, atol=2e-6)


@pytest.mark.parametrize("c", [np.array(0.0, "float32"), np.array(3e38, "float32"), np.array([1, 2], "float32")])
def test_divide_kept_when_reciprocal_inexact_or_not_scalar(c):
    model = _div_model(c)
    if c.size != 1:
        model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 2
    mod, _ = from_onnx(model) if c.size == 1 else from_onnx(model, shape_dict={"x": (4, 2)})
    assert "divide" in _ops(mod)


def test_exact_division_keeps_ieee_division():
    mod, y = _run(_div_model(np.array([1.4142135], "float32")), exact_division=True)
    assert "divide" in _ops(mod)
    np.testing.assert_array_equal(y, x / np.float32(1.4142135))
