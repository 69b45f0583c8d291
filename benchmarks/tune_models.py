"""Whole-model tuning benchmark: ResNet-50, MobileNetV2, a BERT-style encoder (batch 1, 2 threads).

For each model, in one run: ONNX Runtime and PyTorch eager latency, Ingot untuned, then Ingot
after each cumulative tuning budget (default 10 and 30 minutes; one work dir per model, resumed
between checkpoints, so the 30-minute point costs 20 more minutes, and a rerun of the script
continues where the last one stopped), each point checked against ONNX Runtime's output, the
tuner's end-to-end estimate beside the measured latency, and the tuning curve as a PNG when
matplotlib is installed. Each tuning run ends with in-model validation (`ingot.workflow.validate_in_model`:
tuned schedules that lose inside the model revert to the default); each checkpoint is timed both
ways, validated (what ``ingot.compile`` applies) and "not validated" (every isolated winner applied),
so the table shows what validation gained.

Timing: every latency is the MIN over many calls (other processes only ever add time). The figures
in the table come from a final interleaved measurement: ONNX Runtime, PyTorch, Ingot untuned and Ingot
at each checkpoint (each package compiled when its checkpoint was reached and kept) are timed in turn
for ``--rounds`` rounds and each keeps its fastest call. Timing them minutes apart is not enough:
this shared machine drifts by ±5% over the tens of minutes a tuning run takes, which is as large as
the effect measured (``latency_at_checkpoint_ms`` keeps the figure taken right after tuning). A
second compile of the untuned model runs beside them as the noise control: how far two packages of
the same code lie apart bounds what a tuned-vs-untuned difference can show. Results are appended to
``OUT/results.json`` as they come (one model crashing keeps the others' rows; rerunning with
``--resume`` skips finished points).

    python benchmarks/tune_models.py --budgets 10m,15m                 # the real run (~1 h)
    python benchmarks/tune_models.py --models resnet50 --budgets 10m
    python benchmarks/tune_models.py --small --budgets 30s,60s          # a quick check of the script

Models: ``ingot/testing/architectures.py`` (random weights: latency does not depend on them).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks.common import load_average, markdown_table  # noqa: E402
from ingot.testing.zoo import export_module  # noqa: E402

THREADS = 2
#: Names on the command line -> names in ingot/testing/architectures.py.
MODELS = {"resnet50": "resnet50", "mobilenetv2": "mobilenet_v2", "bert": "bert"}


# -- timing ----------------------------------------------------------------------------------------
def min_seconds(fn, min_total_s: float = 2.0, max_calls: int = 2000) -> float:
    """The fastest of many calls of ``fn`` (after two warm-up calls), calling for ``min_total_s``.

    Example:
        >>> min_seconds(lambda: sum(range(100)), min_total_s=0.01) < 1e-3
        True
    """
    fn()
    fn()
    best, start, calls = float("inf"), time.perf_counter(), 0
    while calls < 5 or (time.perf_counter() - start < min_total_s and calls < max_calls):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        calls += 1
    return best


def ort_session(path: str):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = THREADS, 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def baseline_calls(sess, module, x: np.ndarray) -> dict:
    """{"ort_ms": ..., "torch_ms": ...}: zero-argument callables running ONNX Runtime and PyTorch
    eager (no-grad, THREADS threads) on ``x``; a runtime that is not installed is left out."""
    calls = {}
    if sess is not None:
        calls["ort_ms"] = lambda: sess.run(None, {"data": x})
    try:
        import torch
    except ImportError:
        return calls
    torch.set_num_threads(THREADS)
    t = torch.from_numpy(x)

    def torch_call():
        with torch.no_grad():
            module(t)

    calls["torch_ms"] = torch_call
    return calls


def time_baselines(sess, module, x: np.ndarray) -> dict:
    """ONNX Runtime and PyTorch eager latency (ms), min over calls."""
    out = {"ort_ms": None, "torch_ms": None}
    out.update({k: min_seconds(call) * 1e3 for k, call in baseline_calls(sess, module, x).items()})
    return out


def time_ingot(model, target: str, x: np.ndarray, expected, records=None) -> "tuple[dict, object]":
    """Compile (with ``records`` when given), check against ONNX Runtime, time (ms); returns the point
    and the compiled model's callable (for the final interleaved timing)."""
    from ingot.workflow import model as M

    t = time.perf_counter()
    package = M.compile(model, target, tuning_records=records)
    compile_s = time.perf_counter() - t
    fn = package.executor()["main"]
    out = fn(x)
    out = out[0] if isinstance(out, (list, tuple)) else out
    out = np.asarray(out.numpy() if hasattr(out, "numpy") else out)
    err = float(np.abs(out - expected).max() / max(1e-6, float(np.abs(expected).max()))) if expected is not None else None
    report = getattr(package, "schedule_report", None) or {}
    if records is None:  # the graph's own report: {kernel: how}; only the counts are worth a column
        counts: dict = {}
        for how in report.values():
            counts[how] = counts.get(how, 0) + 1
        report = f"{len(report)} kernels: " + ", ".join(f"{n} {how}" for how, n in sorted(counts.items()))
    latency_ms = min_seconds(lambda: fn(x)) * 1e3
    return {"latency_ms": latency_ms, "latency_at_checkpoint_ms": latency_ms, "compile_s": compile_s,
            "rel_err_vs_ort": err, "report": str(report)}, fn


