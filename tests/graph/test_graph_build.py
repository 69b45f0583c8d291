"""Compiled graph modules vs numpy: legalized ops, fusion, the MLP with a symbolic batch, mixed modules."""
import numpy as np
import pytest


import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.graph.op import _ref  # noqa: E402
from ingot.ir import Var as PVar  # noqa: E402

from ingot.testing.mlp import mlp_module, mlp_params, mlp_reference  # noqa: E402  (the benchmark's MLP graph)

rng = np.random.default_rng(0)


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


def _run(mod, *args, pipeline="default"):
    vm = G.Executor(G.build(mod, "llvm", pipeline=pipeline), ingot.cpu())
    out = vm["main"](*args)
    return tuple(o.numpy() for o in out) if isinstance(out, tuple) else out.numpy()


def test_many_ops_vs_numpy_in_one_module():
    x = rng.standard_normal((2, 4, 6, 6)).astype("float32")
    w = rng.standard_normal((4, 2, 3, 3)).astype("float32")
    m = rng.standard_normal((3, 8)).astype("float32")
    v = rng.standard_normal((8,)).astype("float32")
    c = rng.standard_normal((4,)).astype("float32")
    var = np.abs(c) + 0.5
    xv, wv, mv, vv, cv, varv = (G.Var(n, T(a.shape)) for n, a in
                                zip(["x", "w", "m", "v", "c", "var"], [x, w, m, v, c, var]))
    calls = [
        (G.op.conv2d(xv, wv, strides=1, padding=1, groups=2), _ref.conv2d_nchw(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 2)),
        (G.op.max_pool2d(xv, 3, 2, 1), _ref.pool2d_nchw(x, "max", (3, 3), (2, 2), (1, 1, 1, 1))),
        (G.op.avg_pool2d(xv, 2, 2, 1), _ref.pool2d_nchw(x, "avg", (2, 2), (2, 2), (1, 1, 1, 1))),
        (G.op.global_avg_pool2d(xv), x.mean(axis=(2, 3), keepdims=True)),
        (G.op.batch_norm(xv, cv, cv, cv, varv), _ref.batch_norm(x, c, c, c, var, 1, 1e-5)),
        (G.op.softmax(mv), _ref.softmax(m)),
        (G.op.log_softmax(mv, axis=0), _ref.log_softmax(m, 0)),
        (G.op.layer_norm(mv, vv, vv), _ref.layer_norm(m, v, v, (-1,), 1e-5)),
        (G.op.gelu(mv), 0.5 * m * (1 + np.vectorize(__import__("math").erf)(m / np.sqrt(2)))),
        (G.op.sigmoid(mv), 1 / (1 + np.exp(-m))),
        (G.op.tanh(mv), np.tanh(m)),
        (G.op.divide(mv, vv), m / v),
        (G.op.maximum(mv, 0.5), np.maximum(m, 0.5)),
        (G.op.mean(mv, axis=1), m.mean(axis=1)),
        (G.op.max(mv, axis=0, keepdims=True), m.max(axis=0, keepdims=True)),
        (G.op.permute_dims(xv, (0, 2, 3, 1)), x.transpose(0, 2, 3, 1)),
        (G.op.reshape(mv, (4, 6)), m.reshape(4, 6)),
        (G.op.concat([mv, mv], axis=0), np.concatenate([m, m], 0)),
        (G.op.matmul(mv, G.op.permute_dims(mv)), m @ m.T),
        (G.op.strided_slice(mv, [1], [3]), m[1:3]),
    ]
    bb = G.BlockBuilder()
    with bb.function("main", [xv, wv, mv, vv, cv, varv]):
        with bb.dataflow():
            outs = []
            for call, _ in calls:
                # Nested calls (matmul of permute_dims) are normalized by emitting the inner first.
                if any(isinstance(a, G.Call) for a in call.args):
                    args = [bb.emit(a) if isinstance(a, G.Call) else a for a in call.args]
                    call = G.Call(call.op, args, call.attrs, call.sinfo_args, call.struct_info)
                outs.append(bb.emit(call))
            gv = bb.emit_output(G.Tuple(outs))
        bb.emit_func_output(gv)
    results = _run(bb.get(), x, w, m, v, c, var)
    for (call, expected), got in zip(calls, results):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=str(call.op))


def test_mlp_symbolic_batch_end_to_end():
    params = mlp_params(seed=2, scale=0.1)
    mod = mlp_module(PVar("n", "int64"), params)
    ex = G.build(mod, "llvm")
    assert "fused_linear_relu" in ex.mod.functions
    vm = G.Executor(ex, ingot.cpu())
    for batch in (1, 5):
        data = rng.standard_normal((batch, 784)).astype("float32")
        np.testing.assert_allclose(vm["main"](data).numpy(), mlp_reference(data, params), rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception, match="x"):
        vm["main"](np.zeros((2, 10), "float32"))


def test_mixed_module_emit_te_and_packed_function():
    from ingot import ops

    @ingot.register_func("test_graph.env_relu", override=True)
    def env_relu(x, out):
        np.maximum(x.numpy(), 0, out=out.numpy())

    x = G.Var("x", T((3, 4)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit_te(ops.elemwise.exp, x)
            lv1 = bb.emit(G.op.call_dps_packed("test_graph.env_relu", [lv0], T((3, 4))))
            gv = bb.emit_output(G.op.add(lv1, x))
        bb.emit_func_output(gv)
    data = rng.standard_normal((3, 4)).astype("float32")
    np.testing.assert_allclose(_run(bb.get(), data), np.maximum(np.exp(data), 0) + data, rtol=1e-5)


def test_build_parses_the_target_string_once(monkeypatch):
    """`graph.build` parses ``target`` at its entry and passes the `Target` down (issue #20): the
    layout pass, weight packing, default schedules, the kernel cache and the C assembly reuse it."""
    from ingot.target import Target

    parsed = []
    from_string = Target._from_string.__func__
    monkeypatch.setattr(Target, "_from_string",
                        classmethod(lambda cls, text: parsed.append(text) or from_string(cls, text)))
    x = G.Var("x", T((1, 8, 6, 6)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(G.op.conv2d(x, G.const(rng.standard_normal((8, 8, 3, 3)).astype("float32")), padding=1))
            gv = bb.emit_output(bb.emit(G.op.relu(y)))
        bb.emit_func_output(gv)
    G.build(bb.get(), "llvm -num-cores=2")
    assert parsed == ["llvm -num-cores=2"]
