"""PackWeights: before/after IR (structural equality), fallbacks that keep the original operator,
numerics of the rewritten graphs (numpy references), and compiled models whose kernels read the
pre-packed panels (the schedule rules skip their per-call packing stage)."""
import numpy as np
import pytest

import ingot
from ingot import graph as G
from ingot.graph.op._ref import conv2d_nchw
from ingot.graph.op_registry import get_op_def
from ingot.graph.transform import PackWeights
from ingot.ir import structural_equal
from ingot.ops import packed

rng = np.random.default_rng(5)
P, L = 32, 16  # explicit panel / lanes: the IR tests do not depend on the host's vector width


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


def W(*shape):
    return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype("float32")


def one_op(x_sinfo, make):
    """``main(x) = make(x)`` as a module."""
    x = G.Var("x", x_sinfo)
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(make(x))
        bb.emit_func_output(gv)
    return bb.get()


def evaluate(mod, *args):
    """Interpret ``main`` with the registered numpy references."""
    func = mod["main"]
    env = {id(p): a for p, a in zip(func.params, args)}

    def val(e):
        return e.data if isinstance(e, G.Constant) else env[id(e)]

    for block in func.body.blocks:
        for b in block.bindings:
            env[id(b.var)] = get_op_def(b.value.op.name).numpy([val(a) for a in b.value.args], b.value.attrs)
    return val(func.body.body)


def ops_of(mod):
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings]


def test_conv2d_weight_is_packed_into_output_channel_panels():
    w = W(64, 16, 3, 3)
    before = one_op(T((1, 16, 14, 14)), lambda x: G.op.conv2d(x, G.const(w), strides=2, padding=1))
    after = PackWeights(P, L)(before)
    expected = one_op(T((1, 16, 14, 14)), lambda x: G.op.packed.conv2d_packed_weight(
        x, G.const(packed.pack_conv2d_weight(w, P)), strides=2, padding=1))
    assert structural_equal(after, expected)
    wp = after["main"].body.blocks[0].bindings[0].value.args[1].data
    assert wp.shape == (2, 16, 3, 3, 32) and wp[1, 5, 2, 0, 7] == w[32 + 7, 5, 2, 0]
    x = rng.standard_normal((1, 16, 14, 14)).astype("float32")
    np.testing.assert_allclose(evaluate(after, x), conv2d_nchw(x, w, (2, 2), (1, 1, 1, 1)), rtol=1e-5, atol=1e-5)


def test_linear_and_matmul_weights_become_dense_packed():
    w, b = W(80, 64), W(80)
    lin = PackWeights(P, L)(one_op(T((2, 128, 64)), lambda x: G.op.linear(x, G.const(w), G.const(b))))
    # 80 output features: not a multiple of 32, so one-vector (16-wide) panels
    expected = one_op(T((2, 128, 64)), lambda x: G.op.packed.dense_packed_weight(
        x, G.const(packed.pack_dense_weight(w, 16)), G.const(b)))
    assert structural_equal(lin, expected)
    x = rng.standard_normal((2, 128, 64)).astype("float32")
    np.testing.assert_allclose(evaluate(lin, x), x @ w.T + b, rtol=1e-5, atol=1e-5)
    wm = W(64, 128)  # matmul's weight is (K, N): packed from its transpose
    mm = PackWeights(P, L)(one_op(T((4, 64)), lambda x: G.op.matmul(x, G.const(wm))))
    expected = one_op(T((4, 64)), lambda x: G.op.packed.dense_packed_weight(
        x, G.const(packed.pack_dense_weight(np.ascontiguousarray(wm.T), P))))
    assert structural_equal(mm, expected)
    x = rng.standard_normal((4, 64)).astype("float32")
    np.testing.assert_allclose(evaluate(mm, x), x @ wm, rtol=1e-5, atol=1e-5)