def interleaved_ms(contestants: dict, rounds: int, per_round_s: float = 0.5) -> dict:
    """{name: fastest ms} of zero-argument callables timed in turn, ``rounds`` times (the order
    reversed every other round), ``per_round_s`` seconds of calls each time.

    Example:
        >>> sorted(interleaved_ms({"a": lambda: None, "b": lambda: None}, rounds=2, per_round_s=0.01))
        ['a', 'b']
    """
    best = {name: float("inf") for name in contestants}
    names = list(contestants)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            best[name] = min(best[name], min_seconds(contestants[name], min_total_s=per_round_s) * 1e3)
    return best


# -- one model -------------------------------------------------------------------------------------
def bench_model(name: str, args, save) -> dict:
    """One model: baselines, untuned, each cumulative tuning checkpoint; ``save(result)`` after each."""
    import ingot
    from ingot.workflow import model as M
    from ingot.tune.tasks.records import parse_duration, read_tasks_file

    from ingot.testing import architectures

    module, x = architectures.build(MODELS[name], "small" if args.small else "full")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{name}{'_small' if args.small else ''}.onnx")
    export_module(module, x, path)
    model = M.load(path)
    sess = ort_session(path)
    expected = sess.run(None, {"data": x})[0] if sess is not None else None
    result = {"model": name, "shape": list(x.shape), "small": args.small, "points": [], "error": None,
              "load_before": load_average()}
    result.update(time_baselines(sess, module, x))
    save(result)
    point, untuned_fn = time_ingot(model, args.target, x, expected)
    # A second compile of the same untuned model is the noise control of the final timing: two
    # packages of identical code differ by placement alone (weights, code), ~1-2% on this VM.
    runs = {"untuned": untuned_fn, "untuned, 2nd compile": time_ingot(model, args.target, x, None)[1]}
    result["points"].append({"budget": "untuned", "tuning_s": 0.0, "estimate_ms": None, **point})
    save(result)
    print(f"{name}: ORT {result['ort_ms']} ms, PyTorch {result['torch_ms']} ms, Ingot untuned "
          f"{point['latency_ms']:.3f} ms", flush=True)
    work = os.path.join(args.out, f"tune_{name}{'_small' if args.small else ''}")
    for budget in args.budgets.split(","):
        # Cumulative: the work dir remembers how long it was tuned (also across reruns of this script).
        spent = float(read_tasks_file(work).get("total_elapsed_s", 0.0) or 0.0)
        more = parse_duration(budget) - spent
        if more > 5.0:
            ingot.workflow.tune(model, target=args.target, time_budget=more, work_dir=work, verbose=args.verbose)
        records = ingot.tune.TuningRecords(work)
        if more <= 5.0:  # resumed at a finished checkpoint: validate what an older run left unvalidated
            ingot.workflow.validate_in_model(model, records, args.target, verbose=args.verbose)
            records = ingot.tune.TuningRecords(work)
        raw = ingot.tune.apply_records(records, args.target, in_model=False)
        _, runs[f"{budget}, not validated"] = time_ingot(model, args.target, x, None, raw)
        point, runs[budget] = time_ingot(model, args.target, x, expected, records)
        point["in_model"] = records.info.get("in_model")
        point.update(budget=budget, tuning_s=float(records.info.get("total_elapsed_s", 0.0) or 0.0),
                     estimate_ms=records.estimated_latency_us / 1e3,
                     default_estimate_ms=records.default_latency_us / 1e3)
        result["points"].append(point)
        save(result)
        print(f"{name}: after {point['tuning_s'] / 60:.1f} min of tuning: {point['latency_ms']:.3f} ms (estimate "
              f"{point['estimate_ms']:.3f} ms of kernels, untuned kernels {point['default_estimate_ms']:.3f} ms; "
              f"{point['report']})", flush=True)
    # The final figures: every contestant timed in turn (see the module docstring).
    contestants = {f"ingot {b}": (lambda fn=fn: fn(x)) for b, fn in runs.items()}
    contestants.update(baseline_calls(sess, module, x))
    final = interleaved_ms(contestants, args.rounds)
    for key in ("ort_ms", "torch_ms"):
        if key in final:
            result[key] = final[key]
    for point in result["points"]:
        point["latency_ms"] = final.get(f"ingot {point['budget']}", point["latency_ms"])
        point["not_validated_ms"] = final.get(f"ingot {point['budget']}, not validated")
    result["untuned_recompiled_ms"] = final.get("ingot untuned, 2nd compile")
    print(f"{name}: interleaved over {args.rounds} rounds: "
          + ", ".join(f"{k} {v:.3f} ms" for k, v in final.items()), flush=True)
    result["load_after"] = load_average()
    save(result)
    return result


