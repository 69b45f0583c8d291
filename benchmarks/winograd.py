"""Winograd F(m, 3) against the direct NHWC conv: ResNet-50's 3x3 stride-1 layers alone, and the whole
model with each tile policy (batch 1, 2 threads).

``--layers``: each 3x3 stride-1 layer of ResNet-50 (with its bias + relu epilogue, as fused in the
model) as the direct packed-weight conv, F(2, 3) and F(4, 3), each under its default schedule, checked
against PyTorch, timed warm by ``time_evaluator`` interleaved round by round (fastest kept).

``--model``: ResNet-50 compiled with Winograd off (``graph.winograd``), with the default tile policy
(`ingot.ops.winograd.choose_tile`), the default policy with the tile-row schedule off (every layer
stage by stage: `ingot.ops.schedule.winograd` module note) and the other policies tried when it was
chosen, timed interleaved with ONNX Runtime in one process. Inside the model the weights come from L3/DRAM and the
transforms' buffers are cold, so the ranking differs from the layers alone (docs/performance.md).

    python benchmarks/winograd.py --layers [--rounds 15]
    python benchmarks/winograd.py --model [--rounds 6]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import load_average, markdown_table  # noqa: E402

TARGET = "llvm -num-cores=2"
#: ResNet-50's 3x3 stride-1 layers: (output size, channels).
LAYERS = [(56, 64), (28, 128), (14, 256), (7, 512)]


def _layer_kernels(hw: int, c: int) -> dict:
    """``{name: (PrimFunc, weight array)}`` of relu(conv(x, w) + b) for the direct conv and each tile."""
    from ingot import ops, te
    from ingot.ops import packed
    from ingot.ops import winograd as W

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((3, 3, c, c)) * 0.05).astype("float32")
    x, b = te.placeholder((1, hw, hw, c), name="x"), te.placeholder((c,), name="b")
    kernels = {}
    wp = packed.pack_conv2d_nhwc_weight(w, 32)
    wt = te.placeholder(wp.shape, name="w")
    y = ops.relu(ops.add(packed.conv2d_nhwc_packed_weight(x, wt, strides=1, padding=1), b))
    kernels["direct"] = (te.create_prim_func([x, wt, b, y]), wp)
    for m in (2, 4):
        u = W.transform_weight(w, m, 32)
        ut = te.placeholder(u.shape, name="u")
        y = ops.relu(ops.add(W.conv2d_nhwc_winograd(x, ut, padding=1), b))
        kernels[f"F({m},3)"] = (te.create_prim_func([x, ut, b, y]), u)
    return w, kernels


def run_layers(rounds: int) -> str:
    """The per-layer table (µs, GFLOP/s of the direct conv's FLOP count, relative error vs PyTorch)."""
    import torch

    import ingot
    from ingot.ops.schedule import default_schedule

    rows = []
    for hw, c in LAYERS:
        w, kernels = _layer_kernels(hw, c)
        rng = np.random.default_rng(1)
        x, b = rng.standard_normal((1, hw, hw, c)).astype("float32"), rng.standard_normal(c).astype("float32")
        with torch.no_grad():
            ref = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(x).permute(0, 3, 1, 2),
                                                        torch.from_numpy(w).permute(3, 2, 0, 1), torch.from_numpy(b),
                                                        padding=1)).permute(0, 2, 3, 1).numpy()
        timers, errors = {}, {}
        for name, (func, weight) in kernels.items():
            lib = ingot.build(default_schedule(func, TARGET), TARGET)
            out = np.zeros(ref.shape, "float32")
            lib["main"](x, weight, b, out)
            errors[name] = float(np.abs(out - ref).max() / np.abs(ref).max())
            timers[name] = (lib.time_evaluator("main", ingot.cpu(), number=20), (x, weight, b, out))
        best = {name: float("inf") for name in timers}
        for _ in range(rounds):
            for name, (f, args) in timers.items():
                best[name] = min(best[name], f(*args).mean)
        flop = 2 * hw * hw * c * c * 9
        rows.append([f"{hw}x{hw} {c}->{c}"] + [f"{best[n] * 1e6:.0f} ({flop / best[n] / 1e9:.0f}) {errors[n]:.0e}"
                                              for n in timers]
                    + [f"{best['direct'] / min(best[n] for n in timers if n != 'direct'):.2f}x"])
    return markdown_table(["layer", "direct µs (GFLOP/s) rel. err", "F(2,3)", "F(4,3)", "best Winograd speed-up"],
                          rows)


