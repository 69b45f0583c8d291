"""SimplifyInference, EliminateCommonSubexpr, ConvertLayout: before/after IR (structural equality)
and numerics of the rewritten graphs (evaluated with the ops' numpy references, no compiler)."""
import numpy as np
import pytest

from ingot import graph as G
from ingot.graph.op_registry import get_op_def
from ingot.ir import structural_equal

rng = np.random.default_rng(3)


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


def evaluate(mod, *args):
    """Interpret ``main`` with the registered numpy references."""
    func = mod["main"]
    env = {id(p): a for p, a in zip(func.params, args)}

    def val(e):
        if isinstance(e, G.Constant):
            return e.data
        if isinstance(e, G.Tuple):
            return [val(f) for f in e.fields]
        return env[id(e)]

    for block in func.body.blocks:
        for b in block.bindings:
            env[id(b.var)] = get_op_def(b.value.op.name).numpy([val(a) for a in b.value.args], b.value.attrs)
    return val(func.body.body)


def C(shape):
    return G.const(rng.standard_normal(shape).astype("float32"))


def BN(c):
    return [G.const((rng.standard_normal(c) * 0.3 + 1).astype("float32")), C((c,)), C((c,)),
            G.const((np.abs(rng.standard_normal(c)) + 0.5).astype("float32"))]


def _clean(mod):
    return G.transform.DeadCodeElimination()(G.transform.FoldConstant()(mod))


def test_simplify_inference_folds_bn_into_conv_weights():
    x = G.Var("x", T((1, 4, 6, 6)))
    w, bn = C((4, 4, 3, 3)), BN(4)
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(G.op.conv2d(x, w, padding=1))
            y = bb.emit(G.op.batch_norm(y, *bn))
            gv = bb.emit_output(G.op.relu(y))
        bb.emit_func_output(gv)
    before = bb.get()
    after = _clean(G.transform.SimplifyInference()(before))
    # Expected: conv with scaled weights, add of the shift, relu.
    gamma, beta, mean, var = (c.data.astype(np.float64) for c in bn)
    scale = gamma / np.sqrt(var + 1e-5)
    w2 = (w.data * scale.reshape(-1, 1, 1, 1)).astype("float32")
    shift = (beta - mean * scale).reshape(1, 4, 1, 1).astype("float32")
    x2 = G.Var("x", T((1, 4, 6, 6)))
    bb2 = G.BlockBuilder()
    with bb2.function("main", [x2]):
        with bb2.dataflow():
            y = bb2.emit(G.op.conv2d(x2, G.const(w2), padding=1), "lv1_bn")
            y = bb2.emit(G.op.add(y, G.const(shift)))
            gv = bb2.emit_output(G.op.relu(y))
        bb2.emit_func_output(gv)
    assert structural_equal(after["main"], bb2.get()["main"])
    data = rng.standard_normal((1, 4, 6, 6)).astype("float32")
    np.testing.assert_allclose(evaluate(after, data), evaluate(before, data), rtol=1e-5, atol=1e-5)


def test_simplify_inference_folds_into_linear_and_decomposes_the_rest():
    x = G.Var("x", T((3, 8)))
    w, b, bn, bn2 = C((5, 8)), C((5,)), BN(5), BN(5)
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(G.op.linear(x, w, b))
            y = bb.emit(G.op.batch_norm(y, *bn, axis=-1))
            y2 = bb.emit(G.op.batch_norm(y, *bn2, axis=1))  # y has two uses: decomposed, not folded
            gv = bb.emit_output(G.op.add(y, y2))
        bb.emit_func_output(gv)
    before = bb.get()
    after = _clean(G.transform.SimplifyInference()(before))
    ops = [bd.value.op.name for bd in after["main"].body.blocks[0].bindings]
    assert ops == ["linear", "multiply", "add", "add"]
    data = rng.standard_normal((3, 8)).astype("float32")
    np.testing.assert_allclose(evaluate(after, data), evaluate(before, data), rtol=1e-5, atol=1e-5)


def test_eliminate_common_subexpr():
    x = G.Var("x", T((4, 4)))
    w = C((4, 4))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(G.op.matmul(x, w))
            b = bb.emit(G.op.matmul(x, G.const(w.data.copy())))  # equal constant content
            c = bb.emit(G.op.sum(a, axis=1))
            d = bb.emit(G.op.sum(b, axis=1))
            e = bb.emit(G.op.sum(a, axis=0))  # different attributes: kept
            gv = bb.emit_output(G.op.add(c, d))
            gv2 = bb.emit_output(G.op.add(gv, e))
        bb.emit_func_output(gv2)
    after = G.transform.EliminateCommonSubexpr()(bb.get())
    x2 = G.Var("x", T((4, 4)))
    bb2 = G.BlockBuilder()
    with bb2.function("main", [x2]):
        with bb2.dataflow():
            a = bb2.emit(G.op.matmul(x2, w))
            c = bb2.emit(G.op.sum(a, axis=1))
            e = bb2.emit(G.op.sum(a, axis=0))
            gv = bb2.emit_output(G.op.add(c, c))
            gv2 = bb2.emit_output(G.op.add(gv, e))
        bb2.emit_func_output(gv2)
    assert structural_equal(after["main"], bb2.get()["main"])


def test_convert_layout_conv_relu_conv_converts_once_at_each_end():
    x = G.Var("x", T((1, 3, 8, 8)))
    w1, w2, bias = C((4, 3, 3, 3)), C((4, 4, 1, 1)), C((1, 4, 1, 1))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(G.op.conv2d(x, w1, padding=1))
            y = bb.emit(G.op.add(y, bias))
            y = bb.emit(G.op.relu(y))
            gv = bb.emit_output(G.op.conv2d(y, w2))
        bb.emit_func_output(gv)
    before = bb.get()
    after = _clean(G.transform.ConvertLayout({"conv2d": ["NHWC", "default"]})(before))
    x2 = G.Var("x", T((1, 3, 8, 8)))
    bb2 = G.BlockBuilder()
    with bb2.function("main", [x2]):
        with bb2.dataflow():
            y = bb2.emit(G.op.permute_dims(x2, (0, 2, 3, 1)))
            y = bb2.emit(G.op.conv2d(y, G.const(w1.data.transpose(2, 3, 1, 0).copy()), padding=1,
                                     data_layout="NHWC"))
            y = bb2.emit(G.op.add(y, G.const(bias.data.reshape(4, 1, 1).transpose(1, 2, 0))))
            y = bb2.emit(G.op.relu(y))
            y = bb2.emit(G.op.conv2d(y, G.const(w2.data.transpose(2, 3, 1, 0).copy()), data_layout="NHWC"))
            gv = bb2.emit_output(G.op.permute_dims(y, (0, 3, 1, 2)))
        bb2.emit_func_output(gv)
    assert structural_equal(after["main"], bb2.get()["main"])
    data = rng.standard_normal((1, 3, 8, 8)).astype("float32")
    np.testing.assert_allclose(evaluate(after, data), evaluate(before, data), rtol=1e-4, atol=1e-4)
    with pytest.raises(NotImplementedError, match="NHWC"):
        G.transform.ConvertLayout({"conv2d": ["NCHW4c"]})
