"""Graph IR: struct info, shape inference, builder, printer, structural equality, passes (no compiler)."""
import numpy as np
import pytest

from ingot import graph as G
from ingot.ir import Var as PVar, structural_equal
from ingot.ir.error import IRError


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


def test_broadcast_and_symbolic_shape_inference():
    n = PVar("n", "int64")
    x = G.Var("x", T((n, 1, 3)))
    b = G.Var("b", T((4, 1)))
    assert G.op.add(x, b).struct_info.shape == (n, 4, 3)
    y = G.Var("y", T((n, 8)))
    assert G.op.matmul(y, G.Var("w", T((8, 5)))).struct_info.shape == (n, 5)
    assert G.op.linear(y, G.Var("w", T((16, 8)))).struct_info.shape == (n, 16)
    assert structural_equal(G.op.flatten(G.Var("z", T((n, 2, 3)))).struct_info.shape[1], 6)
    # a symbolic dim against a constant is the constant (n is 1 or 4 at run time; the kernel reads a 1
    # at select(n == 1, 0, i)); against a different symbolic dim the result has no name: an error
    assert G.op.add(G.Var("a", T((n,))), G.Var("c", T((4,)))).struct_info.shape == (4,)
    assert G.op.add(G.Var("c", T((4, 1))), G.Var("a", T((n, 3)))).struct_info.shape == (4, 3)
    with pytest.raises(IRError, match="do not broadcast"):
        G.op.add(G.Var("a", T((n,))), G.Var("c", T((PVar("m", "int64"),))))
    with pytest.raises(IRError, match="do not broadcast"):
        G.op.add(G.Var("a", T((3,))), G.Var("c", T((4,))))
    # a -1 over symbolic sizes comes out simplified: the round trip gives n back, which broadcasts with n
    flat = G.op.reshape(G.Var("h", T((n, 8, 96))), (-1, 768))
    back = G.op.reshape(G.Var("f", flat.struct_info), (-1, 8, 96))
    assert back.struct_info.shape[0] is n or structural_equal(back.struct_info.shape[0], n)
    assert G.op.add(G.Var("r", back.struct_info), G.Var("s", T((n, 8, 96)))).struct_info.shape[1:] == (8, 96)
    with pytest.raises(IRError, match="dtypes differ"):
        G.op.add(G.Var("a", T((4,))), G.Var("c", T((4,), "float16")))


@pytest.mark.parametrize("call, shape", [
    (lambda: G.op.conv2d(G.Var("x", T((1, 3, 32, 32))), G.Var("w", T((8, 3, 3, 3))), strides=2, padding=1), (1, 8, 16, 16)),
    (lambda: G.op.conv2d(G.Var("x", T((1, 8, 9, 9))), G.Var("w", T((8, 2, 3, 3))), dilation=2, groups=4), (1, 8, 5, 5)),
    (lambda: G.op.max_pool2d(G.Var("x", T((1, 8, 16, 16))), 3, 2, 1), (1, 8, 8, 8)),
    (lambda: G.op.global_avg_pool2d(G.Var("x", T((2, 8, 7, 7)))), (2, 8, 1, 1)),
    (lambda: G.op.sum(G.Var("x", T((2, 3, 4))), axis=(0, 2), keepdims=True), (1, 3, 1)),
    (lambda: G.op.reshape(G.Var("x", T((2, 3, 4))), (-1, 4)), (6, 4)),
    (lambda: G.op.permute_dims(G.Var("x", T((2, 3, 4))), (2, 0, 1)), (4, 2, 3)),
    (lambda: G.op.concat([G.Var("a", T((2, 3))), G.Var("b", T((2, 5)))], axis=1), (2, 8)),
    (lambda: G.op.matmul(G.Var("a", T((8, 1, 4, 16))), G.Var("b", T((3, 16, 5)))), (8, 3, 4, 5)),
    (lambda: G.op.strided_slice(G.Var("x", T((8, 4))), [1], [-1], [2]), (3, 4)),
    (lambda: G.op.take(G.Var("e", T((100, 16))), G.Var("i", T((2, 5), "int64"))), (2, 5, 16)),
])
def test_op_shapes(call, shape):
    assert call().struct_info.shape == shape


def test_attribute_errors_name_the_op():
    x = G.Var("x", T((2, 3)))
    with pytest.raises(IRError, match="'conv2d'.*4-D"):
        G.op.conv2d(x, x)
    with pytest.raises(IRError, match="no attribute"):
        from ingot.graph.op_registry import make_call
        make_call("relu", [x], alpha=1.0)


