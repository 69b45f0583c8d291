"""Graph-level control flow (ingot/graph/control_flow.py, ingot/graph/op/control.py): the If expression
printed and parsed in Relax's if/else form, lifting, and the executor's if/loop/scan steps vs numpy."""
from __future__ import annotations

import numpy as np
import pytest

import ingot
from ingot import graph as G
from ingot.frontend.reference import evaluate
from ingot.graph.control_flow import If, free_vars, has_control_flow, lift_control_flow
from ingot.ir import structural_equal
from ingot.script import from_source

T3 = G.TensorStructInfo((3,), "float32")


def _branch(*steps):
    """A SeqExpr binding ``steps`` (op builders of the previous value) in order, as Relax branches do."""
    def build(x):
        bindings, value = [], x
        for k, step in enumerate(steps):
            var = G.Var(f"b{k}", T3)
            bindings.append(G.VarBinding(var, step(value)))
            value = var
        return G.SeqExpr([G.BindingBlock(bindings)] if bindings else [], value)
    return build


def _if_module(nested: bool = False):
    c = G.Var("c", G.TensorStructInfo((), "bool"))
    x, y = G.Var("x", T3), G.Var("y", T3)
    bb = G.BlockBuilder()
    with bb.function("main", [c, x, y]):
        a = bb.emit(G.op.add(x, y))
        then_seq = _branch(G.op.exp, lambda v: G.op.multiply(v, y))(a)
        if nested:  # the else branch holds an If of its own on the same condition's negation
            inner_c = G.Var("nc", G.TensorStructInfo((), "bool"))
            inner = G.Var("inner", T3)
            else_seq = G.SeqExpr([G.BindingBlock([
                G.VarBinding(inner_c, G.op.equal(c, G.const(False, "bool"))),
                G.VarBinding(inner, If(inner_c, _branch(G.op.negative)(a), _branch(G.op.relu)(a)))])], inner)
        else:
            else_seq = _branch(G.op.negative)(a)
        r = bb.emit(If(c, then_seq, else_seq))
        out = bb.emit(G.op.relu(r))
        bb.emit_func_output(out)
    return bb.get()


def test_if_prints_and_parses_back_in_relax_form():
    mod = _if_module()
    text = mod.script()
    assert "        if c:\n" in text and "        else:\n" in text
    again = from_source(text)
    assert structural_equal(again["main"], mod["main"])
    assert again.script() == text


def test_free_vars_of_branches_are_the_captured_outer_values():
    node = next(b.value for b in _if_module()["main"].body.blocks[0].bindings if isinstance(b.value, If))
    assert [v.name_hint for v in free_vars(G.Tuple([node.true_branch, node.false_branch]))] == ["lv0", "y"]


def test_lifting_makes_each_branch_a_function_and_leaves_other_modules_alone():
    lifted = lift_control_flow(_if_module(nested=True))
    assert sorted(lifted.function_names) == ["main", "main_else0", "main_else0_else0", "main_else0_then0",
                                             "main_then0"]
    assert not has_control_flow(lifted)
    x = G.Var("x", T3)
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(G.op.exp(x)))
    plain = bb.get()
    assert not has_control_flow(plain)
    assert lift_control_flow(plain)["main"] is plain["main"]


@pytest.mark.compiler
def test_if_runs_each_branch_compiled_and_static_models_keep_their_aot_entry(tmp_path):
    mod = _if_module(nested=True)
    ex = G.build(mod, "llvm")
    assert "main" not in ex.aot  # a plan with control flow runs on the interpreter
    vm = G.Executor(ex, ingot.cpu())
    x, y = np.array([1, -2, 3], "float32"), np.array([0.5, 1, 2], "float32")
    a = x + y
    for cond, expected in ((True, np.maximum(np.exp(a) * y, 0)), (False, np.maximum(-a, 0))):
        np.testing.assert_allclose(vm["main"](np.array(cond), x, y).numpy(), expected, rtol=1e-6)
        np.testing.assert_allclose(evaluate(mod, [np.array(cond), x, y])[0], expected, rtol=1e-6)
    # The plans are plain JSON: the exported executable runs the same in a loaded copy.
    path = ex.export_library(str(tmp_path / "cf.so"))
    loaded = G.Executor(G.load_executable(path), ingot.cpu())
    np.testing.assert_allclose(loaded["main"](np.array(False), x, y).numpy(), np.maximum(-a, 0), rtol=1e-6)


