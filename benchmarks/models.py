"""Real models, batch 1, 2 threads: Ingot (untuned) beside ONNX Runtime, PyTorch eager and torch.compile.

For each model (random weights, written in plain ``torch.nn`` here since torchvision is not
installable): export to ONNX, compile with Ingot (compile time reported), check Ingot's output
against ONNX Runtime's, then measure the median batch-1 latency of Ingot, ONNX Runtime
(``intra_op_num_threads=2``), PyTorch eager (``torch.set_num_threads(2)``) and ``torch.compile``
(when it works offline), and the peak RSS of a fresh process that loads and runs the compiled
model once, beside ONNX Runtime's. Prints a Markdown table.

Models (``ingot/testing/architectures.py``, real sizes, batch 1): ResNet-50, MobileNetV2 (width 1.0, 224x224), a
BERT-base-style encoder (hidden 768, 12 heads, FFN 3072, sequence 128; ``--bert-layers`` sets the depth, 12 by
default) by default; with ``--models`` also densenet121, googlenet, vgg19, squeezenet1_1, shufflenet_v2,
mobilenet_v3_small, efficientnet_b0 (224x224), gpt2 (124M, 128 tokens), vit_b16 (224x224), or ``all``.

``--dynamic`` (issue #17) asks what a model exported with dynamic axes costs: each model is exported
twice with the dynamo exporter (``torch.onnx.export(..., dynamo=True)``), once with a symbolic batch (CNNs) or
batch and sequence (``bert``, ``gpt2``) and once with constant shapes, both compiled by Ingot; at batch 1 it
times, interleaved round by round in one process, Ingot's run-time-shape plan (memory planned per binding,
`ingot.graph.Executor`), the same plan allocating every intermediate per call (``max_bindings=0``), Ingot's
static plan (AOT entry) and ONNX Runtime on the dynamic model: wall and CPU-time (``time.process_time``, all
threads) medians and the ratios dynamic/static, dynamic/ORT and planned/per-call.

Only run it on a quiet machine (it refuses when the 1-minute load average is above ``--max-load``):
    python benchmarks/models.py [--models resnet50,mobilenet_v2,bert|all] [--repeat 20] [--bert-layers 12]
    python benchmarks/models.py --dynamic [--models resnet50,mobilenet_v2,bert,gpt2] [--repeat 20]
    python benchmarks/models.py --smoke [--dynamic]   # tiny versions, 1 repeat: checks the script, measures nothing
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks.common import load_average  # noqa: E402
from ingot.testing import architectures  # noqa: E402
from ingot.testing.zoo import export_module  # noqa: E402

THREADS = 2


# -- architectures (plain torch.nn, in ingot/testing/architectures.py) ------------------------------


def build_models(names, smoke: bool, bert_layers: int):
    """``{name: (torch module, example input)}``; ``smoke`` gives the small (CI) versions of each.

    Example:
        >>> build_models(["squeezenet1_1"], smoke=True, bert_layers=12)["squeezenet1_1"][1].shape  # doctest: +SKIP
        (1, 3, 47, 47)
    """
    out = {}
    for name in names:
        if name not in architectures.NAMES:
            raise SystemExit(f"unknown model {name!r}; choose from {', '.join(architectures.NAMES)}")
        if name == "bert" and not smoke and bert_layers != 12:
            import torch

            torch.manual_seed(0)
            module = architectures.Encoder(bert_layers).eval()
            x = np.random.default_rng(0).standard_normal((1, 128, 768)).astype("float32")
        else:
            module, x = architectures.build(name, "small" if smoke else "full")
        out[name] = (module, x)
    return out


# -- measurements -------------------------------------------------------------------------------


def median_ms(fn, repeat: int, warmup: int = 2) -> float:
    """Median wall time of ``fn()`` in ms over ``repeat`` calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


_RSS_INGOT = """
import sys, numpy as np, ingot
def _hwm():
    # VmHWM is the peak RSS of this process image; ru_maxrss would include the parent's peak,
    # which Linux carries over fork + exec.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
from ingot.driver import model as M
x = np.load(sys.argv[2])
pkg = M.load_package(sys.argv[1])
M.run(pkg, {pkg.inputs[0].name: x})
print(_hwm())
"""

_RSS_ORT = """
import sys, numpy as np, onnxruntime as ort
def _hwm():
    # VmHWM is the peak RSS of this process image; ru_maxrss would include the parent's peak,
    # which Linux carries over fork + exec.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
o = ort.SessionOptions(); o.intra_op_num_threads = 2
s = ort.InferenceSession(sys.argv[1], o, providers=["CPUExecutionProvider"])
s.run(None, {s.get_inputs()[0].name: np.load(sys.argv[2])})
print(_hwm())
"""


