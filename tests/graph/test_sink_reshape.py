"""SinkReshape: reshapes keeping the last dimension move below elementwise calls; the numbers are
unchanged (compared with numpy) and a GEMM then fuses with its bias add."""
from __future__ import annotations

import numpy as np

import ingot
from ingot import graph as G
from ingot.graph.transform import DeadCodeElimination, FuseOps, SinkReshape

rng = np.random.default_rng(0)
W = rng.standard_normal((16, 48)).astype("float32")
B = rng.standard_normal(48).astype("float32")


def _ffn():
    """matmul -> reshape [1, 8, 48] -> bias add -> x * erf(x * c) -> reshape back -> doubled."""
    x = G.Var("x", G.TensorStructInfo((8, 16), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            m = bb.emit(G.op.matmul(x, G.const(W)))
            r = bb.emit(G.op.reshape(m, (1, 8, 48)))
            a = bb.emit(G.op.add(G.const(B.reshape(1, 1, 48)), r))
            e = bb.emit(G.op.erf(bb.emit(G.op.multiply(a, G.const(np.array(0.5, "float32"))))))
            g = bb.emit(G.op.multiply(a, e))
            back = bb.emit(G.op.reshape(g, (8, 48)))
            gv = bb.emit_output(G.op.add(back, back))
        bb.emit_func_output(gv)
    return bb.get()


def _names(mod) -> list:
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
            if hasattr(getattr(b.value, "op", None), "name")]


def test_reshapes_sink_and_cancel():
    mod = DeadCodeElimination()(SinkReshape()(_ffn()))
    # the reshape to [1, 8, 48] and back to [8, 48] cancel: no reshape is left
    assert _names(mod) == ["matmul", "add", "multiply", "erf", "multiply", "add"]
    fused = FuseOps()(mod)
    assert any(n.startswith("fused_matmul_add") for n in fused.functions)


def test_numbers_unchanged_vs_numpy():
    from scipy.special import erf

    x = rng.standard_normal((8, 16)).astype("float32")
    mod = DeadCodeElimination()(SinkReshape()(_ffn()))
    out = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](x).numpy()
    a = x @ W + B
    np.testing.assert_allclose(out, 2 * a * erf(a * 0.5), rtol=1e-5, atol=1e-5)


def test_reshape_changing_last_dim_or_mixed_shapes_is_kept():
    x = G.Var("x", G.TensorStructInfo((8, 48), "float32"))
    y = G.Var("y", G.TensorStructInfo((1, 8, 3, 16), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            r = bb.emit(G.op.reshape(x, (1, 8, 3, 16)))            # last dim 48 -> 16: not sunk
            a = bb.emit(G.op.add(r, G.const(np.ones(16, "float32"))))
            r2 = bb.emit(G.op.reshape(x, (1, 8, 48)))
            t = bb.emit(G.op.add(r2, G.const(np.ones((8, 48), "float32"))))  # full-shape constant: kept
            gv = bb.emit_output(G.op.add(a, y))
        bb.emit_func_output(G.Tuple([gv, t]))
    mod = SinkReshape()(bb.get())
    assert _names(mod) == ["reshape", "add", "reshape", "add", "add"]
