"""Whole models built with the BlockBuilder, compiled and compared with numpy: a ResNet-style
block (conv-bn-relu-conv-bn + residual + relu, BN folded by SimplifyInference) and a transformer
encoder layer (multi-head attention, layer norm, GELU MLP)."""
import math

import numpy as np
import pytest


import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.graph.op import _ref  # noqa: E402

rng = np.random.default_rng(7)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


def _bn_params(c):
    return [rng.standard_normal(c).astype("float32") * 0.5 + 1, rng.standard_normal(c).astype("float32") * 0.1,
            rng.standard_normal(c).astype("float32") * 0.1, np.abs(rng.standard_normal(c)).astype("float32") + 0.5]


def resnet_block(c=8, hw=8):
    w1 = (rng.standard_normal((c, c, 3, 3)) * 0.2).astype("float32")
    w2 = (rng.standard_normal((c, c, 3, 3)) * 0.2).astype("float32")
    bn1, bn2 = _bn_params(c), _bn_params(c)
    x = G.Var("x", T((1, c, hw, hw)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(G.op.conv2d(x, G.const(w1), padding=1))
            y = bb.emit(G.op.batch_norm(y, *map(G.const, bn1)))
            y = bb.emit(G.op.relu(y))
            y = bb.emit(G.op.conv2d(y, G.const(w2), padding=1))
            y = bb.emit(G.op.batch_norm(y, *map(G.const, bn2)))
            y = bb.emit(G.op.add(y, x))
            gv = bb.emit_output(G.op.relu(y))
        bb.emit_func_output(gv)

    def ref(data):
        y = _ref.batch_norm(_ref.conv2d_nchw(data, w1, padding=(1, 1, 1, 1)), *bn1, 1, 1e-5)
        y = _ref.batch_norm(_ref.conv2d_nchw(np.maximum(y, 0), w2, padding=(1, 1, 1, 1)), *bn2, 1, 1e-5)
        return np.maximum(y + data, 0)

    return bb.get(), ref


def test_resnet_block_compiles_and_matches_numpy():
    mod, ref = resnet_block()
    ex = G.build(mod, "llvm")
    data = rng.standard_normal((1, 8, 8, 8)).astype("float32")
    np.testing.assert_allclose(G.Executor(ex)["main"](data).numpy(), ref(data), rtol=1e-4, atol=1e-4)


def test_resnet_block_with_bn_folded_fuses_into_two_kernels():
    from ingot.graph.transform import simplify_inference as st
    mod, ref = resnet_block()
    mod = G.transform.FoldConstant()(st.SimplifyInference()(mod))
    ex = G.build(mod, "llvm", layout="NCHW")  # NCHW: no layout conversions around the two kernels
    # conv+bias+relu and conv+bias+add+relu: the batch norms are gone.
    assert sorted(ex.kernels) == ["fused_conv2d_add_add_relu", "fused_conv2d_add_relu"]
    data = rng.standard_normal((1, 8, 8, 8)).astype("float32")
    np.testing.assert_allclose(G.Executor(ex)["main"](data).numpy(), ref(data), rtol=1e-4, atol=1e-4)


def transformer_layer(seq=8, d=16, heads=2, ff=32):
    dh = d // heads
    P = {k: (rng.standard_normal(s) * 0.2).astype("float32") for k, s in [
        ("wq", (d, d)), ("wk", (d, d)), ("wv", (d, d)), ("wo", (d, d)), ("bq", (d,)), ("bk", (d,)), ("bv", (d,)),
        ("bo", (d,)), ("w1", (ff, d)), ("b1", (ff,)), ("w2", (d, ff)), ("b2", (d,)), ("g1", (d,)), ("be1", (d,)),
        ("g2", (d,)), ("be2", (d,))]}
    x = G.Var("x", T((seq, d)))
    c = {k: G.const(v) for k, v in P.items()}
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            def heads_of(t):  # (seq, d) -> (heads, seq, dh)
                r = bb.emit(G.op.reshape(t, (seq, heads, dh)))
                return bb.emit(G.op.permute_dims(r, (1, 0, 2)))

            q = heads_of(bb.emit(G.op.linear(x, c["wq"], c["bq"])))
            k = heads_of(bb.emit(G.op.linear(x, c["wk"], c["bk"])))
            v = heads_of(bb.emit(G.op.linear(x, c["wv"], c["bv"])))
            kt = bb.emit(G.op.permute_dims(k, (0, 2, 1)))
            s = bb.emit(G.op.matmul(q, kt))
            s = bb.emit(G.op.multiply(s, G.const(np.float32(1 / math.sqrt(dh)))))
            p = bb.emit(G.op.softmax(s, axis=-1))
            o = bb.emit(G.op.matmul(p, v))
            o = bb.emit(G.op.permute_dims(o, (1, 0, 2)))
            o = bb.emit(G.op.reshape(o, (seq, d)))
            o = bb.emit(G.op.linear(o, c["wo"], c["bo"]))
            h = bb.emit(G.op.layer_norm(bb.emit(G.op.add(o, x)), c["g1"], c["be1"]))
            f = bb.emit(G.op.gelu(bb.emit(G.op.linear(h, c["w1"], c["b1"]))))
            f = bb.emit(G.op.linear(f, c["w2"], c["b2"]))
            gv = bb.emit_output(G.op.layer_norm(bb.emit(G.op.add(f, h)), c["g2"], c["be2"]))
        bb.emit_func_output(gv)

    def ref(data):
        def split(t):
            return t.reshape(seq, heads, dh).transpose(1, 0, 2)

        q, k, v = (split(data @ P[w].T + P[b]) for w, b in [("wq", "bq"), ("wk", "bk"), ("wv", "bv")])
        att = _ref.softmax(q @ k.transpose(0, 2, 1) / math.sqrt(dh), -1) @ v
        o = att.transpose(1, 0, 2).reshape(seq, d) @ P["wo"].T + P["bo"]
        h = _ref.layer_norm(o + data, P["g1"], P["be1"], (-1,), 1e-5)
        f = h @ P["w1"].T + P["b1"]
        f = 0.5 * f * (1 + np.vectorize(math.erf)(f / math.sqrt(2)))
        return _ref.layer_norm(f @ P["w2"].T + P["b2"] + h, P["g2"], P["be2"], (-1,), 1e-5)

    return bb.get(), ref


def test_transformer_encoder_layer_compiles_and_matches_numpy():
    mod, ref = transformer_layer()
    ex = G.build(mod, "llvm")
    assert "main" in ex.aot
    data = rng.standard_normal((8, 16)).astype("float32")
    for use_aot in (True, False):
        got = G.Executor(ex, ingot.cpu(), use_aot=use_aot)["main"](data).numpy()
        np.testing.assert_allclose(got, ref(data).astype("float32"), rtol=1e-4, atol=1e-4)
