"""Graph modules in TVMScript (``@R.function``, ``R.call_tir``, ``R.dataflow``): what the printer
writes parses back, and the MLC course's hand-written modules parse and run."""
import numpy as np
import pytest

import ingot
from ingot import graph as G
from ingot.graph.printer import metadata_of
from ingot.script import ParseError, from_source
from ingot.script import ir as I
from ingot.script import relax as R
from ingot.script import tir as T
from ingot.target import Target

onnx = pytest.importorskip("onnx")  # the models come from ONNX, as users' do
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _onnx_mlp():
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype("float32"), n)
             for n, s in (("w1", (8, 16)), ("b1", (16,)), ("w2", (16, 4)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]), helper.make_node("MatMul", ["h2", "w2"], ["y"]),
             helper.make_node("Softmax", ["y"], ["z"], axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), (2, 8)


def _onnx_conv():
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype("float32"), n)
             for n, s in (("w", (4, 3, 3, 3)), ("b", (4,)))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["y"])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), (1, 3, 8, 8)


def _reparse(mod):
    return from_source(mod.script(), extra_vars={"metadata": metadata_of(mod)})


@pytest.mark.parametrize("make", [_onnx_mlp, _onnx_conv], ids=["mlp", "conv"])
def test_printed_model_parses_back_equal_at_every_stage(make):
    from ingot.frontend.onnx import from_onnx
    from ingot.graph.transform import LegalizeOps, default_build_pipeline

    mod, _ = from_onnx(make()[0])
    assert "# from ingot.script import relax as R" in mod.script()
    for stage in (mod, LegalizeOps()(mod), default_build_pipeline(Target("llvm"), "NCHW")(mod)):
        assert ingot.ir.structural_equal(_reparse(stage), stage)


def test_reparsed_conv_model_gives_the_same_numbers():
    from ingot.frontend.onnx import from_onnx

    model, shape = _onnx_conv()
    mod, _ = from_onnx(model)
    x = np.random.default_rng(2).standard_normal(shape).astype("float32")
    (want,) = ingot.run(ingot.compile(mod, "llvm"), {"x": x}).values()
    (got,) = ingot.run(ingot.compile(_reparse(mod), "llvm"), {"x": x}).values()
    np.testing.assert_array_equal(got, want)


def test_a_changed_constant_is_not_equal():
    bb = G.BlockBuilder()
    x = G.Var("x", G.TensorStructInfo((2,), "float32"))
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(G.op.add(x, G.const(np.float32(1.0)))))
    mod = bb.get()
    changed = from_source(mod.script().replace("R.const(1.0", "R.const(2.0"))
    assert ingot.ir.structural_equal(_reparse(mod), mod)
    assert not ingot.ir.structural_equal(changed, mod)


@I.ir_module
class MLCModule:
    @T.prim_func
    def linear0(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"), B: T.Buffer((128,), "float32"),
                Z: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @T.prim_func
    def relu0(X: T.Buffer((1, 128), "float32"), Y: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "relu0", "tir.noalias": True})
        for i, j in T.grid(1, 128):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @R.function
    def main(x: R.Tensor((1, 784), "float32"), w0: R.Tensor((128, 784), "float32"), b0: R.Tensor((128,), "float32")):
        with R.dataflow():
            lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_sinfo=R.Tensor((1, 128), dtype="float32"))
            out = R.call_tir(relu0, (lv0,), (1, 128), dtype="float32")  # the course's older spelling
            R.output(out)
        return out


def test_mlc_course_module_parses_round_trips_and_runs():
    main = MLCModule["main"]
    assert [type(b.var).__name__ for b in main.body.blocks[0].bindings] == ["DataflowVar", "Var"]
    assert ingot.ir.structural_equal(from_source(MLCModule.script()), MLCModule)
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((1, 784), (128, 784), (128,)))
    (out,) = ingot.run(ingot.compile(MLCModule, "llvm"), {"x": x, "w0": w, "b0": b}).values()
    np.testing.assert_allclose(out, np.maximum(x @ w.T + b, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("body, construct", [
    ("    for i in range(2):\n        pass\n    return x", "`for` is not supported in an @R.function"),
    ("    a, b = x, x\n    return a", "tuple unpacking is not supported"),
    ("    y = R.no_such_op(x)\n    return y", "R.no_such_op: no such operator"),
    ("    return cls.nothing(x)", "no function 'nothing'"),
])
def test_unsupported_constructs_are_named(body, construct):
    text = "@I.ir_module\nclass M:\n    @R.function\n    def main(x: R.Tensor((2,), 'float32')):\n" + \
        "\n".join("    " + line for line in body.splitlines()) + "\n"
    with pytest.raises(ParseError, match=construct):
        from_source(text)


def test_symbolic_dims_and_an_unbound_return_value():
    @I.ir_module
    class Dyn:
        @R.function
        def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor(("n", 4), "float32")):
            return R.add(x, y)

    main = Dyn["main"]
    assert main.params[0].struct_info.shape[0] is main.params[1].struct_info.shape[0]
    assert ingot.ir.structural_equal(from_source(Dyn.script()), Dyn)
    x = np.arange(12, dtype="float32").reshape(3, 4)
    (out,) = ingot.run(ingot.compile(Dyn, "llvm"), {"x": x, "y": x}).values()
    np.testing.assert_array_equal(out, 2 * x)


def test_graph_function_calls_one_written_below_it():
    bb = G.BlockBuilder()
    x = G.Var("x", G.TensorStructInfo((4,), "float32"))
    y = G.Var("y", G.TensorStructInfo((4,), "float32"))
    with bb.function("main", [x]):
        gv = bb.emit(G.Call(G.GlobalVar("helper"), [x], struct_info=x.struct_info))
        bb.emit_func_output(gv)
    with bb.function("helper", [y]):
        bb.emit_func_output(bb.emit(G.op.exp(y)))
    mod = bb.get()
    assert mod.function_names == ["main", "helper"] and "cls.helper(x)" in mod.script()
    assert ingot.ir.structural_equal(from_source(mod.script()), mod)


def test_dynamic_batch_model_round_trips_function_by_function():
    # Legalization reuses the graph's symbolic variable in its PrimFuncs; parsed functions each get
    # their own, so the comparison is per function (module-level equality maps variables module-wide).
    from ingot.frontend.onnx import from_onnx
    from ingot.graph.transform import LegalizeOps

    w = numpy_helper.from_array(np.random.default_rng(3).standard_normal((8, 4)).astype("float32"), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [w])
    mod, _ = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert "N = T.int64()" in mod.script()
    for stage in (mod, LegalizeOps()(mod)):
        back = _reparse(stage)
        assert back.function_names == stage.function_names
        assert all(ingot.ir.structural_equal(back[n], stage[n]) for n in stage.function_names)


def test_global_symbols_survive_the_round_trip():
    def func(**attrs):
        x = G.Var("x", G.TensorStructInfo((2,), "float32"))
        y = G.Var("y", x.struct_info)
        return G.Function([x], G.SeqExpr([G.BindingBlock([G.VarBinding(y, G.op.exp(x))])], y), attrs=attrs)

    funcs = {"main": func(global_symbol="main"), "anonymous": func(),
             "region": func(global_symbol="cblas_main_0", Primitive=True), "fused": func(Primitive=True)}
    mod = ingot.IRModule(funcs)
    back = from_source(mod.script())
    assert {n: f.attrs.get("global_symbol") for n, f in back.functions.items()} == \
        {"main": "main", "anonymous": None, "region": "cblas_main_0", "fused": None}
    assert ingot.ir.structural_equal(back, mod)
