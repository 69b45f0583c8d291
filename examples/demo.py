"""Ingot's main job in one script: compile a model and run it beside ONNX Runtime.

A small ResNet-style network (random weights) is exported from PyTorch to ONNX, then

    model = ingot.load("model.onnx", shape_dict={"data": [1, 3, 64, 64]})
    package = ingot.compile(model, target="llvm -num-cores=2")
    result = ingot.run(package, inputs={"data": x})

and the outputs and latencies are compared with ONNX Runtime's on the same input.

Usage:
    python examples/demo.py [--size 64] [--runs 50]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings

import numpy as np

import ingot


def make_model(path: str, size: int) -> None:
    """Export a small ResNet-style CNN with random weights to ONNX."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, channels: int):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(x + self.bn2(self.conv2(y)))

    net = nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
        Block(32),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        Block(64),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    ).eval()
    torch.manual_seed(0)
    for module in net.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
    example = torch.randn(1, 3, size, size)
    with warnings.catch_warnings():  # the legacy exporter's deprecation notice is not the demo's business
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (example,), path, input_names=["data"], output_names=["logits"], dynamo=False)


def median_ms(fn, runs: int) -> float:
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=64, help="input height and width")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="ingot-demo-")
    path = os.path.join(workdir, "model.onnx")
    print(f"1. exporting a small ResNet-style CNN to {path}")
    make_model(path, args.size)

    print("2. ingot.load → ingot.compile (graph passes, fusion, default schedules, C codegen)")
    start = time.perf_counter()
    model = ingot.load(path, shape_dict={"data": [1, 3, args.size, args.size]})
    package = ingot.compile(model, target="llvm -num-cores=2")
    print(f"   compiled in {time.perf_counter() - start:.1f} s")

    x = np.random.default_rng(0).standard_normal((1, 3, args.size, args.size)).astype("float32")
    print("3. ingot.run, and ONNX Runtime on the same input")
    ours = ingot.run(package, inputs={"data": x})["logits"]

    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    theirs = session.run(None, {"data": x})[0]
    max_diff = float(np.max(np.abs(ours - theirs)))
    print(f"   max |Ingot - ONNX Runtime| = {max_diff:.2e}  (top class {int(ours.argmax())} vs {int(theirs.argmax())})")

    # One runtime at a time, each after a pause: ONNX Runtime's worker threads keep spinning for a while
    # after its last call and would take the second core from Ingot's (and Ingot's from ORT's).
    time.sleep(0.5)
    t_ingot = median_ms(lambda: ingot.run(package, inputs={"data": x}), args.runs)
    time.sleep(0.5)
    t_ort = median_ms(lambda: session.run(None, {"data": x}), args.runs)
    print("4. latency, batch 1, 2 threads (median of %d runs)" % args.runs)
    print(f"   Ingot         {t_ingot:8.3f} ms")
    print(f"   ONNX Runtime  {t_ort:8.3f} ms")
    print(f"   Ingot is {t_ort / t_ingot:.2f}x the speed of ONNX Runtime on this model")
    if max_diff > 1e-3:
        raise SystemExit("outputs differ from ONNX Runtime")


if __name__ == "__main__":
    main()
