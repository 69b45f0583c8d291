"""LayerNorm rows (BERT's 128 x 768) built by Ingot beside numpy and ONNX Runtime on the same data.

Ingot's kernel is ``ingot.ops.nn.layer_norm`` with its default schedule (`row_norm_rule`: one
parallel loop over rows, the row's sum and sum of squares gathered in one sweep, rstd once per
row); numpy computes the textbook three passes; ONNX Runtime runs a one-node
``LayerNormalization`` model (opset 17) with the same thread count. Medians of repeated windows;
max abs error against float64 numpy.

Usage:
    python benchmarks/layernorm.py [--threads 2] [--rows 128] [--width 768]
"""
from __future__ import annotations

import argparse

import numpy as np

import ingot
from ingot import te
from ingot.ops import nn
from ingot.ops.schedule import default_schedule

from common import banner, ingot_median_seconds, load_average, markdown_table, median_seconds


def reference(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = x64.var(-1, keepdims=True)
    return (x64 - mean) / np.sqrt(var + eps) * gamma + beta


def ort_session(rows: int, width: int, threads: int):
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)
    graph = helper.make_graph([node], "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, width]),
                                             helper.make_tensor_value_info("g", TensorProto.FLOAT, [width]),
                                             helper.make_tensor_value_info("b", TensorProto.FLOAT, [width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, width])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # ONNX Runtime 1.31 reads IR <= 13; onnx 1.23 writes 14
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rows", type=int, default=128)
    p.add_argument("--width", type=int, default=768)
    args = p.parse_args()
    banner(f"LayerNorm {args.rows}x{args.width}, {args.threads} thread(s); load average {load_average()}")
    target = f"llvm -num-cores={args.threads}"
    x = te.placeholder((args.rows, args.width), name="x")
    g = te.placeholder((args.width,), name="g")
    b = te.placeholder((args.width,), name="b")
    func = te.create_prim_func([x, g, b, nn.layer_norm(x, g, b)])
    lib = ingot.build(default_schedule(func, target), target=target)

    rng = np.random.default_rng(0)
    xs = (rng.standard_normal((args.rows, args.width)) * 2 + 100).astype("float32")  # an offset row mean
    gs = rng.standard_normal(args.width).astype("float32")
    bs = rng.standard_normal(args.width).astype("float32")
    ref = reference(xs, gs, bs)
    out = np.empty_like(xs)
    rows = []
    lib["main"](xs, gs, bs, out)
    rows.append(["Ingot", ingot_median_seconds(lib, "main", [xs, gs, bs, out]) * 1e6, np.abs(out - ref).max()])

    def numpy_ln():
        mean = xs.mean(-1, keepdims=True)
        return (xs - mean) / np.sqrt(xs.var(-1, keepdims=True) + 1e-5) * gs + bs

    rows.append(["numpy", median_seconds(numpy_ln) * 1e6, np.abs(numpy_ln() - ref).max()])
    sess = ort_session(args.rows, args.width, args.threads)
    if sess is not None:
        feeds = {"x": xs, "g": gs, "b": bs}
        y = sess.run(None, feeds)[0]
        rows.append(["ONNX Runtime", median_seconds(lambda: sess.run(None, feeds)) * 1e6, np.abs(y - ref).max()])
    base = rows[0][1]
    print(markdown_table(["runtime", "median µs", "vs Ingot", "max abs error vs float64"],
                         [[n, f"{t:.1f}", f"{t / base:.2f}x", f"{e:.1e}"] for n, t, e in rows]))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
