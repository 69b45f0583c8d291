"""ONNX ai.onnx.preview.training optimizers (issue 17): Adagrad, Adam, Momentum (standard, Nesterov),
one and several tensors, first step (T = 0) and later ones; imported, interpreted and compiled,
compared with ONNX's reference implementation (ONNX Runtime has no kernels for this domain).
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402
from ingot.frontend.reference import evaluate  # noqa: E402

_DOMAIN = "ai.onnx.preview.training"
_RNG = np.random.default_rng(5)


def _run_all(op: str, states: list, shapes: list, step: int, dtype=np.float32, **attrs) -> None:
    n = len(shapes)
    groups = ["X", "G", *states]
    names = ["R", "T"] + [f"{k}{i}" for k in groups for i in range(n)]
    outs = [f"{k}{i}_new" for k in ["X", *states] for i in range(n)]
    inputs = {"R": np.array(0.1, dtype), "T": np.array(step, np.int64)}
    for k in groups:
        for i, shape in enumerate(shapes):
            value = _RNG.standard_normal(shape).astype(dtype)
            inputs[f"{k}{i}"] = np.abs(value) if k == "H" else value    # squared-gradient state is >= 0
    elem = TP.FLOAT if dtype == np.float32 else TP.DOUBLE
    node = helper.make_node(op, names, outs, domain=_DOMAIN, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, TP.INT64 if k == "T" else elem,
                                                                         list(v.shape)) for k, v in inputs.items()],
                              [helper.make_tensor_value_info(o, elem, list(shapes[i % n])) for i, o in enumerate(outs)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(_DOMAIN, 1), helper.make_opsetid("", 17)])
    want = ReferenceEvaluator(model).run(None, inputs)
    mod, _ = from_onnx(model)
    compiled = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](*inputs.values())
    for got in (evaluate(mod, list(inputs.values())), compiled):
        got = [np.asarray(g.numpy() if hasattr(g, "numpy") else g) for g in got]
        assert len(got) == len(want)
        for name, w, g in zip(outs, want, got):
            np.testing.assert_allclose(g, np.asarray(w).astype(dtype), rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.compiler
@pytest.mark.parametrize("step", [0, 3])
def test_adagrad_matches_onnx_reference(step):
    _run_all("Adagrad", ["H"], [(3,), (2, 4)], step, decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.01)


@pytest.mark.compiler
@pytest.mark.parametrize("step,post", [(0, 0.0), (4, 0.02)])
def test_adam_matches_onnx_reference(step, post):
    _run_all("Adam", ["V", "H"], [(5,), (2, 3)], step, alpha=0.95, beta=0.85, epsilon=1e-2, norm_coefficient=0.001,
             norm_coefficient_post=post)


@pytest.mark.compiler
@pytest.mark.parametrize("mode", ["standard", "nesterov"])
@pytest.mark.parametrize("step", [0, 2])
def test_momentum_matches_onnx_reference(mode, step):
    _run_all("Momentum", ["V"], [(4,), (3, 2)], step, alpha=0.9, beta=0.3, mode=mode, norm_coefficient=0.01)


@pytest.mark.compiler
def test_adam_in_double_stays_double():
    _run_all("Adam", ["V", "H"], [(6,)], 2, dtype=np.float64, alpha=0.9, beta=0.999, epsilon=1e-8)


def test_wrong_input_count_names_the_node():
    node = helper.make_node("Momentum", ["R", "T", "X", "G"], ["Xn"], domain=_DOMAIN, alpha=0.9, beta=0.1,
                            mode="standard", norm_coefficient=0.0)
    vi = [helper.make_tensor_value_info("R", TP.FLOAT, []), helper.make_tensor_value_info("T", TP.INT64, []),
          helper.make_tensor_value_info("X", TP.FLOAT, [2]), helper.make_tensor_value_info("G", TP.FLOAT, [2])]
    graph = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("Xn", TP.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(_DOMAIN, 1), helper.make_opsetid("", 17)])
    with pytest.raises(Exception, match="Momentum.*takes R, T and then 3 groups"):
        from_onnx(model, checked=True)
