"""NHWC conv tuning benchmark: explicit points of the `NhwcConv` space vs the default, and a
tuning run (tuned vs default vs PyTorch / ONNX Runtime).

The kernels are the fused ``relu(conv2d_nhwc_packed_weight(x, w) + bias)`` functions the graph
builds for CPU conv networks (`benchmarks/conv2d.py`'s ``nhwc_layer_func``).

``--explore`` builds, for each layer, the default schedule, a control point (the default's knobs
given explicitly: its ratio shows the noise) and explicit parameter points
(`ingot.ops.schedule.conv_nhwc.build_conv_nhwc`: loop order, pixel tile MR, channel slice kc,
unrolled steps ku, parallel fusion), and times them INTERLEAVED (default, point, default, point,
...), keeping the MIN over ``--rounds`` rounds of short samples (robust to other processes). It
prints a Markdown table of GFLOP/s and speedups over the default, and the load average before
and after. Every point is in `NhwcConv`'s space (its structure is a branch, its factors are
perfect tiles of its sampled loops).

``--trials N [M ...]`` tunes each layer with the default space (``ingot.tune.tune_tir``, one run of
the largest N) and prints, for the best candidate measured by each checkpoint, tuned vs default
vs PyTorch (channels_last) vs ONNX Runtime, plus the seconds per trial and the tuner's split of
them (search / build / run). ``benchmarks/tune_gemm.py --conv`` calls `tune` for "res2 3x3".

Usage:
    python benchmarks/tune_conv.py --explore --threads 1            # hand search, 1 thread
    python benchmarks/tune_conv.py --explore --threads 2 --only res4
    python benchmarks/tune_conv.py --trials 64                      # tuned vs default vs ORT
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ingot  # noqa: E402
from common import banner, load_average, markdown_table  # noqa: E402
from conv2d import _min_seconds, _nhwc_inputs, _onnxruntime_session, flops, nhwc_layer_func  # noqa: E402

# name, in channels, size, out channels, kernel, stride, groups (conv2d.py's layer tuples)
LAYERS = [
    ("res2 3x3", 64, 56, 64, 3, 1, 1),
    ("res3 3x3", 128, 28, 128, 3, 1, 1),
    ("res4 3x3", 256, 14, 256, 3, 1, 1),
    ("res5 3x3", 512, 7, 512, 3, 1, 1),
    ("res2 1x1 expand", 64, 56, 256, 1, 1, 1),
    ("res2 1x1 reduce", 256, 56, 64, 1, 1, 1),
    ("res4 1x1 expand", 256, 14, 1024, 1, 1, 1),
    ("res5 1x1 reduce", 2048, 7, 512, 1, 1, 1),
    ("mbv2 1x1 last 7", 320, 7, 1280, 1, 1, 1),
    ("mbv2 1x1 project 28", 192, 28, 32, 1, 1, 1),
]
#: The layers a tuning run covers by default (the task's issue #7 pair).
TUNE_LAYERS = ["res2 3x3", "mbv2 1x1 last 7"]


def _shape(func, cores: int):
    """(schedule, conv block name, BlockInfo, ConvNhwcShape) of a layer's PrimFunc."""
    from ingot.ops.schedule.analysis import analyze_block
    from ingot.ops.schedule.conv_nhwc import analyze_conv_nhwc
    from ingot.tir.schedule import Schedule

    sch = Schedule(func)
    name = next(b for b in sch.state.blocks("main") if b.startswith("conv2d_nhwc"))
    info = analyze_block(sch, sch.get_block(name))
    return sch, name, info, analyze_conv_nhwc(sch, name, info, 16)


