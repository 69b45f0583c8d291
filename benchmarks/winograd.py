"""Winograd F(m, 3) against the direct NHWC conv: ResNet-50's 3x3 stride-1 layers alone, and the whole
model with each tile policy (batch 1, 2 threads).

``--layers``: each 3x3 stride-1 layer of ResNet-50 (with its bias + relu epilogue, as fused in the
model; ``--sizes`` picks them) as the direct packed-weight conv and F(2, 3) / F(4, 3) under the tile-row
schedule and stage by stage (forced through ``WinogradSchedulePolicy.min_row_tiles``), each built with the C prelude's
workspace pool on and off (`POOL_OFF`), beside ONNX Runtime's Conv + Relu; checked against PyTorch,
timed warm (mean of 10 calls per sample) interleaved round by round, min and median at 1 and 2 threads,
and minor page faults per call (getrusage). Note: in this small process glibc's dynamic mmap threshold
(raised to the size of the first freed block) already keeps pool-off workspaces off mmap, so their
faults read ~0 here; ``--fixed-mmap-threshold`` pins it at glibc's default 128 KiB (mallopt
M_MMAP_THRESHOLD, as in a process whose earlier frees did not raise it) and shows them.

``--model``: ResNet-50 compiled with Winograd off (``graph.winograd``), with the default tile policy
(`ingot.ops.winograd.choose_tile`; the others as its `WinogradTilePolicy` in the pass context), the default policy with the tile-row schedule off (every layer
stage by stage: `ingot.ops.schedule.winograd` module note) and the other policies tried when it was
chosen, timed interleaved with ONNX Runtime in one process. Inside the model the weights come from L3/DRAM and the
transforms' buffers are cold, so the ranking differs from the layers alone (docs/performance.md).

    python benchmarks/winograd.py --layers [--rounds 15] [--sizes 56,28,14] [--fixed-mmap-threshold]
                                  [--transforms both]

``--transforms`` builds each Winograd kernel (``--layers``) or the default policy (``--model``) with
the transforms as the CPU model picks them ("default"), in one pass ("one-pass"), as two 1-D passes
("separable") or both of the last two, timed interleaved ("both"): `WinogradSchedulePolicy.separable`.
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


#: Defined before the prelude, this turns the C prelude's workspace pool off (`ingot.codegen.prelude`):
#: every workspace block then comes from posix_memalign and goes back to glibc (mmap/munmap when large).
POOL_OFF = "#define INGOT_WS_POOL_MIN ((size_t)-1)\n"


def _build(func, pool: bool):
    """Lower + compile ``func`` under its default schedule; ``pool=False``: the same C with the
    workspace pool off (`POOL_OFF` put in front of the source)."""
    import ingot
    from ingot.codegen import build as B
    from ingot.codegen.toolchain import compile_shared_library
    from ingot.ops.schedule import default_schedule
    from ingot.runtime.module import Module
    from ingot.target import as_target

    sched = default_schedule(func, TARGET)
    if pool:
        return ingot.build(sched, TARGET)
    target = as_target(TARGET)
    code = POOL_OFF + B.generate_c(B._as_module(ingot.lower(sched)), target).code
    lib = Module(compile_shared_library(code, B._options_for_source(target, code)), source=code)
    lib.set_num_threads(target.num_cores)
    return lib


def _layer_kernels(hw: int, c: int, tiles=(2, 4), forms=(None,)) -> tuple:
    """``(HWIO weight, {name: (PrimFunc, weight array, schedule mode)})`` of relu(conv(x, w) + b):
    the direct conv, and per tile m its kernel under the tile-row schedule ("rows") and stage by
    stage ("stages"), each with the transforms of every form in ``forms`` (`TRANSFORMS`), forced by
    `WinogradSchedulePolicy` while scheduling; a mode is ``(schedule, separable)``."""
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
    kernels["direct"] = (te.create_prim_func([x, wt, b, y]), wp, None)
    for m in tiles:
        u = W.transform_weight(w, m, 32)
        ut = te.placeholder(u.shape, name="u")
        y = ops.relu(ops.add(W.conv2d_nhwc_winograd(x, ut, padding=1), b))
        func = te.create_prim_func([x, ut, b, y])
        for mode in ("rows", "stages"):
            for form in forms:
                label = "" if form is None else f", {FORM_NAMES[form]}"
                kernels[f"F({m},3) {mode}{label}"] = (func, u, (mode, form))
    return w, kernels


#: ``--transforms`` choices: the `WinogradSchedulePolicy.separable` values they build.
TRANSFORMS = {"default": (None,), "one-pass": (False,), "separable": (True,), "both": (False, True)}
FORM_NAMES = {None: "transforms by CPU", False: "one-pass transforms", True: "separable transforms"}


def _schedule_mode(mode):
    """The pass context forcing the Winograd schedule: ``(schedule, separable)``, schedule "rows"
    (tile rows at any width) or "stages" (never tile rows), separable as in `WinogradSchedulePolicy`;
    None: the defaults."""
    from ingot.ir.transform import PassContext
    from ingot.ops.schedule.winograd import WINOGRAD_POLICY_CONFIG, WinogradSchedulePolicy

    mode, separable = mode if mode is not None else (None, None)
    rows = {"rows": 1, "stages": 10 ** 9}.get(mode)
    config = {} if rows is None else {WINOGRAD_POLICY_CONFIG: WinogradSchedulePolicy(min_row_tiles=rows,
                                                                                     separable=separable)}
    return PassContext(config=config)


def _ort_conv(hw: int, c: int, w: np.ndarray, b: np.ndarray, threads: int, path: str):
    """An ONNX Runtime session of relu(Conv(x, w, b)) (NCHW, as ORT runs it); None without ORT."""
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
         helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, hw, hw])],
        [numpy_helper.from_array(np.ascontiguousarray(w.transpose(3, 2, 0, 1)), "w"),
         numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _faults_per_call(fn, calls: int) -> float:
    """Minor page faults per call of ``fn`` (getrusage ru_minflt delta over ``calls`` warm calls)."""
    import resource

    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def run_layers(rounds: int, sizes=(56, 28, 14), forms=(None,)) -> str:
    """The per-layer table: per kernel (direct; F(m, 3) tile rows / stage by stage, workspace pool
    on / off; ONNX Runtime's Conv) min and median µs at 1 and 2 threads, page faults per call at 2
    threads, relative error vs PyTorch. All timed interleaved round by round (A, B, A, B ...)."""
    import statistics

    import torch

    import ingot

    rows = []
    for hw, c in [layer for layer in LAYERS if layer[0] in sizes]:
        w, kernels = _layer_kernels(hw, c, forms=forms)
        rng = np.random.default_rng(1)
        x, b = rng.standard_normal((1, hw, hw, c)).astype("float32"), rng.standard_normal(c).astype("float32")
        with torch.no_grad():
            ref = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(x).permute(0, 3, 1, 2),
                                                        torch.from_numpy(w).permute(3, 2, 0, 1), torch.from_numpy(b),
                                                        padding=1)).permute(0, 2, 3, 1).numpy()
        # name -> {threads: zero-argument call}, error
        calls, errors, timers = {}, {}, {}
        for name, (func, weight, mode) in kernels.items():
            for pool in (True, False):
                key = f"{name}, pool {'on' if pool else 'off'}"
                with _schedule_mode(mode):
                    lib = _build(func, pool)
                out = np.zeros(ref.shape, "float32")
                args = (x, weight, b, out)
                lib["main"](*args)
                errors[key] = float(np.abs(out - ref).max() / np.abs(ref).max())
                ev = lib.time_evaluator("main", ingot.cpu(), number=10)

                def timed(t, lib=lib, ev=ev, args=args):
                    lib.set_num_threads(t)
                    return ev(*args).mean
                timers[key] = timed
                calls[key] = (lambda lib=lib, args=args: (lib.set_num_threads(2), lib["main"](*args)))
        with tempfile.TemporaryDirectory() as tmp:
            sessions = {t: _ort_conv(hw, c, w, b, t, os.path.join(tmp, f"conv{t}.onnx")) for t in (1, 2)}
        if sessions[1] is not None:
            feed = {"x": np.ascontiguousarray(x.transpose(0, 3, 1, 2))}
            got = sessions[2].run(None, feed)[0].transpose(0, 2, 3, 1)
            errors["ONNX Runtime Conv"] = float(np.abs(got - ref).max() / np.abs(ref).max())

            def ort_timed(t, sessions=sessions, feed=feed):
                start = time.perf_counter()  # the mean of 10 calls, as time_evaluator(number=10)
                for _ in range(10):
                    sessions[t].run(None, feed)
                return (time.perf_counter() - start) / 10
            timers["ONNX Runtime Conv"] = ort_timed
            calls["ONNX Runtime Conv"] = lambda sessions=sessions, feed=feed: sessions[2].run(None, feed)
        samples = {(name, t): [] for name in timers for t in (1, 2)}
        for _ in range(rounds):
            for name, timed in timers.items():
                for t in (1, 2):
                    samples[(name, t)].append(timed(t))
        for name in timers:
            faults = _faults_per_call(calls[name], 20)
            mins = [min(samples[(name, t)]) * 1e6 for t in (1, 2)]
            meds = [statistics.median(samples[(name, t)]) * 1e6 for t in (1, 2)]
            rows.append([f"{hw}x{hw} {c}->{c}", name, f"{mins[0]:.0f}", f"{meds[0]:.0f}", f"{mins[1]:.0f}",
                         f"{meds[1]:.0f}", f"{faults:.1f}", f"{errors[name]:.0e}"])
    return markdown_table(["layer", "kernel", "1 thr min µs", "1 thr median", "2 thr min µs", "2 thr median",
                           "page faults / call (2 thr)", "rel. err vs PyTorch"], rows)


def _policy(min_f4: int, min_f2: int):
    """The `WinogradTilePolicy` giving F(4, 3) from ``min_f4`` output rows/columns up and F(2, 3)
    from ``min_f2`` (the channel conditions of `choose_tile` unchanged)."""
    from ingot.ops import winograd as W

    return W.WinogradTilePolicy(min_size=min(min_f2, min_f4), min_f4_size=min_f4)


def run_model(rounds: int, only: "str | None" = None, forms=(None,)) -> str:
    """ResNet-50 end to end per tile policy, interleaved with ONNX Runtime (ms, ratio to ORT)."""
    import ingot
    from benchmarks.tune_models import ort_session
    from ingot.ops import winograd as W
    from ingot.testing import architectures
    from ingot.testing.zoo import export_module

    from ingot.ops.schedule import winograd as WS

    default = W.WinogradTilePolicy()
    # the tile-row schedule: True (default widths), False (off: stage by stage), "all" (any width)
    min_row_tiles = {True: WS.MIN_ROW_TILES, False: 10 ** 9, "all": 1}

    # name -> (tile policy, tile-row schedule: True (default widths), False (off), "all" (any width))
    policies = {"direct (graph.winograd off)": (None, True), "default (F4 >= 28, F2 at 14)": (default, True),
                "default, stage by stage (no tile rows)": (default, False),
                "default, tile rows at every size": (default, "all"),
                "F4 >= 14": (_policy(14, 999), True), "F4 >= 14, F2 at 7": (_policy(14, 7), True)}
    if only:
        policies = {k: v for k, v in policies.items() if any(w.strip() in k for w in only.split(","))}
    # name -> the transforms' form (`WinogradSchedulePolicy.separable`): the default policy in each form
    separable = {name: None for name in policies}
    if forms != (None,) and "default (F4 >= 28, F2 at 14)" in policies:
        for form in forms:
            name = f"default, {FORM_NAMES[form]}"
            policies[name], separable[name] = policies["default (F4 >= 28, F2 at 14)"], form
    with tempfile.TemporaryDirectory() as tmp:
        module, x = architectures.build("resnet50", "full")
        path = os.path.join(tmp, "resnet50.onnx")
        export_module(module, x, path)
        model = ingot.load(path)
        sess = ort_session(path)
        expected = sess.run(None, {"data": x})[0]
        runs, errors = {"ONNX Runtime": lambda: sess.run(None, {"data": x})}, {}
        for name, (policy, rows) in policies.items():
            schedule = WS.WinogradSchedulePolicy(min_row_tiles=min_row_tiles[rows], separable=separable[name])
            with ingot.transform.PassContext(config={"graph.winograd": policy is not None,
                                                     W.TILE_POLICY_CONFIG: policy or default,
                                                     WS.WINOGRAD_POLICY_CONFIG: schedule}):
                package = ingot.compile(model, target=TARGET)
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
    p.add_argument("--fixed-mmap-threshold", action="store_true",
                   help="--layers: mallopt(M_MMAP_THRESHOLD, 128 KiB) first (page faults of pool-off kernels show)")
    p.add_argument("--sizes", default="56,28,14", help="--layers: output sizes of the layers to run (56,28,14,7)")
    p.add_argument("--policies", default=None, help="comma-separated substrings of the policy names to run")
    p.add_argument("--transforms", default="default", choices=sorted(TRANSFORMS),
                   help="the Winograd transforms' form: by CPU model, one-pass, separable, or both (A/B)")
    args = p.parse_args()
    if not (args.layers or args.model):
        p.error("pass --layers and/or --model")
    if args.fixed_mmap_threshold:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD: disables its dynamic raise
    print(f"load average before: {load_average()}")
    if args.layers:
        print(run_layers(args.rounds or 15, tuple(int(v) for v in args.sizes.split(",")), TRANSFORMS[args.transforms]))
    if args.model:
        print(run_model(args.rounds or 6, args.policies, TRANSFORMS[args.transforms]))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