def _mlp_module(n=1):
    x = G.Var("x", T((n, 784)))
    w0, b0 = G.Var("w0", T((128, 784))), G.Var("b0", T((128,)))
    w1, b1 = G.Var("w1", T((10, 128))), G.Var("b1", T((10,)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            lv0 = bb.emit(G.op.linear(x, w0, b0))
            lv1 = bb.emit(G.op.relu(lv0))
            out = bb.emit_output(G.op.linear(lv1, w1, b1))
        bb.emit_func_output(out)
    return bb.get()


def test_builder_printer_and_structural_equality():
    mod = _mlp_module()
    text = mod.script()
    assert 'lv0: R.Tensor((1, 128), dtype="float32") = R.linear(x, w0, b0)' in text
    assert "R.output(gv0)" in text
    assert structural_equal(_mlp_module()["main"], mod["main"])
    # Alpha-equivalence is by definition, not by struct info: swapping operands differs.
    a, b = G.Var("a", T((4,))), G.Var("b", T((4,)))
    def f(swap):
        bb = G.BlockBuilder()
        with bb.function("main", [a, b]):
            bb.emit_func_output(bb.emit(G.op.subtract(b, a) if swap else G.op.subtract(a, b)))
        return bb.get()["main"]
    assert not structural_equal(f(False), f(True))


def test_bind_params_fold_constant_dce():
    rng = np.random.default_rng(0)
    params = {"w0": rng.standard_normal((128, 784)).astype("float32")}
    mod = G.transform.BindParams("main", params)(_mlp_module())
    assert [p.name_hint for p in mod["main"].params] == ["x", "b0", "w1", "b1"]
    with pytest.raises(IRError, match="shape"):
        G.transform.BindParams("main", {"b0": np.zeros(3, "float32")})(_mlp_module())

    x = G.Var("x", T((2,)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            c = bb.emit(G.op.exp(G.const(np.zeros(2, "float32"))))
            d = bb.emit(G.op.multiply(c, G.const(np.full(2, 3.0, "float32"))))
            gv = bb.emit_output(G.op.add(x, d))
        bb.emit_func_output(gv)
    folded = G.transform.DeadCodeElimination()(G.transform.FoldConstant()(bb.get()))
    x2 = G.Var("x", T((2,)))
    bb2 = G.BlockBuilder()
    with bb2.function("main", [x2]):
        with bb2.dataflow():
            gv2 = bb2.emit_output(G.op.add(x2, G.const(np.full(2, 3.0, "float32"))))
        bb2.emit_func_output(gv2)
    assert structural_equal(folded["main"], bb2.get()["main"])


def test_fuse_ops_groups_linear_bias_relu_and_residual():
    x, w = G.Var("x", T((4, 8))), G.Var("w", T((8, 8)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv0 = bb.emit(G.op.linear(x, w))
            lv1 = bb.emit(G.op.relu(lv0))
            lv2 = bb.emit(G.op.add(lv1, x))
            lv3 = bb.emit(G.op.softmax(lv2))
            gv = bb.emit_output(G.op.exp(lv3))
        bb.emit_func_output(gv)
    fused = G.transform.FuseOps()(bb.get())
    assert sorted(fused.functions) == ["fused_linear_relu_add", "main"]
    group = fused["fused_linear_relu_add"]
    assert group.attrs["Primitive"] and [p.name_hint for p in group.params] == ["x", "w"]
    # Expected main: one call to the group, then softmax and exp stay separate (softmax is opaque).
    x2, w2 = G.Var("x", T((4, 8))), G.Var("w", T((8, 8)))
    bb2 = G.BlockBuilder()
    with bb2.function("main", [x2, w2]):
        with bb2.dataflow():
            lv = bb2.emit(G.Call(G.GlobalVar("fused_linear_relu_add"), [x2, w2], struct_info=T((4, 8))))
            lv3 = bb2.emit(G.op.softmax(lv))
            gv = bb2.emit_output(G.op.exp(lv3))
        bb2.emit_func_output(gv)
    assert structural_equal(fused["main"], bb2.get()["main"])


def test_fuse_ops_keeps_multi_use_values_unfused():
    x = G.Var("x", T((4,)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(G.op.exp(x))
            lv1 = bb.emit(G.op.relu(lv0))
            gv = bb.emit_output(G.op.add(lv1, lv0))
        bb.emit_func_output(gv)
    fused = G.transform.FuseOps()(bb.get())
    assert sorted(fused.functions) == ["fused_relu_add", "main"]