def points(layer, cores: int) -> "list":
    """Explicit `ConvNhwcParams` around the default: `NhwcConv`'s branch structures, other MR
    (dividing OW, <= 28 / NVEC accumulators), half/double the channel slice, ku 1/2/4/8,
    finer parallel tasks (rows order)."""
    from ingot.ops.schedule.conv_nhwc import ConvNhwcParams, default_conv_params
    from ingot.tune.schedule_rule.conv_nhwc import NhwcConv

    func = nhwc_layer_func(*layer[1:])[0]
    _, _, _, shape = _shape(func, cores)
    default = default_conv_params(shape, cores)
    out = list(NhwcConv(max_branches=4).branch_params(shape, cores))
    for base in list(out):
        for mr in (4, 7, 8, 14, 28):
            if shape.ow % mr == 0 and mr * shape.nvec <= 28 and mr != base.mr:
                out.append(ConvNhwcParams(base.order, mr, base.kc, base.ku))
        if base.kc:
            for kc in (base.kc // 2, base.kc * 2, base.kc * 4):
                if kc >= 8 and kc % 8 == 0 and shape.c % kc == 0 and kc < shape.c:
                    out.append(ConvNhwcParams(base.order, base.mr, kc, min(base.ku, kc)))
        for ku in (1, 2, 4, 8):
            if ku != base.ku and (base.kc or shape.c) % ku == 0 and (base.kc or shape.c > 8):
                out.append(ConvNhwcParams(base.order, base.mr, base.kc, ku))
        if base.order == "rows":
            out.append(ConvNhwcParams(base.order, base.mr, base.kc, base.ku, parallel_fuse=3))
    seen, uniq = {default}, []
    for p in out:
        if p not in seen:
            seen.add(p)
            uniq.append(p)
    return [default] + uniq


def build_point(layer, params, threads: int):
    """The compiled module of a layer scheduled with explicit ``params`` (None: the default)."""
    from ingot.ops.schedule import schedule_blocks
    from ingot.ops.schedule.conv_nhwc import build_conv_nhwc
    from ingot.target import Target

    target = f"llvm -num-cores={threads}"
    func = nhwc_layer_func(*layer[1:])[0]
    sch, name, info, shape = _shape(func, threads)
    if params is not None:
        build_conv_nhwc(sch, name, info, shape, params.order, params.x_factors(shape.ow),
                        params.c_factors(shape.c), threads, parallel_fuse=params.parallel_fuse)
    sch = schedule_blocks(sch, Target(target))  # the pad stage (and the conv when params is None)
    return ingot.build(sch.mod, target)


def _args(layer):
    func, shapes, pack, _ = nhwc_layer_func(*layer[1:])
    x, w, b, y = _nhwc_inputs(layer, shapes)
    return [x, pack(w), b, np.zeros_like(y)]


#: Seconds of one timing sample: a layer call (0.1-2 ms) or two. Short samples matter on a shared
#: machine: a 10 ms sample rarely escapes preemption at load 5 (an identical control point then read
#: 0.6-1.0x of the default), single calls do (controls within 0.5% at load 5, min of 150 rounds).
SAMPLE_SECONDS = 0.0005


def _interleaved_min(fns, rounds: int) -> "list[float]":
    """MIN seconds of each function over ``rounds`` rounds of one short sample each, interleaved."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            best[k] = min(best[k], _min_seconds(fn, SAMPLE_SECONDS))
    return best


def _explore_layer(layer, threads: int, rounds: int, max_points: int) -> list:
    args = _args(layer)
    libs = []
    for p in [None] + points(layer, threads)[: max_points + 1]:  # the rule's default, then its knobs (control)
        try:
            libs.append((p, build_point(layer, p, threads)["main"]))
        except Exception as err:  # a point the builder refuses: reported, not timed
            print(f"  {layer[0]}: {p} refused: {str(err).splitlines()[0]}")
    ref = None
    for p, fn in libs:  # every point computes what the default computes
        fn(*args)
        ref = args[-1].copy() if ref is None else ref
        np.testing.assert_allclose(args[-1], ref, rtol=1e-3, atol=1e-3, err_msg=f"{layer[0]}: {p}")
    best = _interleaved_min([lambda fn=fn: fn(*args) for _, fn in libs], rounds)
    gf = flops(layer) / 1e9
    rows = []
    for k in [0, 1] + sorted(range(2, len(libs)), key=lambda k: best[k])[:4]:
        p = libs[max(k, 1)][0]  # the default's row shows its knobs
        rows.append([layer[0] if k == 0 else "", "default" if k == 0 else "control" if k == 1 else "",
                     f"{p.order} mr={p.mr} kc={p.kc} ku={p.ku} fuse={p.parallel_fuse}",
                     f"{gf / best[k]:.1f}", f"{best[0] / best[k]:.3f}"])
    return rows


def explore(layers, threads: int, rounds: int, max_points: int) -> None:
    """The hand search: the default, its control and up to ``max_points`` points per layer, the
    best 4 shown."""
    banner(f"NhwcConv space points vs the default (NHWC fp32, batch 1, {threads} thread(s), min of {rounds} "
           "interleaved rounds)")
    header = markdown_table(["layer", "", "point", "GFLOP/s", "x default"], [])
    print(header, flush=True)
    for layer in layers:  # row by row: a long run shows its layers as they finish
        for row in _explore_layer(layer, threads, rounds, max_points):
            print("| " + " | ".join(str(x) for x in row) + " |", flush=True)
    print(f"load average after: {load_average()}")


def layer_named(name: str):
    """The `LAYERS` tuple called ``name`` (e.g. ``"res2 3x3"``).

    Example:
        >>> layer_named("res2 3x3")[1:]
        (64, 56, 64, 3, 1, 1)
    """
    for layer in LAYERS:
        if layer[0] == name:
            return layer
    raise KeyError(f"no layer {name!r} in tune_conv.LAYERS: use one of {[x[0] for x in LAYERS]}")


def _tune_run(func, target: str, trials: int, work_dir: str):
    """One evolutionary tuning run of ``trials``: (records in measuring order, wall s, time split)."""
    import shutil
    import time

    from ingot import tune as ms

    shutil.rmtree(work_dir, ignore_errors=True)
    t0 = time.time()
    ms.tune_tir(func, target, work_dir, max_trials_global=trials, num_trials_per_iter=min(64, trials), seed=0,
                verbose=0)
    wall = time.time() - t0
    split = dict(ms.tune_tasks.last_scheduler.time_split)
    db = ms.SQLiteDatabase(os.path.join(work_dir, "database.db"))
    recs = sorted(db.get_records(ingot.ir.IRModule({"main": func}), target), key=lambda r: r.timestamp)
    return recs, wall, split


def _tune_layer(layer, checkpoints, threads: int, rounds: int, work_dir: str) -> "tuple[list, list]":
    """Tune ``layer`` once for ``max(checkpoints)`` trials; for each checkpoint, the best record
    measured by then re-timed interleaved with the default, PyTorch and ORT. Returns (table
    rows, tuning curve: best GFLOP/s after each trial)."""
    import torch

    from ingot.tir.schedule import Schedule

    target = f"llvm -num-cores={threads}"
    func, shapes, pack, _ = nhwc_layer_func(*layer[1:])
    x, w, b, y = _nhwc_inputs(layer, shapes)
    x_nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    w_oihw = np.ascontiguousarray(w.transpose(3, 2, 0, 1))
    args = [x, pack(w), b, np.zeros_like(y)]
    gf = flops(layer) / 1e9
    recs, wall, split = _tune_run(func, target, max(checkpoints), work_dir)
    # where a trial's seconds go (the tuner's own split: search = replay + features + model)
    print(f"  {layer[0]}: {len(recs)} trials in {wall:.0f} s = {wall / max(1, len(recs)):.2f} s/trial (search "
          f"{split['search']:.0f} s, build {split['build']:.0f} s, run {split['run']:.0f} s, other "
          f"{split['other']:.0f} s)", flush=True)
    default = build_point(layer, None, threads)["main"]
    xt = torch.from_numpy(x_nchw).contiguous(memory_format=torch.channels_last)
    wt = torch.from_numpy(w_oihw).contiguous(memory_format=torch.channels_last)
    bt = torch.from_numpy(b)
    s, k = layer[5], layer[4]

    def run_torch():
        with torch.no_grad():
            torch.relu(torch.nn.functional.conv2d(xt, wt, bt, stride=s, padding=k // 2))

    sess = _onnxruntime_session(layer, x_nchw, w_oihw, b, threads)
    rows = []
    for n in checkpoints:
        valid = [r for r in recs[:n] if r.is_valid]
        if not valid:
            rows.append([layer[0], n] + ["-"] * 8)
            continue
        best = min(valid, key=lambda r: r.mean_sec)
        sch = Schedule(func)
        best.trace.apply_to_schedule(sch)
        tuned = ingot.build(sch.mod, target)["main"]
        fns = [lambda fn=tuned: fn(*args), lambda: default(*args), run_torch]
        if sess is not None:
            fns.append(lambda: sess.run(None, {"x": x_nchw}))
        t = _interleaved_min(fns, rounds)
        ort = f"{gf / t[3]:.1f}" if sess is not None else "-"
        rows.append([layer[0], n, f"{gf / best.mean_sec:.1f}", f"{gf / t[0]:.1f}", f"{gf / t[1]:.1f}",
                     f"{gf / t[2]:.1f}", ort, f"{t[1] / t[0]:.2f}", f"{min(t[2:]) / t[0]:.2f}", _describe(sch)])
    curve, best_s = [], float("inf")
    for r in recs:
        best_s = min(best_s, r.mean_sec) if r.is_valid else best_s
        curve.append(gf / best_s if best_s < float("inf") else 0.0)
    return rows, curve


def _describe(sch) -> str:
    """Which space member won: NhwcConv's tiles (OW split, channel split), else the generic rules."""
    from ingot.tune.schedule_rule.conv_nhwc import MARK

    trace = sch.trace
    if not any(i.kind.name == "annotate" and len(i.inputs) >= 2 and i.inputs[1] == MARK for i in trace.insts):
        return "not NhwcConv"
    tiles = [tuple(trace.decisions[i]) for i in trace.insts if i.kind.name == "sample_perfect_tile"]
    return "NhwcConv " + " ".join(str(list(t)) for t in tiles)


def tune(layers, trials, threads: int, rounds: int, work_dir: str = "") -> dict:
    """Tune each layer (default space, one run of ``max(trials)``) and, at each checkpoint of
    ``trials`` (an int or a list), time tuned / default / PyTorch / ORT interleaved. Returns
    the tuning curves {layer name: best GFLOP/s after each trial}.

    Example:
        >>> # tune([layer_named("res2 3x3")], [64, 256], threads=2, rounds=150)
    """
    import torch

    checkpoints = sorted({trials} if isinstance(trials, int) else set(trials))
    torch.set_num_threads(threads)
    banner(f"NHWC conv tuning ({', '.join(map(str, checkpoints))} trials, {threads} threads): tuned vs default vs "
           "PyTorch / ORT")
    rows, curves = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for layer in layers:
            wd = os.path.join(work_dir or tmp, layer[0].replace(" ", "_"))
            layer_rows, curves[layer[0]] = _tune_layer(layer, checkpoints, threads, rounds, wd)
            rows += layer_rows
    print(markdown_table(["layer", "trials", "tuned GFLOP/s (tuner)", "tuned (re-timed)", "default", "PyTorch", "ORT",
                          "tuned/default", "tuned vs best ref", "best"], rows))
    print(f"load average after: {load_average()}")
    return curves


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--explore", action="store_true", help="time explicit points of the space vs the default")
    p.add_argument("--trials", type=int, nargs="+", default=[], help="tune each layer: one run of the largest, "
                   "the best of each checkpoint re-timed")
    p.add_argument("--work-dir", default="", help="keep the tuning work dirs here (default: a temporary dir)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=150)
    p.add_argument("--max-points", type=int, default=12, help="points per layer in --explore")
    p.add_argument("--only", default=None, help="substring of the layer names to keep")
    args = p.parse_args()
    layers = [layer for layer in LAYERS if args.only is None or args.only in layer[0]]
    if args.explore:
        explore(layers, args.threads, args.rounds, args.max_points)
    if args.trials:
        keep = layers if args.only else [layer for layer in LAYERS if layer[0] in TUNE_LAYERS]
        tune(keep, args.trials, args.threads, args.rounds, args.work_dir)
    if not args.explore and not args.trials:
        p.print_help()


if __name__ == "__main__":
    main()
