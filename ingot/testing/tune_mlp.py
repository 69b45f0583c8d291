"""The model-tuning tests' workload: a tiny 3-layer MLP (two fused ``linear + relu`` kernels and one
``linear``) as a graph module, an `ingot.workflow.Model` and an ONNX file, with its numpy reference
and a runner configuration fast enough for a test.

Note: the hidden width `N` is small so that each tuning candidate builds and runs in well under a
second; the tuning, resume, validation and cache-flush tests (tests/tune_model, tests/tune,
tests/workflow) and their subprocesses import this module instead of each defining the MLP again.

Example:
    >>> import numpy as np
    >>> from ingot.testing.tune_mlp import N, mlp_params, mlp_reference
    >>> mlp_reference(np.ones((1, N), "float32"), mlp_params()).shape
    (1, 32)
"""
from __future__ import annotations

import numpy as np

#: The target every model-tuning test compiles for (two cores: the parallel schedules are exercised).
TARGET = "llvm -num-cores=2"
#: Hidden width: kernels small enough that each candidate builds and runs in well under a second.
N = 32


def fast_runner():
    """A `RunnerConfig` that times each candidate twice, once, with no minimum repeat time.

    >>> fast_runner().number
    2
    """
    from ingot.tune.runner import RunnerConfig

    return RunnerConfig(number=2, repeat=1, min_repeat_ms=0, timeout_s=30)


def mlp_params(seed: int = 0) -> dict:
    """The three ``(N, N)`` float32 weights ``w0``, ``w1``, ``w2`` (seeded normal, scaled by 1/N).

    >>> sorted(mlp_params())
    ['w0', 'w1', 'w2']
    """
    rng = np.random.default_rng(seed)
    return {f"w{i}": (rng.standard_normal((N, N)) / N).astype("float32") for i in range(3)}


def mlp_module():
    """x -> relu(linear) -> relu(linear) -> linear as a graph `IRModule` (weights are parameters):
    kernels ``fused_linear_relu`` (2 calls) and ``linear`` (1).

    >>> [p.name_hint for p in mlp_module()["main"].params]
    ['x', 'w0', 'w1', 'w2']
    """
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


def mlp_reference(x: np.ndarray, params: dict) -> np.ndarray:
    """The MLP in numpy (what every compiled or tuned build is compared against).

    >>> mlp_reference(np.zeros((1, N), "float32"), mlp_params()).tolist() == [[0.0] * N]
    True
    """
    h = np.maximum(x @ params["w0"].T, 0)
    h = np.maximum(h @ params["w1"].T, 0)
    return h @ params["w2"].T


def mlp_model():
    """The MLP as an `ingot.workflow.Model` (what `ingot.load` returns), weights bound.

    >>> [t.name for t in mlp_model().inputs]
    ['x']
    """
    from ingot.workflow.model import Model, TensorInfo

    return Model(mlp_module(), mlp_params(), [TensorInfo("x", (1, N), "float32")],
                 [TensorInfo("y", (1, N), "float32")], "mlp")


def write_mlp_onnx(path) -> dict:
    """Write the MLP as an ONNX file (three ``Gemm`` with ``transB=1``, two ``Relu``; opset 17) and
    return its weights. Needs the ``onnx`` package (``pip install onnx``).

    >>> import os, tempfile
    >>> sorted(write_mlp_onnx(os.path.join(tempfile.mkdtemp(), "mlp.onnx")))
    ['w0', 'w1', 'w2']
    """
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as err:
        raise ImportError("write_mlp_onnx needs the onnx package: pip install onnx") from err

    p = mlp_params()
    nodes = [helper.make_node("Gemm", ["x", "w0"], ["h0"], transB=1), helper.make_node("Relu", ["h0"], ["a0"]),
             helper.make_node("Gemm", ["a0", "w1"], ["h1"], transB=1), helper.make_node("Relu", ["h1"], ["a1"]),
             helper.make_node("Gemm", ["a1", "w2"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, N])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])],
                          [numpy_helper.from_array(p[k], k) for k in sorted(p)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return p
