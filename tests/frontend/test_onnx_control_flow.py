"""ONNX If / Loop / Scan and the sequence ops (ingot/frontend/onnx/ops_control.py) against ONNX Runtime.

Each model is imported once and run compiled (``ingot.graph.build`` + ``Executor``: the control-flow
steps call the branches' and bodies' compiled plans) and with the numpy reference interpreter.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402
from ingot.frontend.reference import evaluate  # noqa: E402
from ingot.graph.control_flow import If  # noqa: E402

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _check(model, feeds_list, compiled=True):
    """Ingot (compiled and reference) matches ONNX Runtime on every feed dict; returns the module."""
    names = [i.name for i in model.graph.input]
    first = feeds_list[0]
    mod, _ = from_onnx(model, shape_dict={n: list(first[n].shape) for n in names})
    vm = G.Executor(G.build(mod, "llvm"), ingot.cpu()) if compiled else None
    for feeds in feeds_list:
        expected = _ort(model, feeds)
        args = [feeds[n] for n in names]
        ref = evaluate(mod, args)
        for e, r in zip(expected, ref):
            np.testing.assert_allclose(r, e, rtol=1e-5, atol=1e-6)
        if vm is not None:
            out = vm["main"](*args)
            outs = list(out) if isinstance(out, tuple) else [out]
            assert len(outs) == len(expected)
            for e, o in zip(expected, outs):
                assert o.numpy().shape == e.shape
                np.testing.assert_allclose(o.numpy(), e, rtol=1e-5, atol=1e-6)
    return mod


def _if_model():
    # then: exp(x) * y; else: (x - y) * 3 — both capture the outer x, y (computed by an outer Relu).
    then_g = helper.make_graph(
        [helper.make_node("Exp", ["xr"], ["e"]), helper.make_node("Mul", ["e", "y"], ["t_out"])],
        "then", [], [_vi("t_out", F, [2, 3])])
    three = helper.make_tensor("three", F, [], [3.0])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["xr", "y"], ["d"]), helper.make_node("Mul", ["d", "three"], ["e_out"])],
        "else", [], [_vi("e_out", F, [2, 3])], initializer=[three])
    nodes = [helper.make_node("Relu", ["x"], ["xr"]),
             helper.make_node("If", ["c"], ["r"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Neg", ["r"], ["out"])]
    return _model(nodes, [_vi("c", BOOL, []), _vi("x", F, [2, 3]), _vi("y", F, [2, 3])], [_vi("out", F, [2, 3])])


@pytest.mark.compiler
def test_if_runs_both_branches_at_run_time():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3)).astype("float32"), rng.standard_normal((2, 3)).astype("float32")
    mod = _check(_if_model(), [{"c": np.array(True), "x": x, "y": y}, {"c": np.array(False), "x": x, "y": y}])
    ifs = [b.value for b in mod["main"].body.blocks[0].bindings if isinstance(b.value, If)]
    assert len(ifs) == 1


def test_if_with_a_constant_condition_imports_only_the_taken_branch():
    model = _if_model()
    cond = helper.make_tensor("c", BOOL, [], [False])
    graph = model.graph
    graph.input.pop(0)
    graph.initializer.append(cond)
    mod, _ = from_onnx(model)
    ops = [b.value.op.name for b in mod["main"].body.blocks[0].bindings if hasattr(b.value, "op")]
    assert not any(isinstance(b.value, If) for b in mod["main"].body.blocks[0].bindings)
    assert "exp" not in ops and "subtract" in ops
    x = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
    y = np.ones((2, 3), "float32")
    np.testing.assert_allclose(evaluate(mod, [x, y])[0], -(np.maximum(x, 0) - y) * 3, rtol=1e-6)


def _loop_model(capture: bool):
    # Carried s (2,); each iteration s = s * 2 + w (w an outer value when `capture`), scan output s;
    # the body computes its condition: continue while sum(s) < 100.
    body_nodes = [helper.make_node("Mul", ["s_in", "two"], ["s2"]),
                  helper.make_node("Add", ["s2", "w" if capture else "one"], ["s_out"]),
                  helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
                  helper.make_node("Less", ["total", "limit"], ["cond_out"]),
                  helper.make_node("Identity", ["s_out"], ["scan_out"])]
    inits = [helper.make_tensor("two", F, [], [2.0]), helper.make_tensor("one", F, [], [1.0]),
             helper.make_tensor("limit", F, [], [100.0])]
    body = helper.make_graph(body_nodes, "body", [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("s_in", F, [2])],
                             [_vi("cond_out", BOOL, []), _vi("s_out", F, [2]), _vi("scan_out", F, [2])],
                             initializer=inits)
    nodes = [helper.make_node("Abs", ["a"], ["w"]),
             helper.make_node("Loop", ["m", "c", "s0"], ["s_final", "trace"], body=body)]
    return _model(nodes, [_vi("m", I64, []), _vi("c", BOOL, []), _vi("s0", F, [2]), _vi("a", F, [2])],
                  [_vi("s_final", F, [2]), _vi("trace", F, [None, 2])])


@pytest.mark.compiler
def test_loop_with_a_condition_computed_in_the_body():
    feeds = [{"m": np.array(20, "int64"), "c": np.array(True), "s0": np.array([0.5, 1.0], "float32"),
              "a": np.array([1.0, -2.0], "float32")},
             {"m": np.array(3, "int64"), "c": np.array(True), "s0": np.array([0.5, 1.0], "float32"),
              "a": np.array([1.0, -2.0], "float32")},
             {"m": np.array(5, "int64"), "c": np.array(True), "s0": np.array([90.0, 20.0], "float32"),
              "a": np.array([1.0, -2.0], "float32")},
             {"m": np.array(0, "int64"), "c": np.array(True), "s0": np.array([0.5, 1.0], "float32"),
              "a": np.array([1.0, -2.0], "float32")},  # no iteration: the scan output is empty, (0, 2)
             {"m": np.array(4, "int64"), "c": np.array(False), "s0": np.array([0.5, 1.0], "float32"),
              "a": np.array([1.0, -2.0], "float32")}]
    _check(_loop_model(capture=False), feeds)


@pytest.mark.compiler
def test_loop_body_captures_an_outer_value():
    feeds = [{"m": np.array(10, "int64"), "c": np.array(True), "s0": np.array([0.0, 1.0], "float32"),
              "a": np.array([3.0, -0.5], "float32")}]
    mod = _check(_loop_model(capture=True), feeds)
    loops = [b.value for f in mod.functions.values() if isinstance(f, G.Function)
             for blk in f.body.blocks for b in blk.bindings
             if isinstance(b.value, G.Call) and isinstance(b.value.op, G.Op) and b.value.op.name == "loop"]
    body = mod[loops[0].attrs["body"]]
    assert len(body.params) == 4  # i, cond, s and the captured outer value w


def _scan_model():
    # States: a running sum (forward over xs) ; scan inputs: xs forward along axis 0, ys backward along axis 1;
    # outputs: the running sum per step (forward) and s + y per step, stacked in reverse along axis 1.
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Add", ["s_out", "y_t"], ["o1"]),
         helper.make_node("Mul", ["s_out", "k"], ["o0"])],
        "body", [_vi("s_in", F, [3]), _vi("x_t", F, [3]), _vi("y_t", F, [3])],
        [_vi("s_out", F, [3]), _vi("o0", F, [3]), _vi("o1", F, [3])])
    node = helper.make_node("Scan", ["s0", "xs", "ys"], ["s_final", "out0", "out1"], body=body, num_scan_inputs=2,
                            scan_input_axes=[0, 1], scan_input_directions=[0, 1], scan_output_axes=[0, 1],
                            scan_output_directions=[0, 1])
    return _model([helper.make_node("Abs", ["kin"], ["k"]), node],
                  [_vi("s0", F, [3]), _vi("xs", F, [4, 3]), _vi("ys", F, [3, 4]), _vi("kin", F, [3])],
                  [_vi("s_final", F, [3]), _vi("out0", F, [4, 3]), _vi("out1", F, [3, 4])])


@pytest.mark.compiler
def test_scan_forward_and_reverse_directions_and_axes():
    rng = np.random.default_rng(1)
    feeds = {"s0": rng.standard_normal(3).astype("float32"), "xs": rng.standard_normal((4, 3)).astype("float32"),
             "ys": rng.standard_normal((3, 4)).astype("float32"), "kin": rng.standard_normal(3).astype("float32")}
    _check(_scan_model(), [feeds])


def test_sequence_ops_fold_at_import_time():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=1),
             helper.make_node("SequenceErase", ["seq", "pos0"], ["seq2"]),
             helper.make_node("SequenceInsert", ["seq2", "y"], ["seq3"]),
             helper.make_node("SequenceLength", ["seq3"], ["n"]),
             helper.make_node("SequenceAt", ["seq3", "pos_last"], ["last"]),
             helper.make_node("ConcatFromSequence", ["seq3"], ["stacked"], axis=0, new_axis=1),
             helper.make_node("Optional", ["last"], ["opt"]),
             helper.make_node("OptionalHasElement", ["opt"], ["has"]),
             helper.make_node("OptionalGetElement", ["opt"], ["got"])]
    inits = [helper.make_tensor("pos0", I64, [], [0]), helper.make_tensor("pos_last", I64, [], [-1])]
    model = _model(nodes, [_vi("x", F, [2, 3]), _vi("y", F, [2, 1])],
                   [_vi("n", I64, []), _vi("stacked", F, [3, 2, 1]), _vi("has", BOOL, []), _vi("got", F, [2, 1])],
                   initializers=inits, opset=18)
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((2, 3)).astype("float32"), "y": rng.standard_normal((2, 1)).astype("float32")}
    mod, _ = from_onnx(model)
    expected = _ort(model, feeds)
    for e, r in zip(expected, evaluate(mod, [feeds["x"], feeds["y"]])):
        np.testing.assert_allclose(r, e)


def test_inspect_no_longer_lists_control_flow_as_unsupported():
    from ingot.frontend.onnx.importer import find_unsupported

    assert find_unsupported(_if_model(), 17) == {}
    assert find_unsupported(_scan_model(), 17) == {}
