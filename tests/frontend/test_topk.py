"""topk: the graph op + TE compute (values and indices, largest/smallest, axis, ret_type, index dtype) and the
ONNX TopK converter, against numpy and ONNX Runtime, ties ordered as ONNX Runtime orders them."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402
from ingot.frontend.reference import evaluate  # noqa: E402

rng = np.random.default_rng(0)


def _np_topk(x, k, axis, largest):
    # Stable orders keep ties by index; descending = stable ascending sort of the flipped axis.
    if largest:
        n = x.shape[axis]
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx


def _build_topk(shape, x_dtype, **attrs):
    x = G.Var("x", G.TensorStructInfo(shape, x_dtype))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(G.op.topk(x, **attrs))
        bb.emit_func_output(out)
    return G.Executor(G.build(bb.get(), "llvm"), ingot.cpu())["main"]


def test_topk_struct_info_and_errors():
    x = G.Var("x", G.TensorStructInfo((3, 7), "float32"))
    assert str(G.op.topk(x, 2, axis=0).struct_info) == \
        'R.Tuple(R.Tensor((2, 7), dtype="float32"), R.Tensor((2, 7), dtype="int64"))'
    assert str(G.op.topk(x, 4, ret_type="values").struct_info) == 'R.Tensor((3, 4), dtype="float32")'
    assert str(G.op.topk(x, 4, ret_type="indices", dtype="int32").struct_info) == 'R.Tensor((3, 4), dtype="int32")'
    with pytest.raises(Exception, match="k=9 must be between 0 and the length 7"):
        G.op.topk(x, 9)
    with pytest.raises(Exception, match="ret_type"):
        G.op.topk(x, 1, ret_type="both_please")


@pytest.mark.compiler
@pytest.mark.parametrize("axis,largest", [(1, True), (0, False), (-1, False)])
def test_topk_compiled_matches_numpy_with_ties(axis, largest):
    # Integers-valued floats: many ties, the order among them must be by index.
    x = rng.integers(-3, 4, (5, 9)).astype("float32")
    k = 4
    fn = _build_topk(x.shape, "float32", k=k, axis=axis, largest=largest)
    values, indices = (o.numpy() for o in fn(ingot.nd.array(x)))
    ev, ei = _np_topk(x, k, axis, largest)
    np.testing.assert_array_equal(indices, ei)
    np.testing.assert_array_equal(values, ev)


@pytest.mark.compiler
def test_topk_int32_indices_and_integer_values():
    x = rng.integers(0, 5, (2, 3, 6)).astype("int32")
    fn = _build_topk(x.shape, "int32", k=6, axis=2, dtype="int32")
    values, indices = (o.numpy() for o in fn(ingot.nd.array(x)))
    ev, ei = _np_topk(x, 6, 2, True)
    assert indices.dtype == np.int32
    np.testing.assert_array_equal(indices, ei)
    np.testing.assert_array_equal(values, ev)


def _onnx_topk(shape, k, opset=17, **attrs):
    nodes = []
    if opset >= 10:
        nodes.append(helper.make_node("Constant", [], ["kk"], value=helper.make_tensor("k", TensorProto.INT64, [1], [k])))
        nodes.append(helper.make_node("TopK", ["x", "kk"], ["v", "i"], **attrs))
    else:
        nodes.append(helper.make_node("TopK", ["x"], ["v", "i"], k=k, **attrs))
    axis = attrs.get("axis", -1) % len(shape)
    out = list(shape)
    out[axis] = k
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("v", TensorProto.FLOAT, out),
                           helper.make_tensor_value_info("i", TensorProto.INT64, out)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.compiler
@pytest.mark.parametrize("opset,attrs", [(17, {"axis": 1, "largest": 0}), (11, {"axis": 0, "sorted": 0}),
                                         (1, {"axis": -1})])
def test_onnx_topk_matches_onnxruntime(opset, attrs):
    ort = pytest.importorskip("onnxruntime")
    x = rng.integers(-4, 4, (6, 8)).astype("float32")     # ties everywhere
    x[2, 3] = -0.0
    model = _onnx_topk(x.shape, 3, opset, **attrs)
    mod, _ = from_onnx(model)
    got = [o.numpy() for o in G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](x)]
    if opset >= 10:
        expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None,
                                                                                                         {"x": x})
    else:   # ONNX Runtime no longer runs opset 1 models: compare with numpy
        expected = _np_topk(x, 3, attrs.get("axis", -1), True)
    if not attrs.get("sorted", 1):
        # sorted=0: any order is allowed (ONNX Runtime returns its heap's order); the selected set,
        # ties included, must still be the same.
        ax = attrs.get("axis", -1)
        np.testing.assert_array_equal(np.sort(got[1], axis=ax), np.sort(expected[1], axis=ax))
        np.testing.assert_array_equal(np.take_along_axis(x, got[1], ax), got[0])
        return
    np.testing.assert_array_equal(got[1], expected[1])
    np.testing.assert_array_equal(got[0], expected[0])
    ref = evaluate(mod, [x])
    np.testing.assert_array_equal(np.asarray(ref[1]), expected[1])


def test_onnx_topk_on_a_constant_folds_and_bad_k_is_reported():
    model = _onnx_topk((4,), 2)
    xs = helper.make_tensor("x", TensorProto.FLOAT, [4], [1.0, 3.0, 3.0, 2.0])
    model.graph.initializer.append(xs)
    del model.graph.input[:]
    mod, _ = from_onnx(model)
    out = evaluate(mod, [])
    np.testing.assert_array_equal(np.asarray(out[0]), [3.0, 3.0])
    np.testing.assert_array_equal(np.asarray(out[1]), [1, 2])
    with pytest.raises(Exception, match="K=5 is outside"):
        from_onnx(_onnx_topk((4,), 5))
