"""Run-time shapes in the graph IR: tensor_to_shape binds fresh dims, builtins with data-dependent
outputs, kernels compiled once for symbolic sizes, printer/parser round trip, export/load."""
import numpy as np
import pytest

import ingot
from ingot import graph as G
from ingot.graph.runtime_shape import run_builtin
from ingot.ir import structural_equal
from ingot.script import from_source


def _reshape_nonzero_module():
    x = G.Var("x", G.TensorStructInfo((4, 6), "float32"))
    s = G.Var("s", G.TensorStructInfo((2,), "int64"))
    bb = G.BlockBuilder()
    with bb.function("main", [x, s]):
        with bb.dataflow():
            t = bb.emit(G.op.builtin("reshape_shape", s, x, outputs=(((2,), "int64"),)))
            sh = bb.emit(G.op.tensor_to_shape(t, ("rt0", "rt1")))
            y = bb.emit(G.op.relu(bb.emit(G.op.reshape(x, sh.struct_info.values))))
            nz = bb.emit(G.op.builtin("nonzero", y, outputs=(((2, "rt2"), "int64"),)))
            gv = bb.emit_output(G.Tuple([bb.emit(G.op.exp(y)), nz]))
        bb.emit_func_output(gv)
    return bb.get()


def _expected(x, target):
    r = np.maximum(x.reshape(run_builtin("reshape_shape", [np.array(target), x], {}).tolist()), 0)
    return np.exp(r), np.array(np.nonzero(r))


def test_run_time_reshape_and_nonzero_compile_once_and_match_numpy():
    ex = G.build(_reshape_nonzero_module(), "llvm")
    plan = ex.plans["main"]
    assert "main" not in ex.aot  # run-time shapes run on the interpreter
    kinds = [s["op"] for s in plan["steps"]]
    assert kinds.count("builtin") == 3 and kinds.count("call_tir") == 2
    vm = G.Executor(ex, ingot.cpu())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6)).astype("float32")
    shapes = set()
    for target in ([3, -1], [4, 0], [-1, 12], [24, 1]):
        a, b = vm["main"](x, np.array(target, "int64"))
        exp_a, exp_b = _expected(x, target)
        np.testing.assert_allclose(a.numpy(), exp_a, rtol=1e-5)
        np.testing.assert_array_equal(b.numpy(), exp_b)
        shapes.add(a.numpy().shape)
    assert len(shapes) == 4  # one build, four run-time shapes


def test_run_time_shape_errors_name_the_builtin():
    vm = G.Executor(G.build(_reshape_nonzero_module(), "llvm"), ingot.cpu())
    with pytest.raises(ingot.ir.error.IRError, match="Reshape: cannot reshape"):
        vm["main"](np.zeros((4, 6), "float32"), np.array([5, -1], "int64"))


def test_runtime_shape_module_prints_and_parses_back():
    mod = _reshape_nonzero_module()
    text = mod.script()
    assert "R.tensor_to_shape(" in text and "R.Shape([rt0, rt1])" in text and 'kind="nonzero"' in text
    parsed = from_source(text)
    assert structural_equal(parsed["main"], mod["main"])
    assert parsed.script() == text


def test_dead_code_elimination_keeps_tensor_to_shape():
    mod = G.transform.DeadCodeElimination()(_reshape_nonzero_module())
    assert "tensor_to_shape" in mod.script()


def test_exported_runtime_shape_executable_runs_after_load(tmp_path):
    ex = G.build(_reshape_nonzero_module(), "llvm")
    path = ex.export_library(str(tmp_path / "m.so"))
    vm = G.Executor(G.load_executable(path), ingot.cpu())
    x = np.arange(24, dtype="float32").reshape(4, 6) - 10
    a, b = vm["main"](x, np.array([2, -1], "int64"))
    exp_a, exp_b = _expected(x, [2, -1])
    np.testing.assert_allclose(a.numpy(), exp_a, rtol=1e-5)
    np.testing.assert_array_equal(b.numpy(), exp_b)


@pytest.mark.parametrize("kind,args,params", [
    ("unique", [np.array([2, 1, 1, 3, 4, 3])], {"sorted": 0}),
    ("compress", [np.arange(6).reshape(3, 2), np.array([0, 1, 1], bool)], {"axis": 0}),
    ("topk", [np.array([[3.0, 1.0, 4.0, 1.0]]), np.array([2])], {"axis": 1, "largest": 1}),
    ("slice", [np.arange(10), np.array([8]), np.array([1]), np.array([0]), np.array([-3])], {}),
    ("tile", [np.arange(3), np.array([2])], {}),
    ("range", [np.array(1), np.array(8), np.array(3)], {}),
])
def test_builtins_match_numpy(kind, args, params):
    out = run_builtin(kind, args, params)
    expected = {
        "unique": lambda: (np.array([2, 1, 3, 4]), np.array([0, 1, 3, 4]), np.array([0, 1, 1, 2, 3, 2]),
                           np.array([1, 2, 2, 1])),
        "compress": lambda: np.arange(6).reshape(3, 2)[1:],
        "topk": lambda: (np.array([[4.0, 3.0]]), np.array([[2, 0]])),
        "slice": lambda: np.arange(10)[8:1:-3],
        "tile": lambda: np.tile(np.arange(3), 2),
        "range": lambda: np.arange(1, 8, 3),
    }[kind]()
    for o, e in zip(out if isinstance(out, tuple) else (out,), expected if isinstance(expected, tuple) else (expected,)):
        np.testing.assert_array_equal(o, e)


def test_static_intermediates_of_a_run_time_plan_are_planned():
    # exp(x) (static, 4x6) feeds the run-time reshape: it lives in the planned workspace, the rest is allocated.
    x = G.Var("x", G.TensorStructInfo((4, 6), "float32"))
    s = G.Var("s", G.TensorStructInfo((2,), "int64"))
    bb = G.BlockBuilder()
    with bb.function("main", [x, s]):
        e = bb.emit(G.op.exp(x))
        e2 = bb.emit(G.op.sqrt(e))
        sh = bb.emit(G.op.tensor_to_shape(s, ("rt0", "rt1")))
        bb.emit_func_output(bb.emit(G.op.reshape(e2, sh.struct_info.values)))
    ex = G.build(bb.get(), "llvm")
    plan = ex.plans["main"]
    assert plan["memory"] is None and plan["known_memory"]["workspace_bytes"] >= 4 * 6 * 4
    vm = G.Executor(ex, ingot.cpu())
    data = np.linspace(0, 1, 24, dtype="float32").reshape(4, 6)
    for target in ((3, 8), (24, 1)):
        out = vm["main"](data, np.array(target, "int64")).numpy()
        np.testing.assert_allclose(out, np.sqrt(np.exp(data)).reshape(target), rtol=1e-6)


def test_static_module_builds_as_before():
    x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(G.op.relu(bb.emit(G.op.reshape(x, (3, 2))))))
    ex = G.build(bb.get(), "llvm")
    plan = ex.plans["main"]
    assert "main" in ex.aot and plan["memory"] is not None and "known_memory" not in plan
    assert all(s["op"] == "call_tir" for s in plan["steps"])
