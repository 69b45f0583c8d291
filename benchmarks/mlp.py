"""784-128-10 MLP (batch 1) latency: Ingot AOT entry, Ingot plan interpreter, 1-op graph overhead,
numpy and PyTorch (2 threads each), medians, printed as a Markdown table.

Run: ``python benchmarks/mlp.py`` (a quiet machine: it prints the load average first).
ONNX Runtime runs this MLP in about 6 µs on the project machine (DESIGN.md).

The graph itself (`mlp_module`, `mlp_params`, `mlp_reference`) lives in `ingot.testing.mlp`, shared
with the graph tests (tests/graph/test_executor_aot.py, test_graph_build.py).

Example:
    $ python benchmarks/mlp.py
"""
from __future__ import annotations

import os
import sys
import warnings

if __name__ == "__main__":  # before numpy loads its BLAS
    os.environ.setdefault("OMP_NUM_THREADS", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks.common import banner, load_average, markdown_table, median_seconds  # noqa: E402
from ingot.testing.mlp import mlp_module, mlp_params  # noqa: E402


def build_mlp(target: str):
    """The MLP's parameters and the compiled executable (batch 1, weights bound).

    Example:
        >>> params, ex = build_mlp("llvm -num-cores=2")   # doctest: +SKIP
    """
    from ingot import graph as G

    params = mlp_params()
    return params, G.build(mlp_module(1, params), target)


def build_one_op(target: str):
    """A graph of one relu on (1, 10): measures the executor's per-call overhead."""
    from ingot import graph as G

    x = G.Var("x", G.TensorStructInfo((1, 10), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(G.op.relu(x)))
    return G.build(bb.get(), target)


def main() -> None:
    import ingot
    from ingot import graph as G

    warnings.simplefilter("ignore", RuntimeWarning)
    banner("784-128-10 MLP, batch 1")
    print(f"load average: {load_average()}")
    target = "llvm -num-cores=2"
    params, ex = build_mlp(target)
    data = np.random.default_rng(1).standard_normal((1, 784)).astype("float32")
    aot = G.Executor(ex, ingot.cpu())["main"]
    interp = G.Executor(ex, ingot.cpu(), use_aot=False)["main"]
    one = G.Executor(build_one_op(target), ingot.cpu())["main"]
    small = np.zeros((1, 10), "float32")
    w0t, b0, w1t, b1 = params["w0"].T.copy(), params["b0"], params["w1"].T.copy(), params["b1"]

    def numpy_mlp():
        return np.maximum(data @ w0t + b0, 0) @ w1t + b1

    rows = []
    t_np = median_seconds(numpy_mlp)
    results = [("Ingot AOT (one C call)", median_seconds(lambda: aot(data))),
               ("Ingot plan interpreter", median_seconds(lambda: interp(data))),
               ("Ingot 1-op graph (overhead)", median_seconds(lambda: one(small))),
               ("numpy", t_np)]
    try:
        import torch

        torch.set_num_threads(2)
        model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
        with torch.no_grad():
            model[0].weight.copy_(torch.from_numpy(params["w0"]))
            model[0].bias.copy_(torch.from_numpy(params["b0"]))
            model[2].weight.copy_(torch.from_numpy(params["w1"]))
            model[2].bias.copy_(torch.from_numpy(params["b1"]))
        tx = torch.from_numpy(data)

        def torch_mlp():
            with torch.inference_mode():
                return model(tx)

        results.append(("PyTorch", median_seconds(torch_mlp)))
    except ImportError:
        results.append(("PyTorch (not installed)", float("nan")))
    np.testing.assert_allclose(aot(data).numpy(), numpy_mlp(), rtol=1e-4, atol=1e-4)
    for name, t in results:
        rows.append([name, f"{t * 1e6:.1f}", f"{t / t_np:.2f}" if t == t else "-"])
    print(markdown_table(["implementation", "median µs", "vs numpy"], rows))
    print(f"kernels: {ex.schedule_report}; workspace: {ex.stats()['main']['workspace_bytes']} bytes")


if __name__ == "__main__":
    main()
