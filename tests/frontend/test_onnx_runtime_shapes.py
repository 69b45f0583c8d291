"""Values known only at run time (issue 17): ONNX models whose Reshape/Expand/Slice/Tile/Pad/Range/
ConstantOfShape/TopK inputs are computed from data, and ops whose output size is the data's (NonZero,
Unique, Compress, NonMaxSuppression). Each model is compiled once, run on several inputs whose run-time
sizes differ, and compared with ONNX Runtime."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _out(name, elem, rank):
    """An output whose sizes are known only at run time (named dims, so the checker accepts it)."""
    return helper.make_tensor_value_info(name, elem, [f"{name}_{k}" for k in range(rank)])


def _const(name, array):
    return onnx.numpy_helper.from_array(np.asarray(array), name)


def _check(model, feeds_list, shape_dict=None):
    """Compile ``model`` once, run each feed, compare every output with ONNX Runtime; returns the executable."""
    mod, _ = from_onnx(model, shape_dict=shape_dict)
    ex = G.build(mod, "llvm")
    vm = G.Executor(ex, ingot.cpu())
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    for feeds in feeds_list:
        expected = sess.run(None, dict(zip(names, feeds)))
        out = vm["main"](*feeds)
        outs = list(out) if isinstance(out, tuple) else [out]
        assert len(outs) == len(expected)
        for got, exp in zip(outs, expected):
            got = got.numpy()
            assert got.shape == exp.shape and got.dtype == exp.dtype, (got.shape, exp.shape, got.dtype, exp.dtype)
            np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-6)
    return ex, mod


@pytest.mark.compiler
def test_dynamic_batch_reshape_from_shape_gather_concat():
    # The PyTorch dynamic-axis export: x.view(x.shape[0], -1) as Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y0"]),
        helper.make_node("Relu", ["y0"], ["y"]),
    ]
    model = _model(nodes, [_vi("x", F, ["batch", 3, 4])], [_vi("y", F, ["batch", 12])],
                   [_const("zero", np.array(0, "int64")), _const("ax0", np.array([0], "int64")),
                    _const("minus1", np.array([-1], "int64"))])
    rng = np.random.default_rng(0)
    ex, _ = _check(model, [[rng.standard_normal((b, 3, 4)).astype("float32")] for b in (1, 5)])
    assert len(ex.kernels) == 1  # one kernel for every batch size


@pytest.mark.compiler
def test_reshape_to_a_shape_computed_from_data_compiles_once():
    # The target comes from the data (a shape tensor input, plus one): tensor_to_shape binds fresh dims.
    nodes = [helper.make_node("Add", ["s", "one"], ["target"]),
             helper.make_node("Reshape", ["x", "target"], ["y0"]),
             helper.make_node("Exp", ["y0"], ["y"])]
    model = _model(nodes, [_vi("x", F, [4, 6]), _vi("s", I64, [3])], [_out("y", F, 3)],
                   [_const("one", np.array(1, "int64"))])
    x = np.linspace(-1, 1, 24, dtype="float32").reshape(4, 6)
    ex, mod = _check(model, [[x, np.array([1, 2, -2], "int64")], [x, np.array([3, -1, -2], "int64")],
                             [x, np.array([-2, 0, 0], "int64")]])
    assert "R.tensor_to_shape(" in mod.script()
    assert "main" not in ex.aot


@pytest.mark.compiler
def test_nonzero_then_gather():
    nodes = [helper.make_node("Greater", ["x", "zero"], ["mask"]),
             helper.make_node("NonZero", ["mask"], ["nz"]),
             helper.make_node("Reshape", ["nz", "flat"], ["idx"]),
             helper.make_node("Gather", ["x", "idx"], ["y"], axis=0)]
    model = _model(nodes, [_vi("x", F, [8])], [_out("y", F, 1)],
                   [_const("zero", np.array(0, "float32")), _const("flat", np.array([-1], "int64"))])
    _check(model, [[np.array([1, -2, 3, 0, 5, -6, 7, 8], "float32")], [-np.ones(8, "float32")],
                   [np.arange(8, dtype="float32") - 3]])


@pytest.mark.compiler
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_with_a_run_time_k(largest):
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest),
             helper.make_node("Mul", ["v", "two"], ["v2"])]
    model = _model(nodes, [_vi("x", F, [2, 7]), _vi("k", I64, [1])], [_out("v2", F, 2), _out("i", I64, 2)],
                   [_const("two", np.array(2, "float32"))])
    x = np.random.default_rng(1).permutation(14).astype("float32").reshape(2, 7)
    _check(model, [[x, np.array([k], "int64")] for k in (1, 3, 7)])


@pytest.mark.compiler
def test_expand_constant_of_shape_tile_range_slice_pad_with_run_time_inputs():
    nodes = [
        helper.make_node("Expand", ["a", "eshape"], ["e"]),
        helper.make_node("ConstantOfShape", ["eshape"], ["c"], value=helper.make_tensor("v", F, [1], [2.5])),
        helper.make_node("Tile", ["a", "reps"], ["t"]),
        helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
        helper.make_node("Slice", ["b", "starts", "ends", "axes", "steps"], ["sl"]),
        helper.make_node("Pad", ["a", "pads"], ["p"]),
    ]
    model = _model(nodes, [_vi("a", F, [3, 1]), _vi("eshape", I64, [2]), _vi("reps", I64, [2]),
                           _vi("start", I64, []), _vi("limit", I64, []), _vi("delta", I64, []),
                           _vi("b", F, [5, 6]), _vi("starts", I64, [1]), _vi("ends", I64, [1]),
                           _vi("axes", I64, [1]), _vi("steps", I64, [1]), _vi("pads", I64, [4])],
                   [_out(n, F, 2) for n in ("e", "c", "t")] + [_out("r", I64, 1)] + [_out(n, F, 2) for n in ("sl", "p")])
    a = np.array([[1], [2], [3]], "float32")
    b = np.arange(30, dtype="float32").reshape(5, 6)
    i = lambda *v: np.array(v, "int64")  # noqa: E731
    s = lambda v: np.array(v, "int64")  # noqa: E731
    _check(model, [
        [a, i(3, 4), i(2, 1), s(0), s(5), s(1), b, i(1), i(4), i(1), i(1), i(0, 1, 1, 0)],
        [a, i(1, 2), i(1, 3), s(10), s(2), s(-3), b, i(-1), i(-100), i(0), i(-2), i(1, 0, 0, 2)],
        # INT64 bounds with a negative step: ONNX clamps start to the last index and end to "through 0"
        [a, i(3, 4), i(2, 1), s(0), s(5), s(1), b, i(-2**63), i(-2**63), i(1), i(-1), i(0, 1, 1, 0)],
        [a, i(3, 4), i(2, 1), s(0), s(5), s(1), b, i(2**63 - 1), i(-2**63), i(1), i(-2), i(0, 1, 1, 0)],
    ])


@pytest.mark.compiler
def test_expand_of_a_symbolic_dim_that_is_1_at_run_time_broadcasts_like_onnx():
    # x's symbolic dim n meets the run-time shape: n = 1 widens to 5 (the kernel reads x at
    # select(n == 1, 0, i); it used to pass n through and return shape (1,)), n = 4 against 1 keeps 4,
    # and 3 against 5, which ONNX Runtime refuses too, stops with an error naming the node.
    model = _model([helper.make_node("Expand", ["x", "s"], ["y"], name="expand0")],
                   [_vi("x", F, ["n"]), _vi("s", I64, [1])], [_out("y", F, 1)])
    ex, _ = _check(model, [[np.arange(3, dtype="float32"), np.array([3], "int64")],
                           [np.array([7], "float32"), np.array([5], "int64")],
                           [np.arange(4, dtype="float32"), np.array([1], "int64")]])
    with pytest.raises(Exception, match=r"Expand 'expand0'.*\(3,\) does not broadcast to the shape \(5,\)"):
        G.Executor(ex, ingot.cpu())["main"](np.arange(3, dtype="float32"), np.array([5], "int64"))


@pytest.mark.compiler
def test_expand_of_a_2d_input_with_a_symbolic_batch_against_a_run_time_shape():
    model = _model([helper.make_node("Expand", ["x", "s"], ["y"], name="expand0")],
                   [_vi("x", F, ["n", 1]), _vi("s", I64, [3])], [_out("y", F, 3)])
    rng = np.random.default_rng(0)
    _check(model, [[rng.standard_normal((1, 1)).astype("float32"), np.array([2, 3, 4], "int64")],
                   [rng.standard_normal((3, 1)).astype("float32"), np.array([2, 1, 4], "int64")],
                   [rng.standard_normal((3, 1)).astype("float32"), np.array([1, 3, 1], "int64")]])


@pytest.mark.compiler
@pytest.mark.parametrize("op", ["Add", "Mul", "Sub", "Sum", "Max"])
def test_binary_op_with_a_symbolic_dim_that_is_1_at_run_time_broadcasts_against_a_constant(op):
    # x: (n, 4) against y: (5, 1): the result is (5, 4) for n = 5 and for n = 1 (x read at
    # select(n == 1, 0, i)); n = 3 would read x out of bounds, so the run stops naming the node.
    model = _model([helper.make_node(op, ["x", "y"], ["z"], name="op0")],
                   [_vi("x", F, ["n", 4]), _vi("y", F, [5, 1])], [_out("z", F, 2)])
    rng = np.random.default_rng(1)
    y = rng.standard_normal((5, 1)).astype("float32")
    ex, _ = _check(model, [[rng.standard_normal((n, 4)).astype("float32"), y] for n in (5, 1)])
    with pytest.raises(Exception, match=rf"{op} 'op0': operand 0 has size 3 at axis 0 .*does not broadcast with 5"):
        G.Executor(ex, ingot.cpu())["main"](rng.standard_normal((3, 4)).astype("float32"), y)


@pytest.mark.compiler
def test_where_with_a_symbolic_dim_that_is_1_at_run_time():
    model = _model([helper.make_node("Where", ["c", "x", "y"], ["z"], name="where0")],
                   [_vi("c", TensorProto.BOOL, [5, 1]), _vi("x", F, ["n", 4]), _vi("y", F, [1, 4])], [_out("z", F, 2)])
    rng = np.random.default_rng(3)
    c = rng.standard_normal((5, 1)) > 0
    y = rng.standard_normal((1, 4)).astype("float32")
    ex, _ = _check(model, [[c, rng.standard_normal((n, 4)).astype("float32"), y] for n in (1, 5)])
    with pytest.raises(Exception, match=r"Where 'where0': operand 1 has size 2 at axis 0"):
        G.Executor(ex, ingot.cpu())["main"](c, rng.standard_normal((2, 4)).astype("float32"), y)


@pytest.mark.compiler
def test_binary_op_with_a_run_time_1_on_the_constant_side_and_a_symbolic_batch():
    # y's symbolic dim against x's 1 stays symbolic (the result is (n, 4)); x's 1 broadcasts.
    model = _model([helper.make_node("Add", ["x", "y"], ["z"])],
                   [_vi("x", F, [1, 4]), _vi("y", F, ["n", 1])], [_out("z", F, 2)])
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 4)).astype("float32")
    _check(model, [[x, rng.standard_normal((n, 1)).astype("float32")] for n in (1, 6)])


@pytest.mark.compiler
def test_unique_compress_and_non_max_suppression():
    nodes = [helper.make_node("Unique", ["x"], ["u", "ui", "uinv", "uc"], sorted=0),
             helper.make_node("Greater", ["x", "zero"], ["cond"]),
             helper.make_node("Compress", ["x", "cond"], ["cx"], axis=0),
             helper.make_node("NonMaxSuppression", ["boxes", "scores", "maxo", "iou", "sth"], ["sel"])]
    model = _model(nodes, [_vi("x", F, [7]), _vi("boxes", F, [1, 6, 4]), _vi("scores", F, [1, 1, 6])],
                   [_out("u", F, 1), _out("ui", I64, 1), _out("uinv", I64, 1), _out("uc", I64, 1),
                    _out("cx", F, 1), _out("sel", I64, 2)],
                   [_const("zero", np.array(0, "float32")), _const("maxo", np.array([3], "int64")),
                    _const("iou", np.array([0.5], "float32")), _const("sth", np.array([0.0], "float32"))])
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1],
                       [0, 100, 1, 101]]], "float32")
    scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]], "float32")
    _check(model, [[np.array([2, -1, 2, 3, -1, 0, 5], "float32"), boxes, scores],
                   [np.array([1, 1, 1, 1, 1, 1, 1], "float32"), boxes, scores[..., ::-1].copy()]])


# ONNX node cases whose shape-like inputs are graph inputs: with --no-freeze they are run-time values.
_RUNTIME_CASE_PREFIXES = ("test_reshape", "test_expand", "test_slice", "test_tile", "test_range",
                          "test_constantofshape", "test_top_k", "test_edge_pad", "test_reflect_pad", "test_wrap_pad",
                          "test_nonzero", "test_unique", "test_compress", "test_nonmaxsuppression", "test_reduce_",
                          "test_squeeze", "test_unsqueeze")


def _runtime_cases():
    import os
    import sys

    sys.path.insert(0, os.path.dirname(__file__))
    import onnx_node_tests as harness

    return harness, [c for c in harness.collect_cases()
                     if c.name.startswith(_RUNTIME_CASE_PREFIXES) and "expanded" not in c.name]


def test_node_cases_with_run_time_inputs_reference():
    harness, cases = _runtime_cases()
    results = harness.run_all(cases, "reference", freeze=False)
    assert len(results) >= 120
    assert [(r.name, r.detail) for r in results if r.status != "pass"] == []


@pytest.mark.slow
@pytest.mark.compiler
def test_node_cases_with_run_time_inputs_compiled():
    # One case per converter path, compiled with its shape-like inputs left as run-time graph inputs.
    names = {"test_reshape_zero_and_negative_dim", "test_expand_dim_changed", "test_constantofshape_int_zeros",
             "test_slice_neg_steps", "test_tile", "test_top_k_smallest", "test_edge_pad",
             "test_range_int32_type_negative_delta", "test_nonzero_example", "test_unique_sorted_with_axis",
             "test_compress_default_axis", "test_nonmaxsuppression_two_classes", "test_reduce_sum_keepdims_example",
             "test_reduce_l2_negative_axes_keep_dims_example", "test_squeeze", "test_unsqueeze_two_axes"}
    harness, cases = _runtime_cases()
    results = harness.run_all([c for c in cases if c.name in names], "compiled", isolate=False, freeze=False)
    assert len(results) == len(names)
    assert [(r.name, r.detail) for r in results if r.status != "pass"] == []
