"""Batch-1 classifier layers (GEMV) with cold caches, as they run inside a model (issue #7).

ResNet-50's fc (2048 -> 1000) and MobileNetV2's classifier (1280 -> 1000) are exported as
``MatMul(x, W[K, N]) + b``; N = 1000 fits no 16/32-wide panel. Three kernels per shape, each
compiled through the graph pipeline (FuseOps, PackWeights, ...) and timed by
``time_evaluator(..., cache_flush=True)`` (the weight flushed before every call, as in the model),
interleaved round by round, the fastest of all rounds kept (other processes only add time):

* ``matmul (gemm_rule)``: the [K, N] weight kept (PackWeights before 4f2baa8 did so);
* ``linear, 1 row``: ``linear(x, W.T)`` with `row_reduction_rule` (one output per task);
* ``linear, 4 rows``: today's default, `gemv_rule` with 4-row groups.

GB/s = weight bytes / time. ORT's fc inside ResNet-50: 0.30 ms (2 threads).

    python benchmarks/gemv.py [--rounds 20]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import load_average, markdown_table  # noqa: E402

SHAPES = {"resnet50 fc": (2048, 1000), "mobilenet_v2 classifier": (1280, 1000)}


def build(K: int, N: int, variant: str, W: np.ndarray, b: np.ndarray):
    """(library, kernel name) of ``x @ W + b`` compiled as ``variant``."""
    from ingot import graph as G
    from ingot.ir.transform import PassContext
    from ingot.ops.schedule import reduction as red
    from ingot.testing.mlp import matmul_add_module

    mod = matmul_add_module(W, b)
    policy = {"linear, 1 row": red.GemvPolicy(row_groups=()),
              "matmul (gemm_rule)": red.GemvPolicy(row_layout=False)}.get(variant)
    with PassContext(config={} if policy is None else {red.GEMV_POLICY_CONFIG: policy}):
        ex = G.build(mod, "llvm -num-cores=2")
    return ex.lib, next(iter(ex.kernels))


def main() -> None:
    from ingot.runtime import array, cpu

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    variants = ["matmul (gemm_rule)", "linear, 1 row", "linear, 4 rows"]
    print(f"load average before: {load_average()}")
    rows = []
    rng = np.random.default_rng(0)
    for label, (K, N) in SHAPES.items():
        W = rng.standard_normal((K, N)).astype("float32")
        b = rng.standard_normal(N).astype("float32")
        xs = rng.standard_normal((1, K)).astype("float32")
        kernels = {}
        for v in variants:
            lib, name = build(K, N, v, W, b)
            w_arg = W if v.startswith("matmul") else np.ascontiguousarray(W.T)
            call = [array(xs), array(w_arg), array(b), array(np.zeros((1, N), "float32"))]
            lib[name](*call)
            np.testing.assert_allclose(call[3].numpy(), xs @ W + b, rtol=1e-3, atol=1e-3)
            kernels[v] = (lib, name, call)
        for threads in (1, 2):
            best = {v: float("inf") for v in variants}
            for _ in range(args.rounds):
                for v, (lib, name, call) in kernels.items():
                    lib.set_num_threads(threads)
                    t = lib.time_evaluator(name, cpu(), number=1, repeat=10, cache_flush=True)(*call).results
                    best[v] = min(best[v], min(t))
            for v in variants:
                rows.append([label, threads, v, f"{best[v] * 1e6:.1f}", f"{K * N * 4 / best[v] / 1e9:.1f}"])
    print(markdown_table(["layer", "threads", "kernel", "µs (cold, min)", "GB/s"], rows))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