# -- report ----------------------------------------------------------------------------------------
def table(results: list) -> str:
    """The Markdown table: baselines, untuned, each budget, and Ingot's best vs ORT / PyTorch."""
    budgets = []
    for r in results:
        for p in r["points"]:
            if p["budget"] not in budgets:
                budgets.append(p["budget"])
    tuned = [b for b in budgets if b != "untuned"]
    header = (["model", "ONNX Runtime (ms)", "PyTorch (ms)"] + [f"Ingot {b} (ms)" for b in budgets]
              + ["best vs ORT", "best vs PyTorch", "estimate (ms)", "schedules", "untuned, 2nd compile (noise control)"]
              + [f"Ingot {b} not validated (ms)" for b in tuned])
    rows = []
    for r in results:
        by = {p["budget"]: p for p in r["points"]}
        lat = [p["latency_ms"] for p in r["points"]]
        best = min(lat) if lat else None
        last = r["points"][-1] if r["points"] else {}

        def ratio(base, best=best):
            return f"{base / best:.2f}x" if base and best else "-"

        rows.append([r["model"] + (" (failed: see results.json)" if r.get("error") else ""),
                     f"{r['ort_ms']:.2f}" if r.get("ort_ms") else "-",
                     f"{r['torch_ms']:.2f}" if r.get("torch_ms") else "-"]
                    + [f"{by[b]['latency_ms']:.2f}" if b in by else "-" for b in budgets]
                    + [ratio(r.get("ort_ms")), ratio(r.get("torch_ms")),
                       f"{last['estimate_ms']:.2f}" if last.get("estimate_ms") else "-",
                       last.get("report", "").replace("schedules: ", ""),
                       f"{r['untuned_recompiled_ms']:.2f}" if r.get("untuned_recompiled_ms") else "-"]
                    + [f"{by[b]['not_validated_ms']:.2f}" if by.get(b, {}).get("not_validated_ms") else "-"
                       for b in tuned])
    return markdown_table(header, rows)


