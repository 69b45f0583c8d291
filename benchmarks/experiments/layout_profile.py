"""Where the layout conversions are: ResNet-50 and MobileNetV2 compiled with the default CPU
pipeline (NHWC, ``layout="auto"``) and with ``layout="NCHW"``, per-kernel profiles side by side.

For each model and layout: the number of ``permute_dims`` kernels in the built plan (the NHWC
build should have one, at the input; the global-pool boundary is a reshape) and their time, the
total kernel time (median of ``--repeat`` runs, ``--threads`` threads (2), ``ingot.profile``), the output checked
against ONNX Runtime, then the ``--top`` heaviest kernels. Prints Markdown and the load average.

    python benchmarks/experiments/layout_profile.py [--models resnet50,mobilenet_v2] [--repeat 10] [--top 8]
    python benchmarks/experiments/layout_profile.py --smoke    # tiny versions: checks the script, measures nothing
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # the repository root

from benchmarks.common import load_average  # noqa: E402
from benchmarks.models import build_models  # noqa: E402


def _permute_calls(package) -> int:
    steps = package.executable.plans["main"]["steps"]
    return sum(s.get("func", "").count("permute_dims") for s in steps if s.get("op") == "call_tir")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,mobilenet_v2")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2, help="OpenMP threads (and the target's -num-cores)")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import onnxruntime as ort
    import torch

    import ingot

    print(f"load average before: {load_average()}; {args.threads} thread(s)\n")
    for name, (module, x) in build_models(args.models.split(","), args.smoke, 1).items():
        buf = io.BytesIO()
        torch.onnx.export(module, (torch.from_numpy(x),), buf, input_names=["data"], dynamo=False, opset_version=17)
        ref = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"]).run(None, {"data": x})[0]
        model = ingot.load(buf.getvalue())
        rows, profiles, calls = [], {}, {}
        for layout in ("auto", "NCHW"):
            t0 = time.perf_counter()
            package = ingot.compile(model, f"llvm -num-cores={args.threads}", layout=layout)
            compile_s = time.perf_counter() - t0
            (y,) = ingot.run(package, {"data": x}).values()
            err = float(np.abs(y - ref).max() / max(np.abs(ref).max(), 1e-30))
            prof = ingot.profile(package, {"data": x}, repeat=1 if args.smoke else args.repeat)
            perm_ms = sum(k.ms for k in prof.kernels if "permute_dims" in k.name)
            rows.append([layout, _permute_calls(package), perm_ms, prof.total_ms, compile_s, err])
            profiles[layout] = prof
            calls[layout] = package.executor()["main"]
        # End to end (AOT entry): both layouts interleaved, minimum over the repetitions (robust
        # to the other processes on a shared machine).
        best = {layout: float("inf") for layout in calls}
        for _ in range(1 if args.smoke else 3 * args.repeat):
            for layout, fn in calls.items():
                t0 = time.perf_counter()
                fn(x)
                best[layout] = min(best[layout], time.perf_counter() - t0)
        print(f"### {name}\n")
        print("| layout | permute kernels | permute ms | kernels total ms (median) | end to end ms (min) | compile s "
              "| max rel err vs ORT |")
        print("|---|---|---|---|---|---|---|")
        for layout, n, pm, tot, cs, err in rows:
            print(f"| {layout} | {n} | {pm:.3f} | {tot:.2f} | {best[layout] * 1e3:.2f} | {cs:.1f} | {err:.1e} |")
        for layout, prof in profiles.items():
            print(f"\n{name}, layout={layout}: top {args.top} kernels\n")
            print("| kernel | calls | ms | % |\n|---|---|---|---|")
            for k in prof.kernels[:args.top]:
                print(f"| {k.name} | {k.calls} | {k.ms:.3f} | {k.percent:.1f} |")
        print()
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
