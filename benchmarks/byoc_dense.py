"""One dense layer (``x @ W.T + b``) or batch matmul on the cblas BYOC backend vs Ingot's own kernel vs numpy, 1 thread.

A shape ``MxKxN`` is a dense layer with constant W ``(N, K)`` and bias; ``BxMxKxN`` is a batch matmul
of two inputs ``(B, M, K) @ (B, K, N)`` (attention's products). The defaults are the GEMMs of BERT-base
at sequence length 128 and two single-row (batch 1) dense layers. Each variant is compiled for ``llvm -num-cores=1`` with the BLAS set to 1 thread; the calls are
interleaved (A, B, C, A, B, C, ...) and each is timed with ``time.thread_time`` (CPU time of the
calling thread: everything runs in it at 1 thread), the minimum over the rounds is reported.

    python benchmarks/byoc_dense.py [--rounds 200] [--shapes 128x768x768,12x128x64x128]

Example:
    >>> parse_shapes("1x2048x1000,12x128x64x128")
    [(1, 2048, 1000), (12, 128, 64, 128)]
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def parse_shapes(text: str) -> list:
    """``"MxKxN,..."`` → ``[(M, K, N), ...]``."""
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",") if s]


def dense_module(m: int, k: int, n: int, seed: int = 0):
    """``main(x) = x @ W.T + b`` with constant W ``(n, k)`` and b ``(n,)``."""
    from ingot import graph as G

    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, k)).astype("float32")
    b = rng.standard_normal((n,)).astype("float32")
    x = G.Var("x", G.TensorStructInfo((m, k), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(G.op.linear(x, G.const(w), G.const(b))))
    return bb.get(), w, b


def batch_matmul_module(b: int, m: int, k: int, n: int):
    """``main(a, c) = a @ c`` for ``a (b, m, k)``, ``c (b, k, n)``."""
    from ingot import graph as G

    a = G.Var("a", G.TensorStructInfo((b, m, k), "float32"))
    c = G.Var("c", G.TensorStructInfo((b, k, n), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [a, c]):
        bb.emit_func_output(bb.emit(G.op.matmul(a, c)))
    return bb.get()


def measure(shape: tuple, rounds: int) -> dict:
    import ingot.byoc
    from ingot import graph as G
    from ingot.byoc import cblas

    cblas.set_num_threads(1)
    target = "llvm -num-cores=1"
    rng = np.random.default_rng(1)
    if len(shape) == 3:
        m, k, n = shape
        mod, w, b = dense_module(m, k, n)
        args = [rng.standard_normal((m, k)).astype("float32")]
        reference = lambda: args[0] @ w.T + b  # noqa: E731
    else:
        bsz, m, k, n = shape
        mod = batch_matmul_module(bsz, m, k, n)
        args = [rng.standard_normal((bsz, m, k)).astype("float32"), rng.standard_normal((bsz, k, n)).astype("float32")]
        reference = lambda: args[0] @ args[1]  # noqa: E731
    native = G.Executor(G.build(mod, target))["main"]
    offload = G.Executor(G.build(ingot.byoc.partition(mod, ["cblas"]), target))["main"]
    ref = reference()
    for fn in (native, offload):
        np.testing.assert_allclose(fn(*args).numpy(), ref, rtol=1e-3, atol=1e-3)
    variants = {"ingot": lambda: native(*args), "cblas": lambda: offload(*args), "numpy": reference}
    best = {name: float("inf") for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            t0 = time.thread_time()
            fn()
            best[name] = min(best[name], time.thread_time() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--shapes", default="1x2048x1000,1x768x3072,128x768x768,128x768x3072,128x3072x768,"
                                        "12x128x64x128,12x128x128x64")
    args = ap.parse_args()
    print(f"{'[B x] M x K x N':>18} {'ingot us':>10} {'cblas us':>10} {'numpy us':>10} {'ingot/cblas':>12}")
    for shape in parse_shapes(args.shapes):
        r = measure(shape, args.rounds)
        print(f"{'x'.join(map(str, shape)):>18} {r['ingot'] * 1e6:10.1f} {r['cblas'] * 1e6:10.1f} "
              f"{r['numpy'] * 1e6:10.1f} {r['ingot'] / r['cblas']:12.2f}")


if __name__ == "__main__":
    main()
