"""In-model A/B of the small-map (7x7 stage) task splits in `ingot.ops.schedule.conv_nhwc`.

Compiles one ONNX model several times in one process, each with a setting of the module's
policies (``small_n_two_panel``, ``split_k``: the variants ``tp``, ``sk``; ``window_row_tasks``:
depthwise/window reductions with < 4 rows per core run row tasks, not (row, channel block) ones;
``two_panel_balanced``: two-panel 1x1s with an odd handful of tasks use one-panel tiles), then runs the packages interleaved (the order rotated every round) and reports
per kernel the minimum over rounds of each call site (`ingot.workflow.model.kernel_timed_main`).
``old2`` is a second compile of ``old`` (``new2``, ``tp2``, ``sk2`` likewise): its ratio is the noise
floor of the comparison.
Only conv kernels at maps <= 14x14 are listed, plus the sum of all kernels.

    python benchmarks/experiments/small_map_tasks.py /tmp/tm6/mobilenetv2.onnx --rounds 60
    python benchmarks/experiments/small_map_tasks.py /tmp/tm6/mobilenetv2.onnx --variants old,new --threads 1
    python benchmarks/experiments/small_map_tasks.py /tmp/tm6/mobilenetv2.onnx --rounds 120 --variants new,tp,sk,new2,sk2
    python benchmarks/experiments/small_map_tasks.py /tmp/tm6/resnet50.onnx --rounds 60 --variants sk,nopf,sk2
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # the repository root

from benchmarks.common import load_average, markdown_table  # noqa: E402

#: name -> the ConvNhwcPolicy it compiles with (``new``: helper D's default; ``sk``: the committed
#: default since the split-K change, with ``tp`` the default before it).
_OLD = dict(two_panel_balanced=False, window_row_tasks=False, small_n_two_panel=False, split_k=0, weight_prefetch=3)
_D = dict(_OLD, two_panel_balanced=True, window_row_tasks=True)  # helper D's committed switches
VARIANTS = {
    "old": _OLD,
    "old2": _OLD,
    "new": _D,
    "new2": _D,
    # 64-output 14x14 1x1s: 7 x 4-vector tile over both panels, rows parallel
    "tp": dict(_D, small_n_two_panel=True),
    "tp2": dict(_D, small_n_two_panel=True),
    # 7x7 sliced 1x1s with an odd oc-block count: split-K over 2 parts (rfactor), then one sum pass
    "sk": dict(_D, small_n_two_panel=True, split_k=2),
    "sk2": dict(_D, small_n_two_panel=True, split_k=2),
    "sk4": dict(_D, small_n_two_panel=True, split_k=4),
    # the current default without the next-slice weight prefetch of sliced "oc"-order 1x1s
    # (ResNet-50's 1024->256@14 and stride-2 1x1s)
    "nopf": dict(_D, small_n_two_panel=True, split_k=2, weight_prefetch=None),
}


def compile_variants(path: str, names: "list[str]", threads: int) -> dict:
    """{variant: Package}: the model compiled under each variant's `ConvNhwcPolicy` (its pass context)."""
    from ingot.ir.transform import PassContext
    from ingot.ops.schedule.conv_nhwc import POLICY_CONFIG, ConvNhwcPolicy
    from ingot.workflow import model as M

    model, out = M.load(path), {}
    for n in names:
        with PassContext(config={POLICY_CONFIG: ConvNhwcPolicy(**VARIANTS[n])}):
            out[n] = M.compile(model, f"llvm -num-cores={threads}")
    return out


def per_kernel_min(packages: dict, x: np.ndarray, rounds: int) -> dict:
    """{kernel: {variant: (calls, min µs per call)}}: each call site's minimum over ``rounds``
    interleaved runs (order rotated per round), averaged over the kernel's call sites."""
    from ingot.workflow import model as M

    samples: dict = {n: {} for n in packages}
    fns = {n: M.kernel_timed_main(p, lambda k, s, n=n: samples[n].setdefault(k, []).append(s))
           for n, p in packages.items()}
    for fn in fns.values():
        fn(x)  # warm-up (first touch of the workspace)
    for smp in samples.values():
        smp.clear()
    order = list(fns)
    for r in range(rounds):
        for n in order[r % len(order):] + order[:r % len(order)]:
            fns[n](x)
            time.sleep(0.002)  # let the other package's OpenMP threads go to sleep
    best: dict = {}
    for n, smp in samples.items():
        for k, times in smp.items():
            calls = len(times) // rounds
            sites = [min(times[i * calls + c] for i in range(rounds)) for c in range(calls)]
            best.setdefault(k, {})[n] = (calls, sum(sites) * 1e6 / calls)
    return best


def main(argv: "list | None" = None) -> int:
    """Command line (see the module docstring)."""
    from ingot.workflow import model as M
    from benchmarks.ort_layers import ingot_kernel_keys

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("onnx", help="ONNX model with a 1x3x224x224 input 'data'")
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--variants", default="old,old2,new", help=f"comma-separated, first is the base: {list(VARIANTS)}")
    args = p.parse_args(argv)
    names = args.variants.split(",")
    print(f"load average before: {load_average()}\n")
    packages = compile_variants(args.onnx, names, args.threads)
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    outs = {n: np.asarray(list(M.run(pk, {"data": x}).values())[0]) for n, pk in packages.items()}
    for n in names[1:]:
        err = float(np.abs(outs[n] - outs[names[0]]).max())
        if err > 1e-4:
            raise SystemExit(f"variant {n!r} differs from {names[0]!r} by {err:.2e}")
    best = per_kernel_min(packages, x, args.rounds)
    keys = ingot_kernel_keys(packages[names[0]])
    rows, total = [], {n: 0.0 for n in names}
    for k, d in best.items():
        if len(d) != len(names):
            continue
        for n in names:
            total[n] += d[n][0] * d[n][1]
        cat, sig = keys.get(k, ("", k))
        if cat == "conv" and getattr(sig, "oh", 99) <= 14:
            rows.append([sig.label(), d[names[0]][0]] + [f"{d[n][1]:.1f}" for n in names]
                        + [f"{d[n][1] / d[names[0]][1]:.3f}" for n in names[1:]])
    print(f"### {os.path.basename(args.onnx)}: per-kernel min of {args.rounds} interleaved runs, {args.threads} threads\n")
    print(markdown_table(["layer", "calls"] + [f"{n} µs" for n in names] + [f"{n}/{names[0]}" for n in names[1:]],
                         rows))
    print("\nsum of all kernels (µs per run): " + ", ".join(f"{n} {total[n]:.0f}" for n in names))
    print(f"\nload average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
