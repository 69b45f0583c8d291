"""ONNX GatherND, ScatterND, CumProd, ReverseSequence, LpPool, MaxUnpool: numbers against ONNX's
reference evaluator, through the graph's numpy reference (fast) and once compiled."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from ingot.frontend.errors import ConversionError  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402
from ingot.frontend.reference import evaluate  # noqa: E402

rng = np.random.default_rng(0)
_TYPES = {np.dtype(k): v for k, v in (("float32", TensorProto.FLOAT), ("float64", TensorProto.DOUBLE),
                                      ("int64", TensorProto.INT64), ("int32", TensorProto.INT32))}


def _typed(nodes, feeds, outputs, inits=(), opset=18):
    """A model over ``feeds`` (name → array) whose output types come from ONNX's reference evaluator
    (the checker wants them; ``inits``: name → array initializers)."""
    inputs = [helper.make_tensor_value_info(n, _TYPES[a.dtype], a.shape) for n, a in feeds.items()]
    inits = [numpy_helper.from_array(v, k) for k, v in dict(inits).items()]
    opsets = [helper.make_opsetid("", opset)]
    bare = helper.make_graph(nodes, "g", inputs, [onnx.ValueInfoProto(name=o) for o in outputs], inits)
    results = ReferenceEvaluator(helper.make_model(bare, opset_imports=opsets)).run(None, feeds)
    outs = [helper.make_tensor_value_info(o, _TYPES[r.dtype], r.shape) for o, r in zip(outputs, results)]
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outs, inits), opset_imports=opsets, ir_version=10)


def _model(node, feeds, out_dtype=None, inits=(), opset=18):
    return _typed([node], feeds, list(node.output), inits, opset)


def _check(model, feeds, **tol):
    expected = ReferenceEvaluator(model).run(None, feeds)
    mod, _ = from_onnx(model)
    got = evaluate(mod, list(feeds.values()))
    got = got if isinstance(got, (list, tuple)) else [got]
    for e, g in zip(expected, got):
        g = np.asarray(g)
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype, e.shape)
        np.testing.assert_allclose(g, e, **(tol or {"rtol": 1e-5, "atol": 1e-6}))
    return mod


# -- GatherND -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dshape,ishape,batch_dims", [
    ((4, 5), (3, 2), 0),            # full index tuples: scalars
    ((4, 5, 6), (2, 3, 1), 0),      # partial tuples: slices
    ((2, 4, 5), (2, 3, 1), 1),      # batch_dims=1 (BERT-style)
    ((2, 3, 4, 5), (2, 3, 2, 1), 2),
    ((2, 4, 5), (2, 2), 1),         # one tuple per batch entry
])
def test_gather_nd(dshape, ishape, batch_dims):
    data = rng.standard_normal(dshape).astype("float32")
    k = ishape[-1]
    dims = dshape[batch_dims:batch_dims + k]
    idx = np.stack([rng.integers(-d, d, ishape[:-1]) for d in dims], axis=-1).astype("int64")  # negatives too
    node = helper.make_node("GatherND", ["data", "idx"], ["y"], batch_dims=batch_dims)
    _check(_model(node, {"data": data, "idx": idx}), {"data": data, "idx": idx})


def test_gather_nd_constant_indices_int32_data():
    data = np.arange(24, dtype="int32").reshape(2, 3, 4)
    idx = np.array([[[1, 2]], [[0, -1]]], dtype="int64")
    node = helper.make_node("GatherND", ["data", "idx"], ["y"], batch_dims=1)
    _check(_model(node, {"data": data}, inits={"idx": idx}), {"data": data})


@pytest.mark.compiler
def test_gather_nd_symbolic_sizes_compiled():
    # A dynamic (batch, seq) export indexing its attention mask: the row numbers use run-time sizes.
    import ingot
    from ingot import graph as G

    node = helper.make_node("GatherND", ["d", "i"], ["y"], batch_dims=1)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("d", TensorProto.FLOAT, ["B", "S", 4]),
                                        helper.make_tensor_value_info("i", TensorProto.INT64, ["B", 3, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 3, 4])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    mod, _ = from_onnx(model)
    assert str(mod["main"].ret_struct_info) == 'R.Tensor((B, 3, 4), dtype="float32")'
    run = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"]
    for b, s in ((2, 5), (3, 7)):
        d = rng.standard_normal((b, s, 4)).astype("float32")
        i = rng.integers(-s, s, (b, 3, 1)).astype("int64")
        np.testing.assert_array_equal(run(d, i).numpy(), ReferenceEvaluator(model).run(None, {"d": d, "i": i})[0])


# -- ScatterND --------------------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(reduction):
    data = rng.standard_normal((4, 3, 2)).astype("float32")
    idx = np.array([[1], [3], [1]] if reduction != "none" else [[1], [3], [0]], dtype="int64")
    upd = rng.standard_normal((3, 3, 2)).astype("float32")
    node = helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], reduction=reduction)
    _check(_model(node, {"data": data, "idx": idx, "upd": upd}), {"data": data, "idx": idx, "upd": upd})


# -- CumProd ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("n,axis,dtype", [(5, 1, "float32"), (6, -2, "int64"), (70, 0, "float64"), (100, 1, "int32")])
def test_cumprod(exclusive, reverse, n, axis, dtype):
    shape = (n, 3) if axis in (0, -2) else (3, n)
    # values near 1 keep long products finite; integers in {-1, 1, 2} stay exact and small
    x = (rng.uniform(0.9, 1.1, shape) if dtype.startswith("float") else rng.choice([-1, 1, 1, 1, 2], shape))
    x = x.astype(dtype)
    if n > 64:  # keep 2**k small for the integer case
        x = np.where(np.abs(x) == 2, 1, x).astype(dtype) if dtype.startswith("int") else x
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    model = _model(node, {"x": x}, inits={"axis": np.array(axis, "int64")}, opset=26)
    _check(model, {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,opset", [("CumProd", 26), ("CumSum", 14)])
def test_scan_with_run_time_axis(op, opset):
    x = rng.uniform(0.5, 1.5, (3, 4)).astype("float32")
    node = helper.make_node(op, ["x", "axis"], ["y"], reverse=1)
    for axis in (0, 1, -1):
        feeds = {"x": x, "axis": np.array(axis, "int64")}
        _check(_model(node, feeds, opset=opset), feeds)


# -- ReverseSequence --------------------------------------------------------------------------------

@pytest.mark.parametrize("time_axis,batch_axis", [(0, 1), (1, 0)])
@pytest.mark.parametrize("lens_constant", [True, False])
def test_reverse_sequence(time_axis, batch_axis, lens_constant):
    t, b = 5, 4
    shape = (t, b, 3) if time_axis == 0 else (b, t, 3)
    x = rng.standard_normal(shape).astype("float32")
    lens = np.array([5, 1, 3, 0 + 2], dtype="int64")
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=time_axis, batch_axis=batch_axis)
    if lens_constant:
        _check(_model(node, {"x": x}, inits={"lens": lens}), {"x": x})
    else:
        _check(_model(node, {"x": x, "lens": lens}), {"x": x, "lens": lens})


# -- LpPool -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3]},
    {"kernel_shape": [2, 3], "strides": [2, 1], "pads": [1, 0, 1, 1]},
    {"kernel_shape": [2, 2], "dilations": [2, 2]},
    {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
])
def test_lp_pool_2d(p, attrs):
    x = rng.standard_normal((1, 2, 7, 6)).astype("float32")
    node = helper.make_node("LpPool", ["x"], ["y"], p=p, **attrs)
    _check(_model(node, {"x": x}), {"x": x}, rtol=1e-4, atol=1e-5)


def test_lp_pool_1d_and_3d():
    for shape, kernel in (((1, 3, 9), [3]), ((1, 2, 4, 5, 6), [2, 2, 3])):
        x = rng.standard_normal(shape).astype("float32")
        node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=kernel, p=2)
        _check(_model(node, {"x": x}), {"x": x}, rtol=1e-4, atol=1e-5)


def test_lp_pool_ceil_mode_names_node():
    x = np.zeros((1, 1, 5, 5), "float32")
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, name="lp0")
    with pytest.raises(ConversionError, match="lp0.*ceil_mode"):
        from_onnx(_model(node, {"x": x}))


# -- MaxUnpool --------------------------------------------------------------------------------------

def _pooled(shape, kernel, strides, pads=None):
    x = rng.standard_normal(shape).astype("float32")
    attrs = {"kernel_shape": kernel, "strides": strides, **({"pads": pads} if pads else {})}
    pool = helper.make_node("MaxPool", ["x"], ["v", "i"], **attrs)
    g = helper.make_graph([pool], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [onnx.ValueInfoProto(name="v"), onnx.ValueInfoProto(name="i")])
    v, i = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])).run(None, {"x": x})
    return v, i, attrs


@pytest.mark.parametrize("shape,kernel,strides,pads", [
    ((2, 3, 6, 6), [2, 2], [2, 2], None),
    ((1, 2, 7, 5), [3, 2], [2, 1], [1, 0, 1, 0]),
])
def test_max_unpool_default_shape(shape, kernel, strides, pads):
    v, i, attrs = _pooled(shape, kernel, strides, pads)
    node = helper.make_node("MaxUnpool", ["v", "i"], ["y"], **attrs)
    _check(_model(node, {"v": v, "i": i}, out_dtype="float32"), {"v": v, "i": i})


def test_max_unpool_constant_output_shape():
    # (ONNX's reference evaluator sizes this output by the default formula and fails: numpy expected.)
    v, i, attrs = _pooled((1, 1, 5, 5), [2, 2], [2, 2])
    node = helper.make_node("MaxUnpool", ["v", "i", "shape"], ["y"], **attrs)
    inputs = [helper.make_tensor_value_info(n, _TYPES[a.dtype], a.shape) for n, a in (("v", v), ("i", i))]
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 5, 5])],
                          [numpy_helper.from_array(np.array([1, 1, 5, 5], "int64"), "shape")])
    mod, _ = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10))
    expected = np.zeros(25, "float32")
    expected[i.reshape(-1)] = v.reshape(-1)
    got = evaluate(mod, [v, i])
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_array_equal(np.asarray(got), expected.reshape(1, 1, 5, 5))


# -- compiled, all six in one model (one C build) ---------------------------------------------------

@pytest.mark.compiler
def test_compiled_matches_reference_evaluator():
    import ingot
    from ingot import graph as G

    x = rng.standard_normal((2, 4, 6)).astype("float32")
    idx = np.array([[[1], [3]], [[0], [-1]]], dtype="int64")
    v, i, attrs = _pooled((1, 2, 4, 4), [2, 2], [2, 2])
    nodes = [
        helper.make_node("GatherND", ["x", "idx"], ["g"], batch_dims=1),                       # (2, 2, 6)
        helper.make_node("CumProd", ["g", "ax"], ["c"], exclusive=1, reverse=1),                # (2, 2, 6)
        helper.make_node("ReverseSequence", ["x", "lens"], ["r"], time_axis=1, batch_axis=0),  # (2, 4, 6)
        helper.make_node("Unsqueeze", ["r", "ax0"], ["r4"]),                                    # (1, 2, 4, 6)
        helper.make_node("LpPool", ["r4"], ["lp"], kernel_shape=[2, 3], strides=[1, 2], p=2),  # (1, 2, 3, 2)
        helper.make_node("ScatterND", ["x", "sidx", "upd"], ["s"], reduction="add"),            # (2, 4, 6)
        helper.make_node("MaxUnpool", ["v", "i"], ["u"], **attrs),                             # (1, 2, 4, 4)
    ]
    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("ax", np.array(-1, "int64")), ("lens", np.array([3, 4], "int64")), ("ax0", np.array([0], "int64")),
        ("sidx", np.array([[1, 2], [1, 2]], "int64")))]
    upd = rng.standard_normal((2, 6)).astype("float32")
    feeds = {"x": x, "idx": idx, "upd": upd, "v": v, "i": i}
    inits = {"ax": np.array(-1, "int64"), "lens": np.array([3, 4], "int64"), "ax0": np.array([0], "int64"),
             "sidx": np.array([[1, 2], [1, 2]], "int64")}
    model = _typed(nodes, feeds, ["c", "lp", "s", "u"], inits, opset=26)
    expected = ReferenceEvaluator(model).run(None, feeds)
    mod, _ = from_onnx(model)
    got = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](*feeds.values())
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-5, atol=1e-6)