def peak_rss_mb(script: str, *args: str) -> float:
    """Peak RSS (MiB) of a fresh Python process running ``script`` (which prints its VmHWM in KiB)."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": str(THREADS)}
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"RSS probe failed: {proc.stderr.strip()[-500:]}")
    return int(proc.stdout.strip().splitlines()[-1]) / 1024.0


def bench_model(name: str, module, x: np.ndarray, repeat: int, workdir: str, use_compile: bool,
                target: str = "llvm") -> dict:
    """All numbers of one model (see the module docstring)."""
    import onnxruntime as ort
    import torch

    import ingot
    from ingot.driver import model as M

    row = {"model": name}
    path = os.path.join(workdir, f"{name}.onnx")
    # Step 1. export
    export_module(module, x, path)
    # Step 2. compile with Ingot and check against ONNX Runtime.
    t0 = time.perf_counter()
    package = M.compile(M.load(path), target=f"{target} -num-cores={THREADS}")
    row["compile_s"] = time.perf_counter() - t0
    pkg_dir = package.export(os.path.join(workdir, f"{name}.ingot"))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"data": x})[0]
    got = list(ingot.run(package, {"data": x}).values())[0]
    row["max_abs_err"] = float(np.max(np.abs(got - expected)))
    # Step 3. latencies, same process, one after the other.
    fn = package.executor()["main"]
    row["ingot_ms"] = median_ms(lambda: fn(x), repeat)
    row["ort_ms"] = median_ms(lambda: sess.run(None, {"data": x}), repeat)
    torch.set_num_threads(THREADS)
    tx = torch.from_numpy(x)
    with torch.no_grad():
        row["torch_ms"] = median_ms(lambda: module(tx), repeat)
        row["torch_compile_ms"] = None
        if use_compile:
            try:
                compiled = torch.compile(module)
                compiled(tx)
                row["torch_compile_ms"] = median_ms(lambda: compiled(tx), repeat)
            except Exception as exc:  # no C++ toolchain / offline cache: report and go on
                row["torch_compile_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
    # Step 4. peak memory of fresh processes that load and run the model once.
    np.save(os.path.join(workdir, f"{name}_x.npy"), x)
    xin = os.path.join(workdir, f"{name}_x.npy")
    row["ingot_rss_mb"] = peak_rss_mb(_RSS_INGOT, pkg_dir, xin)
    row["ort_rss_mb"] = peak_rss_mb(_RSS_ORT, path, xin)
    return row


# -- dynamic axes (--dynamic) -------------------------------------------------------------------

#: Models whose sequence axis (axis 1 of the input) is dynamic too, beside the batch.
SEQUENCE_MODELS = ("bert", "gpt2")


def export_dynamo(module, x: np.ndarray, path: str, dynamic_axes: "tuple[str, ...]") -> str:
    """Export ``module`` with the dynamo exporter (input "data"), axis ``k`` of the input symbolic
    and named ``dynamic_axes[k]`` (none: constant shapes); returns ``path``.

    Example:
        >>> export_dynamo(torch.nn.ReLU(), np.zeros((2, 4), "float32"), "/tmp/r.onnx", ("batch",))  # doctest: +SKIP
        '/tmp/r.onnx'
    """
    import torch

    torch.backends.mha.set_fastpath_enabled(False)  # the fused attention path has no ONNX export
    shapes = ({k: torch.export.Dim(name, min=1, max=4096) for k, name in enumerate(dynamic_axes)},) \
        if dynamic_axes else None
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(x),), path, input_names=["data"], dynamo=True,
                          dynamic_shapes=shapes, external_data=False)
    return path


def interleaved_ms(fns: dict, repeat: int, warmup: int = 2) -> dict:
    """``{name: (median wall ms, median CPU ms)}`` of each ``fns[name]()``, called round by round (one
    call of each per round) so that load changes hit every variant alike; CPU time is
    ``time.process_time`` (all threads of the process, page faults included)."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    wall: dict = {k: [] for k in fns}
    cpu: dict = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall[k].append((time.perf_counter() - t0) * 1e3)
            cpu[k].append((time.process_time() - c0) * 1e3)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in fns}


def bench_dynamic(name: str, module, x: np.ndarray, repeat: int, workdir: str, target: str = "llvm") -> dict:
    """The --dynamic numbers of one model (see the module docstring); ``x`` is its batch-1 input."""
    import onnxruntime as ort

    import ingot
    from ingot import graph as G
    from ingot.driver import model as M

    row = {"model": name}
    axes = ("batch", "seq") if name in SEQUENCE_MODELS else ("batch",)
    # A batch-1 example would let torch.export specialize the batch to 1 (nn.MultiheadAttention).
    dyn_path = export_dynamo(module, np.concatenate([x, x]), os.path.join(workdir, f"{name}.dyn.onnx"), axes)
    static_path = export_dynamo(module, x, os.path.join(workdir, f"{name}.static.onnx"), ())
    full_target = f"{target} -num-cores={THREADS}"
    t0 = time.perf_counter()
    dynamic = M.compile(M.load(dyn_path), target=full_target)
    row["compile_dyn_s"] = time.perf_counter() - t0
    static = M.compile(M.load(static_path), target=full_target)
    ex = dynamic.executable
    assert ex.plans["main"]["memory"] is None, f"{name}: the dynamic export compiled to a static plan"
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    sess = ort.InferenceSession(dyn_path, opts, providers=["CPUExecutionProvider"])
    planned = G.Executor(ex, ingot.cpu())["main"]
    per_call = G.Executor(ex, ingot.cpu(), max_bindings=0)["main"]
    fixed = static.executor()["main"]
    expected = sess.run(None, {"data": x})[0]
    row["max_abs_err"] = float(np.max(np.abs(planned(x).numpy() - expected)))
    row["static_err"] = float(np.max(np.abs(fixed(x).numpy() - expected)))
    times = interleaved_ms({"dynamic": lambda: planned(x), "per_call": lambda: per_call(x),
                            "static": lambda: fixed(x), "ort": lambda: sess.run(None, {"data": x})}, repeat)
    for k, (wall, cpu) in times.items():
        row[f"{k}_ms"], row[f"{k}_cpu_ms"] = wall, cpu
    return row


