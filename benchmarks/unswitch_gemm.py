"""BERT's dense GEMMs with run-time token rows, with and without UnswitchRuntimeGuards (#17).

Builds ``C[seq, batch, n] = A[seq, batch, k] @ W[k, n]`` with the default schedule three ways — rows
constant (the static twin), rows ``seq * batch`` at run time with the pass (default) and with
``tir.disable_unswitch`` — and times them interleaved in one process (``--repeat`` rounds of
``--number`` calls each; medians of process CPU time per call, robust on a shared host), at ``--rows``
(128: no tail tile; 125: a tail). Also checks each against numpy.

Usage:
    python benchmarks/unswitch_gemm.py --rows 128 --repeat 15
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# (K, N) of BERT-base's dense layers: QKV/out projection, FFN up, FFN down.
SHAPES = ((768, 768), (768, 3072), (3072, 768))


def build_dense(rows, k: int, n: int, target: str, unswitch: bool = True):
    """The default-scheduled, compiled token dense with ``rows`` (a tuple of ints or Vars).

    Example:
        >>> # lib = build_dense((Var("seq", "int64"), Var("batch", "int64")), 768, 768, "llvm")
    """
    import ingot
    from ingot import te
    from ingot.ir.transform import PassContext
    from ingot.ops.schedule.default import schedule_blocks
    from ingot.target import Target
    from ingot.tir.schedule import Schedule

    a = te.placeholder((*rows, k), name="A")
    w = te.placeholder((k, n), name="W")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((*rows, n), lambda *ix: te.sum(a[(*ix[:-1], r)] * w[r, ix[-1]], axis=r), name="C")
    sch = schedule_blocks(Schedule(te.create_prim_func([a, w, c])), Target(target))
    with PassContext(config={"tir.disable_unswitch": not unswitch}):
        return ingot.build(sch.mod, target)


def main() -> None:
    import numpy as np

    from ingot.ir.expr import Var

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--number", type=int, default=10)
    ap.add_argument("--target", default="llvm -num-cores=2")
    args = ap.parse_args()
    seq, batch = Var("seq", "int64"), Var("batch", "int64")
    rng = np.random.default_rng(0)
    for k, n in SHAPES:
        libs = {
            "static": build_dense((args.rows,), k, n, args.target),  # the constant export's flat tokens
            "dyn+unswitch": build_dense((seq, batch), k, n, args.target, unswitch=True),
            "dyn-guarded": build_dense((seq, batch), k, n, args.target, unswitch=False),
        }
        a = rng.standard_normal((args.rows, 1, k)).astype("float32")
        w = rng.standard_normal((k, n)).astype("float32")
        out = np.empty((args.rows, 1, n), "float32")
        cpu: dict = {name: [] for name in libs}
        shaped = {"static": (a.reshape(args.rows, k), out.reshape(args.rows, n))}
        for name, lib in libs.items():
            x, y = shaped.get(name, (a, out))
            y[:] = np.nan
            lib["main"](x, w, y)
            np.testing.assert_allclose(out, a @ w, rtol=1e-3, atol=1e-2, err_msg=name)
        for _ in range(args.repeat):
            for name, lib in libs.items():
                x, y = shaped.get(name, (a, out))
                c0 = time.process_time()
                for _ in range(args.number):
                    lib["main"](x, w, y)
                cpu[name].append((time.process_time() - c0) / args.number)
        med = {name: statistics.median(v) * 1e3 for name, v in cpu.items()}
        print(f"rows {args.rows} K {k:4d} N {n:4d}: " + "   ".join(f"{name} {t:7.3f} ms" for name, t in med.items())
              + f"   dyn+unswitch/static {med['dyn+unswitch'] / med['static']:.2f}x"
              + f"   dyn-guarded/static {med['dyn-guarded'] / med['static']:.2f}x")
    print(f"(CPU time per call, medians of {args.repeat} x {args.number}; {args.target!r})")


if __name__ == "__main__":
    main()
