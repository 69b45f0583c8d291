"""ONNX ai.onnx.preview FlexAttention (issue 17): plain, grouped-query, custom scale, score_mod
subgraphs (causal mask built from Shape/Range, soft cap, bias), prob_mod, float16 and double;
imported, interpreted and compiled, compared with ONNX's reference implementation (ONNX Runtime cannot
load opset 26 models) and with numpy; the score_mod is fused into the Q·Kᵀ kernel.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402
from ingot.frontend.reference import evaluate  # noqa: E402
from ingot.graph.transform import default_build_pipeline  # noqa: E402

_RNG = np.random.default_rng(26)
_ELEM = {np.float16: TP.FLOAT16, np.float32: TP.FLOAT, np.float64: TP.DOUBLE}


def _model(shapes: dict, dtype, **attrs):
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", **attrs)
    b, hq, lq, _ = shapes["Q"]
    out = [b, hq, lq, shapes["V"][3]]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, _ELEM[dtype], s) for k, s in shapes.items()],
                              [helper.make_tensor_value_info("Y", _ELEM[dtype], out)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)])


def _modifier(name: str, nodes: list, consts: dict, work=np.float32):
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()]
    elem = _ELEM[work]
    return helper.make_graph(nodes, name, [helper.make_tensor_value_info("s", elem, None)],
                             [helper.make_tensor_value_info("out", elem, None)], inits)


def _causal():
    nodes = [helper.make_node("Shape", ["s"], ["shape"]),
             helper.make_node("Gather", ["shape", "i2"], ["L"], axis=0),
             helper.make_node("Gather", ["shape", "i3"], ["S"], axis=0),
             helper.make_node("Range", ["zero", "L", "one"], ["q"]),
             helper.make_node("Reshape", ["q", "qs"], ["qi"]),
             helper.make_node("Range", ["zero", "S", "one"], ["k"]),
             helper.make_node("Reshape", ["k", "ks"], ["ki"]),
             helper.make_node("GreaterOrEqual", ["qi", "ki"], ["keep"]),
             helper.make_node("Where", ["keep", "s", "ninf"], ["out"])]
    return _modifier("causal", nodes, {"i2": np.int64(2), "i3": np.int64(3), "zero": np.int64(0), "one": np.int64(1),
                                       "qs": np.array([1, 1, -1, 1]), "ks": np.array([1, 1, 1, -1]),
                                       "ninf": np.float32(-np.inf)})


def _soft_cap(cap: float):
    nodes = [helper.make_node("Div", ["s", "cap"], ["t"]), helper.make_node("Tanh", ["t"], ["u"]),
             helper.make_node("Mul", ["u", "cap"], ["out"])]
    return _modifier("soft_cap", nodes, {"cap": np.float32(cap)})


def _numpy(q, k, v, scale=None, score_mod=None, prob_mod=None, work=np.float32):
    """Independent reference: the spec's formula in ``work`` precision (float64 for the comparison)."""
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1).astype(np.float64), np.repeat(v, group, axis=1).astype(np.float64)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) * scale
    s = score_mod(s) if score_mod else s
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    p = prob_mod(p) if prob_mod else p
    return p @ v


def _run(model, inputs: dict, tol: float, numpy_ref=None) -> None:
    want = ReferenceEvaluator(model).run(None, inputs)[0]
    mod, _ = from_onnx(model)
    compiled = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](*inputs.values())
    for got in (evaluate(mod, list(inputs.values())), compiled):
        got = got[0] if isinstance(got, (list, tuple)) else got
        got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
        if numpy_ref is not None:
            np.testing.assert_allclose(got.astype(np.float64), numpy_ref, rtol=max(tol, 1e-5), atol=max(tol, 1e-5))


def _inputs(shapes: dict, dtype) -> dict:
    return {k: _RNG.standard_normal(s).astype(dtype) for k, s in shapes.items()}


_PLAIN = {"Q": [2, 4, 5, 8], "K": [2, 4, 6, 8], "V": [2, 4, 6, 8]}
_GQA = {"Q": [1, 6, 3, 8], "K": [1, 2, 7, 8], "V": [1, 2, 7, 4]}


@pytest.mark.compiler
@pytest.mark.parametrize("shapes,scale", [(_PLAIN, None), (_GQA, None), (_PLAIN, 0.3)])
def test_flex_attention_matches_reference(shapes, scale):
    inputs = _inputs(shapes, np.float32)
    attrs = {} if scale is None else {"scale": scale}
    _run(_model(shapes, np.float32, **attrs), inputs, 1e-5, _numpy(*inputs.values(), scale=scale))


@pytest.mark.compiler
def test_causal_score_mod_imports_as_graph_code_fused_into_the_scores_kernel():
    shapes = {"Q": [1, 2, 5, 8], "K": [1, 2, 5, 8], "V": [1, 2, 5, 8]}
    inputs = _inputs(shapes, np.float32)
    model = _model(shapes, np.float32, score_mod=_causal())
    causal = np.where(np.tril(np.ones((5, 5), bool)), 0.0, -np.inf)
    _run(model, inputs, 1e-5, _numpy(*inputs.values(), score_mod=lambda s: s + causal))
    # the mask's positions fold at import; the masking runs in the Q·Kᵀ kernel's epilogue
    lowered = default_build_pipeline("llvm")(from_onnx(model)[0])
    names = [name for name, _ in lowered.functions.items()] if hasattr(lowered, "functions") else list(lowered.keys())
    assert any("matmul" in n and "where" in n for n in names), names


@pytest.mark.compiler
def test_soft_cap_score_mod_and_prob_mod():
    inputs = _inputs(_GQA, np.float32)
    prob = _modifier("scale", [helper.make_node("Mul", ["s", "c"], ["out"])], {"c": np.float32(0.7)})
    model = _model(_GQA, np.float32, score_mod=_soft_cap(2.0), prob_mod=prob)
    ref = _numpy(*inputs.values(), score_mod=lambda s: np.tanh(s / 2.0) * 2.0, prob_mod=lambda p: p * 0.7)
    _run(model, inputs, 1e-5, ref)


@pytest.mark.compiler
@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (np.float64, 1e-10)])
def test_flex_attention_float16_and_double(dtype, tol):
    inputs = _inputs(_PLAIN, dtype)
    work = np.float64 if dtype == np.float64 else np.float32
    bias = _modifier("bias", [helper.make_node("Add", ["s", "b"], ["out"])], {"b": work(0.25)}, work)
    _run(_model(_PLAIN, dtype, score_mod=bias), inputs, tol)


@pytest.mark.compiler
def test_softmax_precision_double_for_float_inputs():
    inputs = _inputs(_PLAIN, np.float32)
    bias = _modifier("bias", [helper.make_node("Add", ["s", "b"], ["out"])], {"b": np.float64(0.5)}, np.float64)
    model = _model(_PLAIN, np.float32, score_mod=bias, softmax_precision=TP.DOUBLE)
    _run(model, inputs, 1e-5, _numpy(*inputs.values(), score_mod=lambda s: s + 0.5))


def test_score_mod_that_changes_the_shape_is_an_error_naming_it():
    reduce = _modifier("bad", [helper.make_node("ReduceSum", ["s"], ["out"], keepdims=1)], {})
    model = _model(_PLAIN, np.float32, score_mod=reduce)
    with pytest.raises(Exception, match="score_mod must return a tensor of the shape"):
        from_onnx(model, checked=True)