def _loop_module():
    """``main(s0, w)``: ``s = s * 2 + w`` while ``i < 5`` and ``sum(s) < 50``; returns (s, stacked s)."""
    i, keep = G.Var("i", G.TensorStructInfo((), "int64")), G.Var("keep", G.TensorStructInfo((), "bool"))
    s, w = G.Var("s", T3), G.Var("w", T3)
    bb = G.BlockBuilder()
    with bb.function("body", [i, keep, s, w]):
        with bb.dataflow():
            s2 = bb.emit(G.op.multiply(s, G.const(2.0)))
            s3 = bb.emit(G.op.add(s2, w))
            total = bb.emit(G.op.sum(s3))
            cond = bb.emit(G.op.less(total, G.const(50.0)))
            out = bb.emit_output(G.Tuple([cond, s3, s3]))
        bb.emit_func_output(out)
    s0, wv = G.Var("s0", T3), G.Var("wv", T3)
    out_sinfo = G.TupleStructInfo([T3, G.TensorStructInfo(None, "float32", 2)])
    with bb.function("main", [s0, wv]):
        r = bb.emit(G.op.control.loop(G.const(5, "int64"), G.const(True, "bool"), [s0], [wv], body="body",
                                      out_sinfo=out_sinfo))
        bb.emit_func_output(r)
    mod = bb.get()
    return mod.with_function("body", G.Function(mod["body"].params, mod["body"].body))


def _loop_numpy(s, w):
    trace = []
    for _ in range(5):
        s = s * 2 + w
        trace.append(s)
        if not s.sum() < 50:
            break
    return s, np.stack(trace)


@pytest.mark.compiler
def test_loop_op_runs_its_compiled_body_until_the_condition_fails():
    mod = _loop_module()
    text = mod.script()
    assert "R.loop(" in text and "@R.function(private=True)\n    def body(" in text
    again = from_source(text)  # the loop call (its out_sinfo attribute) and the body function parse back
    assert structural_equal(again["main"], mod["main"]) and structural_equal(again["body"], mod["body"])
    vm = G.Executor(G.build(mod, "llvm"), ingot.cpu())
    for s0 in (np.array([0.0, 0.5, 1.0], "float32"), np.array([10.0, 20.0, 30.0], "float32")):
        w = np.array([1.0, -1.0, 0.5], "float32")
        got_s, got_trace = vm["main"](s0, w)
        want_s, want_trace = _loop_numpy(s0, w)
        np.testing.assert_allclose(got_s.numpy(), want_s, rtol=1e-6)
        np.testing.assert_allclose(got_trace.numpy(), want_trace, rtol=1e-6)
        ref_s, ref_trace = evaluate(mod, [s0, w])
        np.testing.assert_allclose(ref_trace, want_trace, rtol=1e-6)


def test_scan_step_stacks_outputs_along_their_axes_in_both_directions():
    from ingot.graph.control_flow import run_control_step

    xs = np.arange(12, dtype="float32").reshape(3, 4)
    step = {"op": "scan", "attrs": {"body": "b", "num_states": 1, "num_scan_inputs": 1, "input_axes": [1],
                                    "input_reverse": [True], "output_axes": [1], "output_reverse": [True],
                                    "batched": False}}
    state, out = run_control_step(step, [np.zeros(3, "float32"), xs], lambda f, a: (a[0] + a[1], a[0] + a[1]))
    np.testing.assert_allclose(state, xs.sum(axis=1))
    partial = np.cumsum(xs[:, ::-1], axis=1)  # the states seen, in reverse input order
    np.testing.assert_allclose(out, partial[:, ::-1])


def test_control_steps_never_return_their_arguments_memory():
    from ingot.graph.control_flow import run_control_step

    workspace = np.arange(6, dtype="float32")
    captured = workspace[:3]  # a caller's planned intermediate
    step = {"op": "if_then_else", "attrs": {"then_branch": "t", "else_branch": "e"}}
    out = run_control_step(step, [np.array(True), captured], lambda f, a: a[0])
    np.testing.assert_array_equal(out, [0, 1, 2])
    workspace[:3] = -1  # the caller reuses the memory: the If's result is unaffected
    np.testing.assert_array_equal(out, [0, 1, 2])
    loop = {"op": "loop", "attrs": {"body": "b", "num_carried": 1}, "result": [{"dtype": "float32", "ndim": 1},
                                                                                {"dtype": "float32", "ndim": 2}]}
    carried, stacked = run_control_step(loop, [np.array(0), np.array(True), captured], lambda f, a: None)
    assert not np.may_share_memory(carried, workspace) and stacked.shape == (0, 0)