def test_depthwise_conv_is_packed_by_vector_width():
    w = W(48, 1, 3, 3)
    after = PackWeights(P, L)(one_op(T((1, 48, 7, 7)), lambda x: G.op.conv2d(x, G.const(w), padding=1, groups=48)))
    expected = one_op(T((1, 48, 7, 7)), lambda x: G.op.packed.depthwise_conv2d_packed_weight(
        x, G.const(packed.pack_depthwise_weight(w, L)), padding=1))
    assert structural_equal(after, expected)
    x = rng.standard_normal((1, 48, 7, 7)).astype("float32")
    np.testing.assert_allclose(evaluate(after, x), conv2d_nchw(x, w, (1, 1), (1, 1, 1, 1), groups=48), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("case", ["weight_is_input", "ragged_channels", "grouped", "nhwc_depthwise", "float64",
                                  "vector_x"])
def test_unpackable_calls_keep_their_operator(case):
    if case == "weight_is_input":
        x, wv = G.Var("x", T((1, 64))), G.Var("w", T((32, 64)))
        bb = G.BlockBuilder()
        with bb.function("main", [x, wv]):
            bb.emit_func_output(bb.emit(G.op.linear(x, wv)))
        mod = bb.get()
    elif case == "ragged_channels":  # 24 output channels: no 16-wide panel
        mod = one_op(T((1, 8, 8, 8)), lambda x: G.op.conv2d(x, G.const(W(24, 8, 3, 3)), padding=1))
    elif case == "grouped":
        mod = one_op(T((1, 32, 8, 8)), lambda x: G.op.conv2d(x, G.const(W(32, 16, 3, 3)), padding=1, groups=2))
    elif case == "nhwc_depthwise":  # channels already contiguous in NHWC: nothing to pack
        mod = one_op(T((1, 8, 8, 32)), lambda x: G.op.conv2d(x, G.const(W(3, 3, 1, 32)), padding=1, groups=32,
                                                             data_layout="NHWC"))
    elif case == "float64":
        mod = one_op(T((1, 64), "float64"), lambda x: G.op.linear(x, G.const(W(32, 64).astype("float64"))))
    else:
        mod = one_op(T((64,)), lambda x: G.op.matmul(x, G.const(W(64, 32))))
    assert structural_equal(PackWeights(P, L)(mod), mod)


def test_default_pipeline_packs_after_batch_norm_folding():
    w, bn = W(32, 8, 3, 3), [G.const(np.abs(W(32)) + 0.5) for _ in range(4)]
    x = G.Var("x", T((1, 8, 8, 8)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(G.op.conv2d(x, G.const(w), padding=1))
            gv = bb.emit_output(G.op.batch_norm(y, *bn))
        bb.emit_func_output(gv)
    mod = bb.get()
    from ingot.graph.transform import FoldConstant, SimplifyInference

    out = PackWeights(P, L)(FoldConstant()(SimplifyInference()(mod)))
    assert ops_of(out)[-2:] == ["conv2d_packed_weight", "add"]
    x = rng.standard_normal((1, 8, 8, 8)).astype("float32")
    np.testing.assert_allclose(evaluate(out, x), evaluate(FoldConstant()(SimplifyInference()(mod)), x),
                               rtol=1e-4, atol=1e-4)


# -- compiled: kernels read the packed panels ----------------------------------------------------


def _cnn():
    """conv3x3(16→32)+bias+relu → depthwise3x3(32)+relu → conv1x1(32→64) → flatten → linear(…→64)."""
    w1, b1, wd, w2, wl = W(32, 16, 3, 3), W(32), W(32, 1, 3, 3), W(64, 32, 1, 1), W(64, 64 * 7 * 7)
    x = G.Var("x", T((1, 16, 14, 14)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(G.op.conv2d(x, G.const(w1), padding=1))
            h = bb.emit(G.op.relu(bb.emit(G.op.add(h, G.const(b1.reshape(1, 32, 1, 1))))))
            h = bb.emit(G.op.relu(bb.emit(G.op.conv2d(h, G.const(wd), strides=2, padding=1, groups=32))))
            h = bb.emit(G.op.conv2d(h, G.const(w2)))
            gv = bb.emit_output(G.op.linear(bb.emit(G.op.reshape(h, (1, 64 * 7 * 7))), G.const(wl)))
        bb.emit_func_output(gv)

    def ref(data):
        h = np.maximum(conv2d_nchw(data, w1, (1, 1), (1, 1, 1, 1)) + b1.reshape(1, 32, 1, 1), 0)
        h = np.maximum(conv2d_nchw(h, wd, (2, 2), (1, 1, 1, 1), groups=32), 0)
        return conv2d_nchw(h, w2).reshape(1, -1) @ wl.T

    return bb.get(), ref


@pytest.mark.compiler
def test_compiled_cnn_reads_packed_weights_and_matches_numpy():
    from ingot.graph.transform import default_build_pipeline
    from ingot.ops.schedule import schedule_blocks
    from ingot.target import Target
    from ingot.tir.function import PrimFunc
    from ingot.tir.schedule import Schedule

    mod, ref = _cnn()
    lowered = default_build_pipeline(layout="NCHW")(mod)  # the NCHW packed layouts (NHWC: test below)
    kernels = {n: f for n, f in lowered.functions.items() if isinstance(f, PrimFunc)}
    # fused kernels keep their names (PackWeights runs after FuseOps); unfused calls are renamed
    assert {"fused_conv2d_add_relu", "fused_conv2d_relu", "conv2d_packed_weight", "dense_packed_weight"} <= \
        set(kernels), sorted(kernels)
    target = Target("llvm -num-cores=2")
    for name, func in kernels.items():
        log: list = []
        sch = schedule_blocks(Schedule(func), target, log=log)
        # no per-call weight copy: the rules' cache_read stages would be named "<weight>_global"
        # (without PackWeights this model has two: "p1_global" and "A1_global")
        blocks = [b for b in sch.state.blocks("main") if b.endswith("_global")]
        assert not blocks, (name, blocks)
        rules = {blk: rule for blk, rule, _ in log}
        if "depthwise" in name:  # vectorized over channels, not the predicated/scalar width path
            assert rules["depthwise_conv2d_nchw"] == "conv_oc_rule", log
    ex = G.build(mod, "llvm -num-cores=2", layout="NCHW")
    data = rng.standard_normal((1, 16, 14, 14)).astype("float32")
    np.testing.assert_allclose(G.Executor(ex)["main"](data).numpy(), ref(data), rtol=1e-4, atol=1e-4)
    assert all(how == "default" for how in ex.schedule_report.values()), ex.schedule_report
    _ = ingot


def test_nhwc_conv2d_weight_is_packed_into_output_channel_panels():
    w = W(3, 3, 16, 64)  # HWIO
    before = one_op(T((1, 14, 14, 16)), lambda x: G.op.conv2d(x, G.const(w), strides=2, padding=1,
                                                              data_layout="NHWC"))
    after = PackWeights(P, L)(before)
    expected = one_op(T((1, 14, 14, 16)), lambda x: G.op.packed.conv2d_nhwc_packed_weight(
        x, G.const(packed.pack_conv2d_nhwc_weight(w, P)), strides=2, padding=1))
    assert structural_equal(after, expected)
    wp = after["main"].body.blocks[0].bindings[0].value.args[1].data
    assert wp.shape == (2, 3, 3, 16, 32) and wp[1, 2, 0, 5, 7] == w[2, 0, 5, 32 + 7]
    x = rng.standard_normal((1, 14, 14, 16)).astype("float32")
    want = conv2d_nchw(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (2, 2), (1, 1, 1, 1)).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(evaluate(after, x), want, rtol=1e-5, atol=1e-5)
    assert structural_equal(PackWeights(P, L)(after), after)  # idempotent


@pytest.mark.compiler
def test_compiled_cnn_in_nhwc_packs_and_matches_numpy():
    """The default CPU pipeline (NHWC): conv weights packed as [O/P, KH, KW, C, P] inside the fused
    kernels (names kept), depthwise stays a plain NHWC conv2d."""
    from ingot.graph.transform import default_build_pipeline
    from ingot.tir.function import PrimFunc

    mod, ref = _cnn()
    lowered = default_build_pipeline("llvm")(mod)
    kernels = {n: f for n, f in lowered.functions.items() if isinstance(f, PrimFunc)}
    assert {"fused_conv2d_add_relu", "fused_conv2d_relu", "conv2d_nhwc_packed_weight"} <= set(kernels), \
        sorted(kernels)
    shapes = [tuple(int(d) for d in p.shape) for f in kernels.values() for p in f.params if hasattr(p, "shape")]
    from ingot.graph.transform.pack_weights import default_panel

    panel = default_panel("llvm")[0]  # two vectors of the host's lanes: 32 with AVX-512, 16 with AVX2
    assert (32 // panel, 3, 3, 16, panel) in shapes and (3, 3, 1, 32) in shapes  # packed conv, HWIO depthwise
    ex = G.build(mod, "llvm -num-cores=2")
    data = rng.standard_normal((1, 16, 14, 14)).astype("float32")
    np.testing.assert_allclose(G.Executor(ex)["main"](data).numpy(), ref(data), rtol=1e-4, atol=1e-4)


def test_fused_group_weights_are_packed_through_parameters():
    from ingot.graph.transform import FuseOps

    w = W(32, 64)
    x = G.Var("x", T((1, 64)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(G.op.relu(bb.emit(G.op.linear(x, G.const(w)))))
        bb.emit_func_output(gv)
    fused = FuseOps()(bb.get())
    after = PackWeights(P, L)(fused)
    group = after["fused_linear_relu"]
    assert [b.value.op.name for b in group.body.blocks[0].bindings] == ["dense_packed_weight", "relu"]
    assert group.params[1].struct_info.shape == (1, 64, 32)
    site = after["main"].body.blocks[0].bindings[0].value
    np.testing.assert_array_equal(site.args[1].data, packed.pack_dense_weight(w, P))
    # a group whose weight is a function input keeps the original operator
    xw = G.Var("w", T((32, 64)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, xw]):
        with bb.dataflow():
            gv = bb.emit_output(G.op.relu(bb.emit(G.op.linear(x, xw))))
        bb.emit_func_output(gv)
    fused = FuseOps()(bb.get())
    assert structural_equal(PackWeights(P, L)(fused), fused)


def test_small_batch_matmul_with_ragged_n_becomes_linear():
    # ResNet-50's fc as exported (MatMul by W[K, N], N = 1000): no panel fits N, and with <= 4
    # rows the transposed weight lets gemv_rule stream each weight row once
    wm = W(64, 40)
    after = PackWeights(P, L)(one_op(T((1, 64)), lambda x: G.op.matmul(x, G.const(wm))))
    expected = one_op(T((1, 64)), lambda x: G.op.linear(x, G.const(np.ascontiguousarray(wm.T))))
    assert structural_equal(after, expected)
    x = rng.standard_normal((1, 64)).astype("float32")
    np.testing.assert_allclose(evaluate(after, x), x @ wm, rtol=1e-5, atol=1e-5)
    # more rows than gemv_rule takes: gemm_rule's register tile reuses the [K, N] layout
    many = one_op(T((8, 64)), lambda x: G.op.matmul(x, G.const(wm)))
    assert structural_equal(PackWeights(P, L)(many), many)


def test_compiled_fc_matmul_add_matches_numpy():
    from ingot.testing.mlp import matmul_add_module

    K, N = 256, 200
    wm, b = W(K, N), W(N)
    mod = matmul_add_module(wm, b)
    ex = G.build(mod, "llvm")
    assert ex.schedule_report == {"fused_matmul_add": "default"}
    xs = rng.standard_normal((1, K)).astype("float32")
    out = G.Executor(ex)["main"](xs)
    np.testing.assert_allclose(out.numpy(), xs @ wm + b, rtol=1e-4, atol=1e-4)
