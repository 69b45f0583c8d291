"""Whole-model tuning benchmark: ResNet-50, MobileNetV2, a BERT-style encoder (batch 1, 2 threads).

For each model, in one run: ONNX Runtime and PyTorch eager latency, Ingot untuned, then Ingot
after each cumulative tuning budget (default 10, 30 and 60 minutes; the work dir is resumed
between checkpoints, so the 30-minute point costs 20 more minutes), and the tuning curve
(end-to-end latency vs tuning time) as a PNG when matplotlib is installed.

    python benchmarks/tune_models.py                                  # the real run (hours)
    python benchmarks/tune_models.py --models resnet50 --budgets 10m
    python benchmarks/tune_models.py --small --budgets 20s            # a quick check of the script

Models come from ``benchmarks/models.py`` when it defines ``resnet50``, ``mobilenet_v2`` and
``bert_encoder`` (functions returning ``(torch module, example input)``); otherwise from the
compact definitions below (random weights: latency does not depend on them).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import load_average, markdown_table, median_seconds  # noqa: E402

THREADS = 2


# -- model definitions (used when benchmarks/models.py does not provide them) --------------------
def _torch_models(small: bool) -> dict:
    import torch
    from torch import nn

    def conv_bn(cin, cout, k, s=1, groups=1, act=True):
        layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, nn.ReLU6() if act == "relu6" else nn.ReLU()) if act else nn.Sequential(*layers)

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.body = nn.Sequential(conv_bn(cin, width, 1), conv_bn(width, width, 3, stride),
                                      conv_bn(width, cout, 1, act=False))
            self.down = None if stride == 1 and cin == cout else conv_bn(cin, cout, 1, stride, act=False)

        def forward(self, x):
            return torch.relu(self.body(x) + (x if self.down is None else self.down(x)))

    class ResNet50(nn.Module):
        def __init__(self, blocks=(3, 4, 6, 3), base=64):
            super().__init__()
            layers, cin = [conv_bn(3, base, 7, 2), nn.MaxPool2d(3, 2, 1)], base
            for i, n in enumerate(blocks):
                for j in range(n):
                    layers.append(Bottleneck(cin, base * 2 ** i, 2 if j == 0 and i > 0 else 1))
                    cin = base * 2 ** i * 4
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(cin, 1000)

        def forward(self, x):
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, t):
            super().__init__()
            hid = cin * t
            layers = ([conv_bn(cin, hid, 1, act="relu6")] if t != 1 else []) + [
                conv_bn(hid, hid, 3, stride, groups=hid, act="relu6"), conv_bn(hid, cout, 1, act=False)]
            self.body = nn.Sequential(*layers)
            self.res = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.res else self.body(x)

    class MobileNetV2(nn.Module):
        cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

        def __init__(self):
            super().__init__()
            layers, cin = [conv_bn(3, 32, 3, 2, act="relu6")], 32
            for t, c, n, s in self.cfg:
                for j in range(n):
                    layers.append(InvertedResidual(cin, c, s if j == 0 else 1, t))
                    cin = c
            layers.append(conv_bn(cin, 1280, 1, act="relu6"))
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(1280, 1000)

        def forward(self, x):
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))

    class Encoder(nn.Module):
        def __init__(self, d=768, heads=12, ff=3072, layers=12):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", batch_first=True)
            self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

        def forward(self, x):
            return self.enc(x)

    if small:  # the quick check: same architectures, tiny sizes
        return {"resnet50": (ResNet50(blocks=(1, 1, 1, 1), base=8), (1, 3, 32, 32)),
                "mobilenetv2": (MobileNetV2(), (1, 3, 32, 32)),
                "bert": (Encoder(64, 4, 128, 1), (1, 16, 64))}
    return {"resnet50": (ResNet50(), (1, 3, 224, 224)), "mobilenetv2": (MobileNetV2(), (1, 3, 224, 224)),
            "bert": (Encoder(), (1, 128, 768))}


def get_models(names: list, small: bool) -> dict:
    """``{name: (torch module, input shape)}``, from benchmarks/models.py when it has them."""
    try:
        import models as shared  # benchmarks/models.py (another engineer's shared definitions)

        table = {"resnet50": getattr(shared, "resnet50", None), "mobilenetv2": getattr(shared, "mobilenet_v2", None),
                 "bert": getattr(shared, "bert_encoder", None)}
        if not small and all(table[n] is not None for n in names):
            out = {}
            for n in names:
                module, x = table[n]()
                out[n] = (module, tuple(x.shape))
            return out
    except ImportError:
        pass
    local = _torch_models(small)
    return {n: local[n] for n in names}


# -- measurements ----------------------------------------------------------------------------------
def export_onnx(module, shape, path: str) -> np.ndarray:
    import torch

    torch.manual_seed(0)
    module.eval()
    torch.backends.mha.set_fastpath_enabled(False)  # the fused MHA path has no ONNX export
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(x),), path, input_names=["data"], dynamo=False, opset_version=17)
    return x


def time_ort(path: str, x: np.ndarray) -> "float | None":
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = THREADS, 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return median_seconds(lambda: sess.run(None, {"data": x}), repeat=5, min_seconds=0.2)


def time_torch(module, x: np.ndarray) -> "float | None":
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(THREADS)
    t = torch.from_numpy(x)
    with torch.no_grad():
        return median_seconds(lambda: module(t), repeat=5, min_seconds=0.2)


def time_ingot(model, target: str, x: np.ndarray, records=None) -> "tuple[float, str]":
    from ingot.driver import model as M

    package = M.compile(model, target, tuning_records=records)
    fn = package.executor()["main"]
    return median_seconds(lambda: fn(x), repeat=5, min_seconds=0.2), str(package.schedule_report)


def bench_model(name: str, module, shape, args) -> dict:
    """One model: baselines, untuned, then each cumulative tuning checkpoint."""
    import ingot
    from ingot.driver import model as M
    from ingot.tune.tasks.records import parse_duration

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{name}.onnx")
    x = export_onnx(module, shape, path)
    model = M.load(path)
    result = {"model": name, "shape": list(shape), "ort_ms": None, "torch_ms": None, "points": []}
    t = time_ort(path, x)
    result["ort_ms"] = t * 1e3 if t else None
    t = time_torch(module, x)
    result["torch_ms"] = t * 1e3 if t else None
    lat, _ = time_ingot(model, args.target, x)
    result["points"].append({"tuning_s": 0.0, "latency_ms": lat * 1e3, "estimate_ms": None, "report": "untuned"})
    print(f"{name}: ORT {result['ort_ms']} ms, PyTorch {result['torch_ms']} ms, Ingot untuned {lat * 1e3:.3f} ms",
          flush=True)
    work = os.path.join(args.out, f"tune_{name}")
    spent = 0.0
    for budget in args.budgets.split(","):
        more = parse_duration(budget) - spent
        if more <= 0:
            continue
        t0 = time.perf_counter()
        records = ingot.tune(model, target=args.target, time_budget=more, work_dir=work, verbose=args.verbose)
        spent += time.perf_counter() - t0
        lat, report = time_ingot(model, args.target, x, records)
        result["points"].append({"tuning_s": spent, "latency_ms": lat * 1e3,
                                 "estimate_ms": records.estimated_latency_us / 1e3, "report": report})
        print(f"{name}: after {spent / 60:.1f} min of tuning: {lat * 1e3:.3f} ms ({report})", flush=True)
    return result


def plot(results: list, path: str) -> "str | None":
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no tuning-curve PNG (pip install matplotlib)", flush=True)
        return None
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4), squeeze=False)
    for ax, r in zip(axes[0], results):
        pts = r["points"]
        ax.plot([p["tuning_s"] / 60 for p in pts], [p["latency_ms"] for p in pts], "o-", label="Ingot")
        for key, label, style in (("ort_ms", "ONNX Runtime", "--"), ("torch_ms", "PyTorch eager", ":")):
            if r[key]:
                ax.axhline(r[key], linestyle=style, color="gray" if key == "ort_ms" else "black", label=label)
        ax.set_title(f"{r['model']} (batch 1, {THREADS} threads)")
        ax.set_xlabel("tuning time (min)")
        ax.set_ylabel("latency (ms)")
        ax.set_yscale("log")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def main(argv: "list | None" = None) -> list:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50,mobilenetv2,bert")
    p.add_argument("--budgets", default="10m,30m,60m", help="cumulative tuning checkpoints per model")
    p.add_argument("--target", default=f"llvm -num-cores={THREADS}")
    p.add_argument("--out", default="tune_models_out", help="ONNX files, work dirs, JSON results, PNG")
    p.add_argument("--small", action="store_true", help="tiny versions of the models (checks the script)")
    p.add_argument("--verbose", type=int, default=1)
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
    print(f"load average before: {load_average()}", flush=True)
    results = []
    for name, (module, shape) in get_models(args.models.split(","), args.small).items():
        results.append(bench_model(name, module, shape, args))
    print(f"load average after: {load_average()}", flush=True)
    header = ["model", "ONNX Runtime (ms)", "PyTorch (ms)"] + [
        "untuned (ms)" if p["tuning_s"] == 0 else f"tuned {p['tuning_s'] / 60:.0f} min (ms)"
        for p in results[0]["points"]]
    rows = [[r["model"], f"{r['ort_ms']:.2f}" if r["ort_ms"] else "-", f"{r['torch_ms']:.2f}" if r["torch_ms"] else "-"]
            + [f"{p['latency_ms']:.2f}" for p in r["points"]] for r in results]
    print(markdown_table(header, rows))
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    png = plot(results, os.path.join(args.out, "tuning_curve.png"))
    if png:
        print(f"tuning curve: {png}")
    return results


if __name__ == "__main__":
    main()
