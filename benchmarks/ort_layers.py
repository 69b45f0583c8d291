"""Per-layer comparison with ONNX Runtime: where does ORT win, by how much, on which conv shapes.

Both runtimes are profiled inside a whole-model run (batch 1, 2 threads), so every layer reads
its weights and activations from wherever the previous layers left them:

* ONNX Runtime: ``SessionOptions.enable_profiling``; ``end_profiling()`` writes a JSON trace whose
  ``"Node"`` events carry each node's time (``dur``, µs), ``args.op_name`` and
  ``args.input_type_shape``/``output_type_shape`` (ORT fuses Conv+Add+Relu into one node, which
  keeps the Conv's shapes).
* Ingot: `ingot.profile` times each fused kernel; the kernel's parameters (activation input,
  weight constant, output; `Executable.plans` tells which arguments are constants) give its
  conv shape.

Layers are matched by their conv signature: kernel KH×KW, stride, input channels → output
channels, input map size, groups (depthwise when groups = channels). One row per distinct
signature: calls per run, µs per call on each side, Ingot/ORT, GFLOP/s of both, and the time
Ingot loses (+) or gains (−) per run on those layers; rows sorted by that loss. Then totals per
op type (conv, pool, gemm, layout, other). Every figure is the MIN over ``--repeat`` runs
(per layer and per run: other processes only ever add time), the two runtimes interleaved run
by run; the load average is printed before and after.

ORT's NCHWc layout pads channels to a multiple of 16 in its profile (MobileNetV2's 24-channel
layers appear as 32), so layers are matched with channels rounded up to 16 (`ConvSig.bucket`;
rows carry Ingot's true shape). What cannot be mapped: non-conv ops are compared per op type
only (Ingot fuses elementwise ops into the convs and adds layout transposes; ORT adds NCHWc
reorders), two conv shapes that differ only below that rounding share a row, and a conv that
Ingot lowered to something other than a conv kernel (e.g. a matmul) appears as ORT-only.

    python benchmarks/ort_layers.py --models resnet50,mobilenet_v2 --repeat 20
    python benchmarks/ort_layers.py --onnx /tmp/tm/resnet50_full.onnx --json /tmp/r50_layers.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Optional

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks.common import load_average, markdown_table  # noqa: E402

THREADS = 2
#: Pause (s) between the two runtimes' runs: their idle worker threads stop spinning.
SWITCH_PAUSE_S = 0.05


@dataclass(frozen=True)
class ConvSig:
    """A conv layer's signature (what both profiles agree on): kernel, stride, channels, map, groups.

    Example:
        >>> s = ConvSig(3, 3, 2, 128, 128, 56, 28, 1)
        >>> s.label(), s.flops()
        ('3x3 s2 128->128 @56->28', 231211008)
    """
    kh: int
    kw: int
    stride: int
    c: int
    o: int
    h: int
    oh: int
    groups: int

    def label(self) -> str:
        dw = " dw" if self.groups > 1 and self.groups == self.c else (f" g{self.groups}" if self.groups > 1 else "")
        return f"{self.kh}x{self.kw}{dw} s{self.stride} {self.c}->{self.o} @{self.h}->{self.oh}"

    def bucket(self) -> "ConvSig":
        """The matching key: channels rounded up to a multiple of 16, as ORT's NCHWc layout pads
        them in its profile (MobileNetV2's 24-channel layers appear as 32).

        Example:
            >>> ConvSig(1, 1, 1, 96, 24, 56, 56, 1).bucket() == ConvSig(1, 1, 1, 96, 32, 56, 56, 1).bucket()
            True
        """
        def up(n: int) -> int:
            return -(-n // 16) * 16

        groups = up(self.groups) if self.groups == self.c and self.groups > 1 else self.groups
        return ConvSig(self.kh, self.kw, self.stride, up(self.c), up(self.o), self.h, self.oh, groups)

    def flops(self) -> int:
        """Multiply-adds x 2 of one call (batch 1, square maps)."""
        return 2 * self.oh * self.oh * self.o * (self.c // self.groups) * self.kh * self.kw


def _category(name: str) -> str:
    """Op type of an ORT op name or an Ingot kernel name (for the totals table)."""
    n = name.lower()
    if "conv" in n:
        return "conv"
    if "pool" in n:
        return "pool"
    if any(k in n for k in ("gemm", "matmul", "dense")):
        return "gemm"
    if any(k in n for k in ("reorder", "transpose", "permute", "reshape", "flatten", "layout")):
        return "layout"
    return "other"


def _stride(h: int, oh: int) -> int:
    return max(1, round(h / oh))


# -- ONNX Runtime ----------------------------------------------------------------------------------
def ort_session(path: str, profile: bool):
    """An ORT CPU session with ``THREADS`` intra-op threads (profiling on when ``profile``)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = THREADS, 1
    if profile:
        opts.enable_profiling = True
        opts.profile_file_prefix = os.path.join(tempfile.gettempdir(), "ingot_ort_layers")
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def ort_conv_sig(args: dict) -> Optional[ConvSig]:
    """The `ConvSig` of an ORT Conv/FusedConv node event (NCHW shapes, OIHW weights)."""
    ins, outs = args.get("input_type_shape") or [], args.get("output_type_shape") or []
    if len(ins) < 2 or not outs:
        return None
    x, w, y = (list(d.values())[0] for d in (ins[0], ins[1], outs[0]))
    if len(x) != 4 or len(w) != 4 or len(y) != 4:
        return None
    c, o = x[1], y[1]
    return ConvSig(w[2], w[3], _stride(x[2], y[2]), c, o, x[2], y[2], max(1, c // max(w[1], 1)))


def ort_runs(trace_path: str, skip: int) -> "list[dict]":
    """Per model run (after the first ``skip``): {(category, signature or op name): µs}."""
    with open(trace_path) as f:
        events = json.load(f)
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")
    out: "list[dict]" = [dict() for _ in runs]
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        k = next((i for i, (a, b) in enumerate(runs) if a <= e["ts"] <= b), None)
        if k is None:
            continue
        op = e["args"].get("op_name", "?")
        cat = _category(op)
        key = (cat, ort_conv_sig(e["args"]) if cat == "conv" else op)
        if key[1] is None:
            key = ("conv", op)
        calls, us = out[k].get(key, (0, 0.0))
        out[k][key] = (calls + 1, us + e["dur"])
    return out[skip:]


# -- Ingot -----------------------------------------------------------------------------------------
def ingot_kernel_keys(package) -> dict:
    """{kernel name: (category, ConvSig or kernel name)} from the plan's call_tir steps."""
    ex = package.executable
    keys = {}
    for step in ex.plans["main"]["steps"]:
        name = step.get("func")
        if step.get("op") != "call_tir" or name in keys:
            continue
        cat = _category(name)
        sig = _ingot_conv_sig(ex.mod[name], step) if cat == "conv" and ex.mod is not None else None
        keys[name] = (cat, sig if sig is not None else name)
    return keys


def _ingot_conv_sig(func, step: dict) -> Optional[ConvSig]:
    """NHWC input (the first non-constant argument), weight (the first constant: HWIO
    ``[KH, KW, C/g, O]`` or packed panels ``[O/P, KH, KW, C, P]``), output (the last parameter)."""
    shapes = [[int(getattr(d, "value", -1)) for d in p.shape] for p in func.params if hasattr(p, "shape")]
    args = step["args"]
    x = next((shapes[i] for i, a in enumerate(args) if a[0] != "const"), None)
    w = next((shapes[i] for i, a in enumerate(args) if a[0] == "const"), None)
    y = shapes[-1]
    if x is None or w is None or len(x) != 4 or len(y) != 4:
        return None
    if len(w) == 5:
        kh, kw, cg = w[1], w[2], w[3]
    elif len(w) == 4:
        kh, kw, cg = w[0], w[1], w[2]
    else:
        return None
    c, o = x[3], y[3]
    return ConvSig(kh, kw, _stride(x[1], y[1]), c, o, x[1], y[1], max(1, c // max(cg, 1)))


def ingot_run(package, x: np.ndarray) -> dict:
    """One profiled Ingot run: {kernel name: (calls, µs)}."""
    from ingot.workflow import model as M

    prof = M.profile(package, {"data": x}, repeat=1)
    return {k.name: (k.calls, k.ms * 1e3) for k in prof.kernels}


# -- comparison ------------------------------------------------------------------------------------
def min_per_key(runs: "list[dict]") -> dict:
    """{key: (calls, min µs over runs)} (a key missing from a run counts as absent there)."""
    best: dict = {}
    for run in runs:
        for key, (calls, us) in run.items():
            if key not in best or us < best[key][1]:
                best[key] = (calls, us)
    return best


def compare(onnx_path: str, repeat: int, target: str) -> dict:
    """Profile ORT and Ingot on ``onnx_path`` (interleaved, ``repeat`` runs each) and return
    {"layers": [...], "types": [...], "e2e": {...}} (µs per run, min over runs)."""
    import time

    import ingot
    from ingot.workflow import model as M

    sess = ort_session(onnx_path, profile=True)
    plain = ort_session(onnx_path, profile=False)
    shape = [d if isinstance(d, int) else 1 for d in sess.get_inputs()[0].shape]
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    package = M.compile(M.load(onnx_path), target)
    keys = ingot_kernel_keys(package)
    fn = package.executor()["main"]
    got = list(ingot.run(package, {"data": x}).values())[0]
    want = plain.run(None, {"data": x})[0]
    err = float(np.abs(np.asarray(got) - want).max() / max(1e-6, float(np.abs(want).max())))
    # Step 1. Interleaved runs: ORT profiled, Ingot profiled, ORT plain, Ingot AOT (end to end).
    # Each runtime's worker threads spin a while after a run (ORT's pool, libgomp's barrier) and
    # would slow the other runtime's next run down: a pause before each switch lets them sleep.
    ingot_runs, e2e = [], {"ort": float("inf"), "ingot": float("inf")}
    for i in range(repeat + 1):
        sess.run(None, {"data": x})
        time.sleep(SWITCH_PAUSE_S)
        run = ingot_run(package, x)
        time.sleep(SWITCH_PAUSE_S)
        if i:
            agg: dict = {}
            for name, (calls, us) in run.items():
                key = keys.get(name, (_category(name), name))
                c0, u0 = agg.get(key, (0, 0.0))
                agg[key] = (c0 + calls, u0 + us)
            ingot_runs.append(agg)
        for side, call in (("ort", lambda: plain.run(None, {"data": x})), ("ingot", lambda: fn(x))):
            call()  # warm (this runtime's threads awake)
            t = time.perf_counter()
            call()
            e2e[side] = min(e2e[side], (time.perf_counter() - t) * 1e3)
            time.sleep(SWITCH_PAUSE_S)
    trace = sess.end_profiling()
    try:
        ort_best = min_per_key(ort_runs(trace, skip=1))
    finally:
        os.remove(trace)  # one JSON per run of the script otherwise piles up in the temp dir
    ing_best = min_per_key(ingot_runs)
    # Step 2. Conv rows by signature; totals per op type.
    # Matched by `ConvSig.bucket` (ORT reports NCHWc-padded channels); named by Ingot's true shape.
    by_bucket: dict = {}
    for side, best in (("ort", ort_best), ("ingot", ing_best)):
        for (cat, sig), (calls, us) in best.items():
            if cat == "conv" and isinstance(sig, ConvSig):
                row = by_bucket.setdefault(sig.bucket(), {"ort": (0, 0.0), "ingot": (0, 0.0), "sig": sig})
                row[side] = (row[side][0] + calls, row[side][1] + us)
                if side == "ingot":
                    row["sig"] = sig
    layers = [{"layer": r["sig"].label(), "flops": r["sig"].flops(), "ort_calls": r["ort"][0], "ort_us": r["ort"][1],
               "ingot_calls": r["ingot"][0], "ingot_us": r["ingot"][1]} for r in by_bucket.values()]
    layers.sort(key=lambda r: -(r["ingot_us"] - r["ort_us"]))
    types: dict = {}
    for side, best in (("ort_us", ort_best), ("ingot_us", ing_best)):
        for (cat, _), (_, us) in best.items():
            types.setdefault(cat, {"ort_us": 0.0, "ingot_us": 0.0})[side] += us
    return {"model": os.path.basename(onnx_path), "layers": layers, "types": types, "e2e_ms": e2e,
            "rel_err": err, "unmatched": [r["layer"] for r in layers if not (r["ort_calls"] and r["ingot_calls"])]}


def _fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if a and b else "—"


def _gflops(flops: int, us: float) -> str:
    return f"{flops / (us * 1e3):.0f}" if us else "—"


def report(res: dict) -> str:
    """The Markdown tables of one `compare` result."""
    rows = []
    for r in res["layers"]:
        o_call = r["ort_us"] / r["ort_calls"] if r["ort_calls"] else 0.0
        i_call = r["ingot_us"] / r["ingot_calls"] if r["ingot_calls"] else 0.0
        rows.append([r["layer"], f"{r['ort_calls']}/{r['ingot_calls']}", f"{o_call:.0f}", f"{i_call:.0f}",
                     _fmt_ratio(i_call, o_call), _gflops(r["flops"], o_call), _gflops(r["flops"], i_call),
                     f"{r['ingot_us'] - r['ort_us']:+.0f}"])
    lines = [f"### {res['model']}: conv layers (µs, min over runs; + = Ingot slower)", "",
             markdown_table(["layer (k s C->O @map)", "calls ORT/Ingot", "ORT µs/call", "Ingot µs/call",
                             "Ingot/ORT", "ORT GFLOP/s", "Ingot GFLOP/s", "Ingot−ORT µs/run"], rows), ""]
    trows = [[cat, f"{v['ort_us'] / 1e3:.2f}", f"{v['ingot_us'] / 1e3:.2f}", _fmt_ratio(v["ingot_us"], v["ort_us"])]
             for cat, v in sorted(res["types"].items())]
    tot_o = sum(v["ort_us"] for v in res["types"].values())
    tot_i = sum(v["ingot_us"] for v in res["types"].values())
    trows.append(["**all profiled**", f"{tot_o / 1e3:.2f}", f"{tot_i / 1e3:.2f}", _fmt_ratio(tot_i, tot_o)])
    e = res["e2e_ms"]
    trows.append(["**end to end (unprofiled)**", f"{e['ort']:.2f}", f"{e['ingot']:.2f}", _fmt_ratio(e["ingot"], e["ort"])])
    lines += [markdown_table(["op type", "ORT ms/run", "Ingot ms/run", "Ingot/ORT"], trows), ""]
    if res["unmatched"]:
        lines.append("unmatched (one side only): " + ", ".join(res["unmatched"]))
    lines.append(f"max relative error vs ORT: {res['rel_err']:.1e}")
    return "\n".join(lines)


def main(argv: "list | None" = None) -> int:
    """Command line (see the module docstring)."""
    from ingot.testing import architectures
    from ingot.testing.zoo import export_module

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="", help=f"comma-separated, from {', '.join(architectures.NAMES)} "
                   "(exported to a temp dir with random weights)")
    p.add_argument("--onnx", action="append", default=[], help="an ONNX file (input 'data'); repeatable")
    p.add_argument("--repeat", type=int, default=20, help="profiled runs per runtime (min taken)")
    p.add_argument("--target", default=f"llvm -num-cores={THREADS}")
    p.add_argument("--json", help="also write the raw results here")
    args = p.parse_args(argv)
    if not args.models and not args.onnx:
        args.models = "resnet50"
    print(f"load average before: {load_average()}")
    results = []
    with tempfile.TemporaryDirectory(prefix="ingot-ort-layers-") as tmp:
        paths = list(args.onnx)
        for name in filter(None, args.models.split(",")):
            module, x = architectures.build(name, "full")
            paths.append(os.path.join(tmp, f"{name}.onnx"))
            export_module(module, x, paths[-1])
        for path in paths:
            res = compare(path, args.repeat, args.target)
            results.append(res)
            print(report(res), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
