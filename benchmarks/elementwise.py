"""Elementwise kernels built by Ingot beside numpy on the same data.

Three kernels on 2^22 float32 elements: ``c = a + b``, ``c = a * b + 1``, ``c = exp(a)``; each built
unscheduled (a plain loop, vectorized by gcc at -O3) and with a schedule (split by 16, vectorize the
inner loop, parallelize the outer loop), timed beside numpy's ufuncs writing into a preallocated
output.

Usage:
    python benchmarks/elementwise.py [--threads 2]
"""
from __future__ import annotations

import argparse

import numpy as np

import ingot
from ingot import te

from common import banner, ingot_median_seconds, load_average, markdown_table, median_seconds

N = 1 << 22


def build(kernel: str, scheduled: bool, threads: int):
    A = te.placeholder((N,), name="A")
    B = te.placeholder((N,), name="B")
    body = {
        "add": lambda i: A[i] + B[i],
        "mul_add": lambda i: A[i] * B[i] + 1.0,
        "exp": lambda i: te.exp(A[i]),
    }[kernel]
    C = te.compute((N,), body, name="C")
    func = te.create_prim_func([A, B, C])
    if scheduled:
        sch = ingot.tir.Schedule(func)
        (i,) = sch.get_loops(sch.get_block("C"))
        outer, inner = sch.split(i, factors=[None, 16])
        sch.vectorize(inner)
        sch.parallel(outer)
        func = sch.mod
    return ingot.build(func, target=f"llvm -num-cores={threads}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    banner(f"elementwise, {N} float32 elements, {args.threads} thread(s)")
    rng = np.random.default_rng(0)
    a = rng.random(N, dtype=np.float32)
    b = rng.random(N, dtype=np.float32)
    c = np.empty_like(a)
    numpy_impl = {
        "add": lambda: np.add(a, b, out=c),
        "mul_add": lambda: np.add(np.multiply(a, b, out=c), 1.0, out=c),
        "exp": lambda: np.exp(a, out=c),
    }
    rows = []
    for kernel, ref in numpy_impl.items():
        t_numpy = median_seconds(ref)
        for scheduled in (False, True):
            lib = build(kernel, scheduled, args.threads)
            t_ingot = ingot_median_seconds(lib, "main", [a, b, c])
            label = "split+vectorize+parallel" if scheduled else "unscheduled"
            rows.append([kernel, label, f"{t_ingot * 1e6:.0f}", f"{t_numpy * 1e6:.0f}", f"{t_numpy / t_ingot:.2f}x"])
    print(markdown_table(["kernel", "Ingot schedule", "Ingot (µs)", "numpy (µs)", "speed-up vs numpy"], rows))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