def markdown_dynamic(rows: list) -> str:
    """The --dynamic results as a Markdown table."""
    lines = ["| model | Ingot dynamic (ms) | Ingot static (ms) | ORT dynamic (ms) | dynamic / static | dynamic / ORT | "
             "per-call alloc (ms) | planned / per-call, wall | planned / per-call, CPU | max abs err vs ORT |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['dynamic_ms']:.2f} | {r['static_ms']:.2f} | {r['ort_ms']:.2f} | "
                     f"{r['dynamic_ms'] / r['static_ms']:.2f}x | {r['dynamic_ms'] / r['ort_ms']:.2f}x | "
                     f"{r['per_call_ms']:.2f} | {r['dynamic_ms'] / r['per_call_ms']:.2f}x | "
                     f"{r['dynamic_cpu_ms'] / r['per_call_cpu_ms']:.2f}x | {r['max_abs_err']:.1e} |")
    return "\n".join(lines)


def markdown(rows: list) -> str:
    """The results as a Markdown table."""
    def f(v, fmt="{:.2f}"):
        return "n/a" if v is None else fmt.format(v)

    lines = ["| model | Ingot compile (s) | Ingot (ms) | ONNX Runtime (ms) | Ingot / ORT | PyTorch eager (ms) | "
             "torch.compile (ms) | peak RSS Ingot (MiB) | peak RSS ORT (MiB) | max abs err vs ORT |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {f(r['compile_s'], '{:.1f}')} | {f(r['ingot_ms'])} | {f(r['ort_ms'])} | "
                     f"{r['ingot_ms'] / r['ort_ms']:.2f}x | {f(r['torch_ms'])} | {f(r.get('torch_compile_ms'))} | "
                     f"{f(r['ingot_rss_mb'], '{:.0f}')} | {f(r['ort_rss_mb'], '{:.0f}')} | {r['max_abs_err']:.1e} |")
    notes = [f"torch.compile on {r['model']}: {r['torch_compile_error']}" for r in rows if r.get("torch_compile_error")]
    return "\n".join(lines + [""] + notes)


def main(argv=None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50,mobilenet_v2,bert",
                   help=f"comma-separated, from {','.join(architectures.NAMES)}; or 'all'")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--bert-layers", type=int, default=12)
    p.add_argument("--no-torch-compile", action="store_true")
    p.add_argument("--smoke", action="store_true", help="tiny models, 1 repeat (checks the script only)")
    p.add_argument("--dynamic", action="store_true",
                   help="export with dynamic axes (batch; batch and sequence for bert/gpt2) and compare Ingot's "
                        "run-time-shape plan with its static plan and ONNX Runtime at batch 1")
    p.add_argument("--max-load", type=float, default=1.0, help="refuse to measure above this load average")
    p.add_argument("--target", default="llvm",
                   help='CPU target for Ingot, e.g. "llvm -mcpu=haswell" (the AVX2 path on an AVX-512 host)')
    args = p.parse_args(argv)
    load = float(load_average()) if load_average() != "?" else 0.0
    if not args.smoke and load > args.max_load:
        print(f"load average {load} > {args.max_load}: the machine is busy, numbers would be noise; "
              f"rerun later (or pass --max-load)", file=sys.stderr)
        return 2
    from ingot.cpu_model import host_cpu
    from ingot.target import Target

    print(f"load average before: {load_average()}; host: {host_cpu().describe()}; Ingot target: {args.target} "
          f"({Target(args.target).cpu.isa})", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ingot-models-") as workdir:
        names = list(architectures.NAMES) if args.models == "all" else args.models.split(",")
        for name, (module, x) in build_models(names, args.smoke, args.bert_layers).items():
            print(f"[{name}] export, compile, measure...", file=sys.stderr, flush=True)
            if args.dynamic:
                rows.append(bench_dynamic(name, module, x, 1 if args.smoke else args.repeat, workdir, args.target))
            else:
                rows.append(bench_model(name, module, x, 1 if args.smoke else args.repeat, workdir,
                                        not args.no_torch_compile and not args.smoke, args.target))
    print(markdown_dynamic(rows) if args.dynamic else markdown(rows))
    print(f"load average after: {load_average()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
