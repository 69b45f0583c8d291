"""The unscheduled (naive triple-loop) matmul that TE/TVMScript produce, built by Ingot, beside numpy.

This is the baseline that schedules improve on (see benchmarks/gemm.py for the scheduled one):
the naive loop order strides through B column-wise, so it is far below numpy/OpenBLAS.

Usage:
    python benchmarks/experiments/matmul_naive.py [--sizes 128 256 512]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # the repository root

import ingot  # noqa: E402
from benchmarks.common import banner, ingot_median_seconds, load_average, markdown_table, median_seconds  # noqa: E402
from ingot import te  # noqa: E402


def naive_matmul(n: int):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return ingot.build(te.create_prim_func([A, B, C]), target="llvm")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512])
    args = parser.parse_args()
    banner("naive matmul (unscheduled), float32")
    rows = []
    for n in args.sizes:
        rng = np.random.default_rng(0)
        a = rng.random((n, n), dtype=np.float32)
        b = rng.random((n, n), dtype=np.float32)
        c = np.empty((n, n), np.float32)
        lib = naive_matmul(n)
        lib["main"](a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4)
        t_ingot = ingot_median_seconds(lib, "main", [a, b, c], repeat=5)
        t_numpy = median_seconds(lambda a=a, b=b, c=c: np.matmul(a, b, out=c), repeat=5)
        flops = 2.0 * n**3
        rows.append([n, f"{flops / t_ingot / 1e9:.1f}", f"{flops / t_numpy / 1e9:.1f}", f"{t_numpy / t_ingot:.3f}x"])
    print(markdown_table(["n", "Ingot naive GFLOP/s", "numpy GFLOP/s", "Ingot / numpy speed"], rows))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
