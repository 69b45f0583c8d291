"""The top-N per-layer gaps to ONNX Runtime inside whole models: where the next speed-up is.

A short ranking on top of `benchmarks/ort_layers.py` (which profiles both runtimes inside the
model, batch 1, 2 threads, interleaved run by run, min per layer over ``--repeat`` runs, layers
matched by conv signature): for each model, the ``--top`` conv layers where Ingot loses the most
time per run (Ingot µs / ORT µs per call, calls per run, µs lost per run), then the end-to-end
times. Ingot's Winograd 3x3 convs appear in ort_layers as an Ingot-only "16x8"/"36x4" GEMM row
and an ORT-only "3x3 s1" row; here they are merged back into one "3x3 s1 ... (winograd)" row
(the Winograd GEMM only: its input/output transforms count under other op types).

    python benchmarks/experiments/layer_gaps.py --onnx /tmp/tm6/resnet50.onnx --onnx /tmp/tm6/mobilenetv2.onnx
    python benchmarks/experiments/layer_gaps.py --models resnet50,mobilenet_v2 --repeat 20 --top 10
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # the repository root

from benchmarks.common import load_average, markdown_table  # noqa: E402
from benchmarks.ort_layers import THREADS, compare  # noqa: E402

_LABEL = re.compile(r"^(\d+)x(\d+) s(\d+) (\d+)->(\d+) @(\d+)->(\d+)$")


def merge_winograd(layers: "list[dict]") -> "list[dict]":
    """Pair each Ingot-only Winograd GEMM row (kernel "AxB", not a real KHxKW) with the ORT-only
    3x3 stride-1 row of the same channels and map; other rows unchanged.

    Example:
        >>> rows = [{"layer": "16x8 s1 8->8 @14->14", "ort_calls": 0, "ort_us": 0.0, "ingot_calls": 1,
        ...          "ingot_us": 5.0, "flops": 1}, {"layer": "3x3 s1 8->8 @14->14", "ort_calls": 1,
        ...          "ort_us": 6.0, "ingot_calls": 0, "ingot_us": 0.0, "flops": 2}]
        >>> [r["layer"] for r in merge_winograd(rows)]
        ['3x3 s1 8->8 @14->14 (winograd)']
    """
    ort_only = {r["layer"]: r for r in layers if r["ort_calls"] and not r["ingot_calls"]}
    out, used = [], set()
    for r in layers:
        m = _LABEL.match(r["layer"])
        if m and not r["ort_calls"] and r["ingot_calls"] and (m.group(1), m.group(2)) != ("1", "1"):
            twin = f"3x3 s1 {m.group(4)}->{m.group(5)} @{m.group(6)}->{m.group(7)}"
            if twin in ort_only and twin not in used:
                o = ort_only[twin]
                used.add(twin)
                out.append({**r, "layer": twin + " (winograd)", "flops": o["flops"], "ort_calls": o["ort_calls"],
                            "ort_us": o["ort_us"]})
                continue
        out.append(r)
    return [r for r in out if r["layer"] not in used]


def top_gaps(res: dict, top: int) -> str:
    """Markdown: the ``top`` layers of one `compare` result by µs Ingot loses per run."""
    layers = merge_winograd(res["layers"])
    layers.sort(key=lambda r: -(r["ingot_us"] - r["ort_us"]))
    rows = []
    for r in layers[:top]:
        o = r["ort_us"] / r["ort_calls"] if r["ort_calls"] else 0.0
        i = r["ingot_us"] / r["ingot_calls"] if r["ingot_calls"] else 0.0
        rows.append([r["layer"], f"{r['ingot_calls']}", f"{i:.0f}", f"{o:.0f}", f"{i / o:.2f}" if i and o else "—",
                     f"{r['ingot_us'] - r['ort_us']:+.0f}"])
    e = res["e2e_ms"]
    return "\n".join([
        f"### {res['model']}: top {top} conv gaps (min over runs, {THREADS} threads)", "",
        markdown_table(["layer (k s C->O @map)", "calls/run", "Ingot µs/call", "ORT µs/call", "Ingot/ORT",
                        "Ingot−ORT µs/run"], rows), "",
        f"end to end: Ingot {e['ingot']:.2f} ms, ORT {e['ort']:.2f} ms ({e['ingot'] / e['ort']:.2f}x); "
        f"max relative error {res['rel_err']:.1e}", ""])


def main(argv: "list | None" = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="", help="comma-separated names from ingot/testing/architectures.py "
                   "(exported with random weights)")
    p.add_argument("--onnx", action="append", default=[], help="an ONNX file (input 'data'); repeatable")
    p.add_argument("--repeat", type=int, default=20, help="profiled runs per runtime (min taken)")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--target", default=f"llvm -num-cores={THREADS}")
    args = p.parse_args(argv)
    if not args.models and not args.onnx:
        args.models = "resnet50,mobilenet_v2"
    print(f"load average before: {load_average()}\n")
    with tempfile.TemporaryDirectory(prefix="ingot-layer-gaps-") as tmp:
        paths = list(args.onnx)
        if args.models:
            from ingot.testing import architectures
            from ingot.testing.zoo import export_module

            for name in filter(None, args.models.split(",")):
                module, x = architectures.build(name, "full")
                paths.append(os.path.join(tmp, f"{name}.onnx"))
                export_module(module, x, paths[-1])
        for path in paths:
            print(top_gaps(compare(path, args.repeat, args.target), args.top), flush=True)
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