def plot(results: list, path: str) -> "str | None":
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no tuning-curve PNG (pip install matplotlib)", flush=True)
        return None
    results = [r for r in results if r["points"]]
    if not results:
        return None
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4), squeeze=False)
    for ax, r in zip(axes[0], results):
        pts = r["points"]
        ax.plot([p["tuning_s"] / 60 for p in pts], [p["latency_ms"] for p in pts], "o-", label="Ingot (measured)")
        raw = [(p["tuning_s"] / 60, p["not_validated_ms"]) for p in pts if p.get("not_validated_ms")]
        if raw:
            ax.plot(*zip(*raw), "s--", alpha=0.6, label="Ingot, not validated")
        est = [(p["tuning_s"] / 60, p["estimate_ms"]) for p in pts if p.get("estimate_ms")]
        if est:
            ax.plot(*zip(*est), "x:", label="Ingot (tuner's kernel estimate)")
        # The y range fits Ingot and ONNX Runtime; a baseline far above (PyTorch eager is 2-6x
        # slower) would squash the curve, so it is written in the title instead of drawn.
        shown = [y for _, y in raw + est] + [p["latency_ms"] for p in pts] + [r.get("ort_ms") or 0]
        top = 1.15 * max(shown)
        off_scale = []
        for key, label, style in (("ort_ms", "ONNX Runtime", "--"), ("torch_ms", "PyTorch eager", ":")):
            if r.get(key) and r[key] <= top:
                ax.axhline(r[key], linestyle=style, color="gray" if key == "ort_ms" else "black", label=label)
            elif r.get(key):
                off_scale.append(f"{label} {r[key]:.1f} ms")
        ax.set_ylim(0, top)
        ax.set_title(f"{r['model']} (batch 1, {THREADS} threads)" + ("\n(off scale: " + ", ".join(off_scale) + ")"
                                                                     if off_scale else ""), fontsize=10)
        ax.set_xlabel("tuning time (min)")
        ax.set_ylabel("latency (ms)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def main(argv: "list | None" = None) -> list:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50,mobilenetv2,bert", help=f"comma-separated, from {', '.join(MODELS)}")
    p.add_argument("--budgets", default="10m,30m", help="cumulative tuning checkpoints per model (10m,30m: 30 min in all)")
    p.add_argument("--target", default=f"llvm -num-cores={THREADS}")
    p.add_argument("--out", default="tune_models_out", help="ONNX files, work dirs, results.json, PNG")
    p.add_argument("--small", action="store_true", help="tiny versions of the models (checks the script)")
    p.add_argument("--verbose", type=int, default=1)
    p.add_argument("--rounds", type=int, default=8, help="rounds of the final interleaved timing")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; choose from {', '.join(MODELS)}")
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "results.json")
    try:
        with open(json_path) as f:
            stored = {(r["model"], r.get("small", False)): r for r in json.load(f)}
    except (OSError, ValueError):
        stored = {}

    def save(result: dict) -> None:
        # Rewritten after every point (atomically): a crash or a kill keeps everything measured so far.
        stored[(result["model"], result.get("small", False))] = result
        tmp = json_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(list(stored.values()), f, indent=1)
        os.replace(tmp, json_path)

    print(f"load average before: {load_average()}", flush=True)
    results = []
    for name in names:
        try:
            results.append(bench_model(name, args, save))
        except Exception as err:  # noqa: BLE001 - one model failing must not lose the others
            traceback.print_exc()
            failed = stored.get((name, args.small)) or {"model": name, "small": args.small, "points": []}
            failed["error"] = f"{type(err).__name__}: {err}"
            save(failed)
            results.append(failed)
    print(f"load average after: {load_average()}", flush=True)
    print(table(results))
    png = plot(results, os.path.join(args.out, "tuning_curve.png"))
    if png:
        print(f"tuning curve: {png}")
    return results


if __name__ == "__main__":
    main()