def _policy(min_f4: int, min_f2: int):
    from ingot.ops import winograd as W

    default = W.choose_tile

    def choose(out_hw, channels, out_channels, lanes):
        if default((56, 56), channels, out_channels, lanes) is None:  # the same channel conditions
            return None
        size = min(out_hw)
        return 4 if size >= min_f4 else (2 if size >= min_f2 else None)

    return choose


def run_model(rounds: int, only: "str | None" = None) -> str:
    """ResNet-50 end to end per tile policy, interleaved with ONNX Runtime (ms, ratio to ORT)."""
    import ingot
    from benchmarks import architectures
    from benchmarks.tune_models import export_onnx, ort_session
    from ingot.ops import winograd as W

    from ingot.ops.schedule import winograd as WS

    default, tile_rows = W.choose_tile, WS._blocked

    def stage_by_stage(*args, **kwargs):
        raise WS.ScheduleError("tile rows off (benchmark policy)")

    # name -> (tile policy, tile-row schedule on)
    policies = {"direct (graph.winograd off)": (None, True), "default (F4 >= 28, F2 at 14)": (default, True),
                "default, stage by stage (no tile rows)": (default, False),
                "F4 >= 14": (_policy(14, 999), True), "F4 >= 14, F2 at 7": (_policy(14, 7), True)}
    if only:
        policies = {k: v for k, v in policies.items() if any(w.strip() in k for w in only.split(","))}
    with tempfile.TemporaryDirectory() as tmp:
        module, x = architectures.build("resnet50", "full")
        path = os.path.join(tmp, "resnet50.onnx")
        export_onnx(module, x, path)
        model = ingot.load(path)
        sess = ort_session(path)
        expected = sess.run(None, {"data": x})[0]
        runs, errors = {"ONNX Runtime": lambda: sess.run(None, {"data": x})}, {}
        for name, (policy, rows) in policies.items():
            W.choose_tile = policy or default
            WS._blocked = tile_rows if rows else stage_by_stage
            try:
                with ingot.transform.PassContext(config={"graph.winograd": policy is not None}):
                    package = ingot.compile(model, target=TARGET)
            finally:
                W.choose_tile, WS._blocked = default, tile_rows
            out = ingot.run(package, {"data": x})
            out = np.asarray(list(out.values())[0] if isinstance(out, dict) else out[0])
            errors[name] = float(np.abs(out - expected).max())
            runs[name] = (lambda p: lambda: ingot.run(p, {"data": x}))(package)
        best = {name: float("inf") for name in runs}
        for _ in range(rounds):
            for name, fn in runs.items():
                fn()
                for _ in range(10):
                    start = time.perf_counter()
                    fn()
                    best[name] = min(best[name], time.perf_counter() - start)
    ort_s = best["ONNX Runtime"]
    rows = [[name, f"{best[name] * 1e3:.2f}", f"{best[name] / ort_s:.3f}", f"{errors.get(name, 0.0):.1e}"]
            for name in runs]
    return markdown_table(["ResNet-50", "ms", "vs ONNX Runtime", "max abs err vs ORT"], rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", action="store_true", help="ResNet-50's 3x3 stride-1 layers alone")
    p.add_argument("--model", action="store_true", help="the whole model per tile policy")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--policies", default=None, help="comma-separated substrings of the policy names to run")
    args = p.parse_args()
    if not (args.layers or args.model):
        p.error("pass --layers and/or --model")
    print(f"load average before: {load_average()}")
    if args.layers:
        print(run_layers(args.rounds or 15))
    if args.model:
        print(run_model(args.rounds or 6, args.policies))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
