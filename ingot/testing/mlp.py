"""The 784-128-10 MLP graph (batch 1 by default) shared by the graph tests and
``benchmarks/mlp.py``: its parameters, the graph module and a numpy reference.

Example:
    >>> params = mlp_params()
    >>> mod = mlp_module(1, params)
    >>> mlp_reference(np.zeros((1, 784), "float32"), params).shape
    (1, 10)
"""
from __future__ import annotations

import numpy as np

__all__ = ["MLP_SHAPES", "mlp_params", "mlp_module", "mlp_reference", "matmul_add_module"]

MLP_SHAPES = (("w0", (128, 784)), ("b0", (128,)), ("w1", (10, 128)), ("b1", (10,)))


def mlp_params(seed: int = 0, scale: float = 0.05) -> dict:
    """Random float32 weights of the MLP (normal, times ``scale``), by parameter name.

    Example:
        >>> mlp_params()["w0"].shape
        (128, 784)
    """
    rng = np.random.default_rng(seed)
    return {k: (rng.standard_normal(s) * scale).astype("float32") for k, s in MLP_SHAPES}


def mlp_module(batch=1, params: "dict | None" = None):
    """The graph ``main(x, w0, b0, w1, b1)``: x ``(batch, 784)`` → linear → relu → linear → ``(batch, 10)``;
    ``batch`` an int or a symbolic dim; with ``params`` the weights are bound as constants.

    Example:
        >>> mod = mlp_module(1, mlp_params())   # main(x) with the weights bound
    """
    from ingot import graph as G

    x = G.Var("x", G.TensorStructInfo((batch, 784), "float32"))
    ws = [G.Var(k, G.TensorStructInfo(s, "float32")) for k, s in MLP_SHAPES]
    bb = G.BlockBuilder()
    with bb.function("main", [x, *ws]):
        with bb.dataflow():
            lv0 = bb.emit(G.op.linear(x, ws[0], ws[1]))
            lv1 = bb.emit(G.op.relu(lv0))
            out = bb.emit_output(G.op.linear(lv1, ws[2], ws[3]))
        bb.emit_func_output(out)
    mod = bb.get()
    return mod if params is None else G.transform.BindParams("main", params)(mod)


def matmul_add_module(w: np.ndarray, b: np.ndarray, batch: int = 1):
    """The graph ``main(x) = x @ w + b`` (``x`` ``(batch, K)``, ``w`` ``(K, N)``, ``b`` ``(N,)``, both bound
    as constants): one classifier layer as ONNX MatMul + Add give it, the GEMV / PackWeights workload.

    Example:
        >>> mod = matmul_add_module(np.zeros((8, 4), "float32"), np.zeros(4, "float32"))
        >>> [bd.value.op.name for bd in mod["main"].body.blocks[0].bindings]
        ['matmul', 'add']
    """
    from ingot import graph as G

    (k, n), dtype = w.shape, str(w.dtype)
    x = G.Var("x", G.TensorStructInfo((batch, k), dtype))
    wv, bv = G.Var("w", G.TensorStructInfo((k, n), dtype)), G.Var("b", G.TensorStructInfo((n,), dtype))
    bb = G.BlockBuilder()
    with bb.function("main", [x, wv, bv]):
        with bb.dataflow():
            out = bb.emit_output(G.op.add(bb.emit(G.op.matmul(x, wv)), bv))
        bb.emit_func_output(out)
    return G.transform.BindParams("main", {"w": w, "b": b})(bb.get())


def mlp_reference(x: np.ndarray, params: dict) -> np.ndarray:
    """The MLP in numpy (the tests' reference).

    Example:
        >>> mlp_reference(np.zeros((2, 784), "float32"), mlp_params()).shape
        (2, 10)
    """
    return np.maximum(x @ params["w0"].T + params["b0"], 0) @ params["w1"].T + params["b1"]
