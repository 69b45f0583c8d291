"""Shared pieces for the model-tuning tests: a tiny 2-kernel MLP (graph IR and ONNX), fast runner."""
import numpy as np
import pytest

TARGET = "llvm -num-cores=2"
N = 32  # hidden width: kernels small enough that each candidate builds and runs in well under a second


def fast_runner():
    from ingot.tune.runner import RunnerConfig

    return RunnerConfig(number=2, repeat=1, min_repeat_ms=0, timeout_s=30)


def mlp_params(seed=0):
    rng = np.random.default_rng(seed)
    return {f"w{i}": (rng.standard_normal((N, N)) / N).astype("float32") for i in range(3)}


def mlp_module():
    """x -> relu(linear) -> relu(linear) -> linear: kernels fused_linear_relu (2 calls) and linear (1)."""
    from ingot import graph as G

    x = G.Var("x", G.TensorStructInfo((1, N), "float32"))
    ws = [G.Var(f"w{i}", G.TensorStructInfo((N, N), "float32")) for i in range(3)]
    bb = G.BlockBuilder()
    with bb.function("main", [x] + ws):
        with bb.dataflow():
            h = x
            for w in ws[:2]:
                h = bb.emit(G.op.relu(bb.emit(G.op.linear(h, w))))
            out = bb.emit_output(G.op.linear(h, ws[2]))
        bb.emit_func_output(out)
    return bb.get()


def mlp_reference(x, params):
    h = np.maximum(x @ params["w0"].T, 0)
    h = np.maximum(h @ params["w1"].T, 0)
    return h @ params["w2"].T


def mlp_model():
    """The MLP as an `ingot.workflow.Model` (what ingot.load returns)."""
    from ingot.workflow.model import Model, TensorInfo

    return Model(mlp_module(), mlp_params(), [TensorInfo("x", (1, N), "float32")],
                 [TensorInfo("y", (1, N), "float32")], "mlp")


def write_mlp_onnx(path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    p = mlp_params()
    nodes = [helper.make_node("Gemm", ["x", "w0"], ["h0"], transB=1), helper.make_node("Relu", ["h0"], ["a0"]),
             helper.make_node("Gemm", ["a0", "w1"], ["h1"], transB=1), helper.make_node("Relu", ["h1"], ["a1"]),
             helper.make_node("Gemm", ["a1", "w2"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, N])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])],
                          [numpy_helper.from_array(p[k], k) for k in sorted(p)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return p
