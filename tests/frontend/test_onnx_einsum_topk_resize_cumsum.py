"""The ONNX converters added for coverage (function-body expansion, Einsum, TopK, BitShift,
Resize, ConvTranspose, CumSum): numbers against numpy / onnxruntime, reference and compiled."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from ingot.frontend.onnx import from_onnx  # noqa: E402
from ingot.frontend.reference import evaluate  # noqa: E402

rng = np.random.default_rng(0)
F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, opset=18):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def _ref(model, arrays):
    mod, _ = from_onnx(model)
    out = evaluate(mod, arrays)
    return [np.asarray(o) for o in out]


def _compiled(model, arrays):
    from ingot import graph as G
    import ingot

    mod, _ = from_onnx(model)
    out = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](*arrays)
    return [o.numpy() for o in (out if isinstance(out, tuple) else [out])]


EINSUMS = [
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bij->bji", [(2, 3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("...ij,...jk", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ijk->", [(2, 3, 4)]),
    ("ij,kj->ikj", [(2, 3), (4, 3)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUMS)
def test_einsum_matches_numpy(equation, shapes):
    arrays = [rng.standard_normal(s).astype("float32") for s in shapes]
    names = [f"x{k}" for k in range(len(arrays))]
    expected = np.einsum(equation, *arrays)
    model = _model([helper.make_node("Einsum", names, ["y"], equation=equation)],
                   [(n, F, list(a.shape)) for n, a in zip(names, arrays)], [("y", F, list(expected.shape))])
    np.testing.assert_allclose(_ref(model, arrays)[0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.compiler
def test_einsum_compiled_attention_scores():
    q, k = rng.standard_normal((1, 2, 4, 8)).astype("float32"), rng.standard_normal((1, 2, 6, 8)).astype("float32")
    model = _model([helper.make_node("Einsum", ["q", "k"], ["y"], equation="bhqd,bhkd->bhqk")],
                   [("q", F, [1, 2, 4, 8]), ("k", F, [1, 2, 6, 8])], [("y", F, [1, 2, 4, 6])])
    np.testing.assert_allclose(_compiled(model, [q, k])[0], np.einsum("bhqd,bhkd->bhqk", q, k), rtol=1e-5, atol=1e-5)


@pytest.mark.compiler
def test_topk_with_ties_and_bitshift_compiled():
    x = np.array([[3, 1, 3, 2, 5, 5], [0, 0, 1, 1, 2, 2]], dtype="float32")
    k = helper.make_tensor("k", TensorProto.INT64, [1], [3])
    model = _model([helper.make_node("Constant", [], ["kk"], value=k),
                    helper.make_node("TopK", ["x", "kk"], ["v", "i"], axis=1)],
                   [("x", F, [2, 6])], [("v", F, [2, 3]), ("i", TensorProto.INT64, [2, 3])])
    v, i = _compiled(model, [x])
    np.testing.assert_array_equal(i, [[4, 5, 0], [4, 5, 2]])  # ties: the smaller index first
    np.testing.assert_array_equal(v, [[5, 5, 3], [2, 2, 1]])
    a = np.array([1, -8, 127, -128], dtype="int8")
    s = np.array([1, 2, 8, -1], dtype="int8")  # 8 and -1 are out of range: 0 (left)
    model = _model([helper.make_node("BitShift", ["a", "s"], ["y"], direction="LEFT")],
                   [("a", TensorProto.INT8, [4]), ("s", TensorProto.INT8, [4])], [("y", TensorProto.INT8, [4])],
                   opset=26)
    np.testing.assert_array_equal(_compiled(model, [a, s])[0], np.array([2, -32, 0, 0], dtype="int8"))


def test_function_body_expansion_rms_norm():
    x = rng.standard_normal((2, 5)).astype("float32")
    scale = rng.standard_normal((5,)).astype("float32")
    model = _model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], epsilon=1e-5)],
                   [("x", F, [2, 5]), ("s", F, [5])], [("y", F, [2, 5])], opset=23)
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * scale
    np.testing.assert_allclose(_ref(model, [x, scale])[0], expected, rtol=1e-5, atol=1e-5)


def test_function_body_with_an_unsupported_inner_op_is_reported():
    from ingot.frontend import UnsupportedOpsError
    from ingot.frontend.onnx.importer import find_unsupported

    # Range has a converter; a function op whose body uses an op without one is listed up front.
    model = _model([helper.make_node("Range", ["a", "b", "c"], ["y"])],
                   [("a", F, []), ("b", F, []), ("c", F, [])], [("y", F, ["n"])])
    assert find_unsupported(model, 18) == {}
    # Run-time bounds (issue 17): Range is a builtin of the executor whose length is bound at run time.
    import ingot
    from ingot import graph as G

    vm = G.Executor(G.build(from_onnx(model)[0], "llvm"), ingot.cpu())
    for a, b, c in ((0.0, 5.0, 1.0), (1.0, -2.0, -0.5)):
        args = [np.array(v, "float32") for v in (a, b, c)]
        np.testing.assert_allclose(vm["main"](*args).numpy(), np.arange(a, b, c, dtype="float32"))
    del UnsupportedOpsError


@pytest.mark.compiler
def test_resize_and_conv_transpose_vs_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    x = rng.standard_normal((1, 2, 3, 4)).astype("float32")
    w = rng.standard_normal((2, 3, 3, 3)).astype("float32")
    sizes = helper.make_tensor("sizes", TensorProto.INT64, [4], [1, 2, 7, 9])
    wt = helper.make_tensor("w", F, list(w.shape), w.reshape(-1).tolist())
    nodes = [helper.make_node("Constant", [], ["sz"], value=sizes),
             helper.make_node("Resize", ["x", "", "", "sz"], ["r"], mode="linear"),
             helper.make_node("Constant", [], ["wc"], value=wt),
             helper.make_node("ConvTranspose", ["r", "wc"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                              output_padding=[1, 1])]
    model = _model(nodes, [("x", F, [1, 2, 3, 4])], [("y", F, [1, 3, 14, 18])])
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    np.testing.assert_allclose(_compiled(model, [x])[0], expected, rtol=1e-4, atol=1e-4)


def test_cumsum_reverse_exclusive():
    x = rng.standard_normal((3, 4)).astype("float32")
    ax = helper.make_tensor("ax", TensorProto.INT64, [], [1])
    model = _model([helper.make_node("Constant", [], ["a"], value=ax),
                    helper.make_node("CumSum", ["x", "a"], ["y"], reverse=1, exclusive=1)],
                   [("x", F, [3, 4])], [("y", F, [3, 4])])
    expected = np.flip(np.cumsum(np.flip(x, 1), 1), 1) - x
    np.testing.assert_allclose(_ref(model, [x])[0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.compiler
@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_elements_compiled_duplicates_and_negative_indices(reduction):
    data = rng.standard_normal((4, 3)).astype("float32")
    idx = np.array([[1, -1, 0], [1, 2, -4]], dtype="int64")  # row 1 twice in column 0; negatives wrap
    upd = rng.standard_normal((2, 3)).astype("float32")
    model = _model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=0, reduction=reduction)],
                   [("d", F, [4, 3]), ("i", TensorProto.INT64, [2, 3]), ("u", F, [2, 3])], [("y", F, [4, 3])])
    expected = data.copy()
    for j in np.ndindex(*idx.shape):
        k = (int(idx[j]) % 4, j[1])
        expected[k] = upd[j] if reduction == "none" else (expected[k] + upd[j] if reduction == "add"
                                                          else max(expected[k], upd[j]))
    np.testing.assert_allclose(_compiled(model, [data, idx, upd])[0], expected, rtol=1e-6, atol=1e-6)
