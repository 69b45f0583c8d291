"""ResNet-50 / MobileNetV2 convolution layers: Ingot's default schedule vs PyTorch (and ONNX
Runtime when installed), batch 1, fp32, NCHW, 2 threads.

Every layer is ``relu(conv2d(x, w) + bias)`` — the fused kernel the graph compiler hands to
``default_schedule`` — built with ``ingot.ops.schedule.default_schedule``. By default the weight
is pre-packed as the graph's PackWeights pass does for constant weights (``conv2d_packed_weight``
/ ``depthwise_conv2d_packed_weight`` reading ``[O/P, C, KH, KW, P]`` panels, packed once with
numpy outside the timed call); ``--weights per-call`` times the plain OIHW conv whose schedule
packs the weights inside every call. Columns: the rule the
conv block got, GFLOP/s of Ingot / PyTorch (``torch.nn.functional.conv2d`` + bias + relu,
``torch.set_num_threads(2)``) / ONNX Runtime, and Ingot's ratio to the faster reference.

``--check`` builds every layer, compares with PyTorch and reports the micro-kernel of the
assembly (zmm FMAs, stack accesses) without timing anything.

``--layout nhwc`` times the NHWC kernels the graph builds for CPU conv networks
(``conv2d_nhwc_packed_weight`` with ``[O/P, KH, KW, C, P]`` panels, depthwise
``conv2d_nhwc(groups=C)``; `ingot.ops.schedule.conv_nhwc`) on the same layers plus ResNet-50's
1x1 layers, MobileNetV2's 1x1 expand/project layers and the 7x7 stride-2 stem, beside PyTorch
(channels_last and default NCHW) and ONNX Runtime; times are the MIN over interleaved rounds of
short samples (``--sample-seconds``: single calls; robust to other processes on the machine), and
the load average is printed before and after.

Usage:
    python benchmarks/conv2d.py            # the table (run on a quiet machine: load < 1)
    python benchmarks/conv2d.py --check    # numerics + assembly only
    python benchmarks/conv2d.py --weights per-call   # plain OIHW weights (packing inside the kernel)
    python benchmarks/conv2d.py --layout nhwc [--check] [--threads 1] [--only 1x1]
    python benchmarks/conv2d.py --layout nhwc --only 1x1 --versus-order rows   # default vs rows order
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ingot  # noqa: E402
from ingot import ops, te  # noqa: E402
import ingot.ops.packed  # noqa: E402,F401 - ops.packed

# name, in channels, size, out channels, kernel, stride, groups
LAYERS = [
    ("res2 3x3", 64, 56, 64, 3, 1, 1),
    ("res2 1x1 expand", 64, 56, 256, 1, 1, 1),
    ("res3 3x3", 128, 28, 128, 3, 1, 1),
    ("res3 3x3 stride 2", 128, 56, 128, 3, 2, 1),
    ("res4 3x3", 256, 14, 256, 3, 1, 1),
    ("res4 1x1 stride 2 (down)", 512, 28, 1024, 1, 2, 1),
    ("res5 3x3", 512, 7, 512, 3, 1, 1),
    ("mbv2 dw 3x3 112", 96, 112, 96, 3, 2, 96),
    ("mbv2 dw 3x3 28", 192, 28, 192, 3, 1, 192),
    ("mbv2 dw 3x3 14", 576, 14, 576, 3, 1, 576),
]


# NHWC mode: the same layers plus the 1x1 layers of ResNet-50, MobileNetV2's 1x1 expand/project
# layers and the 7x7 stride-2 stem (name, in channels, size, out channels, kernel, stride, groups)
LAYERS_NHWC = LAYERS + [
    ("res2 1x1 reduce", 256, 56, 64, 1, 1, 1),
    ("res4 1x1 expand", 256, 14, 1024, 1, 1, 1),
    ("res5 1x1 expand", 512, 7, 2048, 1, 1, 1),
    ("res5 1x1 reduce", 2048, 7, 512, 1, 1, 1),
    ("mbv2 1x1 expand 56", 24, 56, 144, 1, 1, 1),
    ("mbv2 1x1 project 56", 144, 56, 24, 1, 1, 1),
    ("mbv2 1x1 expand 28", 32, 28, 192, 1, 1, 1),
    ("mbv2 1x1 project 28", 192, 28, 32, 1, 1, 1),
    ("mbv2 1x1 expand 14", 96, 14, 576, 1, 1, 1),
    ("mbv2 1x1 project 14", 576, 14, 96, 1, 1, 1),
    ("mbv2 1x1 expand 7", 160, 7, 960, 1, 1, 1),
    ("mbv2 1x1 project 7", 960, 7, 160, 1, 1, 1),
    ("mbv2 1x1 last 7", 320, 7, 1280, 1, 1, 1),
    ("stem 7x7 stride 2", 3, 224, 64, 7, 2, 1),
    # the rest of ResNet-50's 1x1 layers (session 6: "pixels" loop order at OW 28/56)
    ("res2 1x1 64->64", 64, 56, 64, 1, 1, 1),
    ("res3 1x1 256->128 @56", 256, 56, 128, 1, 1, 1),
    ("res3 1x1 stride 2 (down) 256->512", 256, 56, 512, 1, 2, 1),
    ("res3 1x1 expand 128->512", 128, 28, 512, 1, 1, 1),
    ("res3 1x1 reduce 512->128", 512, 28, 128, 1, 1, 1),
    ("res4 1x1 reduce 1024->256", 1024, 14, 256, 1, 1, 1),
    ("res5 1x1 stride 2 (down) 1024->2048", 1024, 14, 2048, 1, 2, 1),
]


def _pack(layer, packed_weights: bool):
    """``w -> the array the kernel takes`` (PackWeights' layout when ``packed_weights``), or None
    when the layer keeps the plain OIHW operator (PackWeights would not rewrite it either)."""
    from ingot.graph.transform.pack_weights import default_panel
    from ingot.ops import packed

    _, c, hw, o, k, s, g = layer
    panel, lanes = default_panel()
    if not packed_weights:
        return None
    if g == 1 and o % lanes == 0:
        p = panel if o % panel == 0 else lanes
        return lambda w: packed.pack_conv2d_weight(w, p)
    if g == c == o and c % lanes == 0:
        return lambda w: packed.pack_depthwise_weight(w, lanes)
    return None


def layer_func(c: int, hw: int, o: int, k: int, s: int, g: int, packed_weights: bool = True):
    """The fused PrimFunc ``relu(conv2d_nchw(x, w) + bias)`` of one layer, the shapes of its
    arguments (the weight in OIHW) and the weight packing function (None: plain OIHW)."""
    pack = _pack((None, c, hw, o, k, s, g), packed_weights)
    x = te.placeholder((1, c, hw, hw), name="x")
    w_shape = (o, c // g, k, k)
    w = te.placeholder(w_shape if pack is None else pack(np.zeros(w_shape, "float32")).shape, name="w")
    b = te.placeholder((1, o, 1, 1), name="bias")
    if pack is None:
        conv = ops.nn.conv2d_nchw(x, w, strides=s, padding=k // 2, groups=g)
    elif g == 1:
        conv = ops.packed.conv2d_nchw_packed_weight(x, w, strides=s, padding=k // 2)
    else:
        conv = ops.packed.depthwise_conv2d_nchw_packed_weight(x, w, strides=s, padding=k // 2)
    y = ops.relu(ops.add(conv, b))
    shapes = [tuple(int(d) for d in t.shape) for t in (x, w, b, y)]
    shapes[1] = w_shape
    return te.create_prim_func([x, w, b, y]), shapes, pack


def build(layer, threads: int = 2, packed_weights: bool = True):
    """(schedule, schedule log, built module, shapes, weight packing) of a layer's default schedule."""
    from ingot.ops.schedule import schedule_blocks
    from ingot.target import Target
    from ingot.tir.schedule import Schedule

    func, shapes, pack = layer_func(*layer[1:], packed_weights=packed_weights)
    log: list = []
    target = f"llvm -num-cores={threads}"
    sch = schedule_blocks(Schedule(func), Target(target), log=log)
    return sch, log, ingot.build(sch.mod, target), shapes, pack


def _conv_rule(log) -> str:
    rules = dict((n, r) for n, r, _ in log)
    return str(rules.get("conv2d_nchw") or rules.get("depthwise_conv2d_nchw"))


def flops(layer) -> float:
    _, c, hw, o, k, s, g = layer
    oh = (hw + 2 * (k // 2) - k) // s + 1
    return 2.0 * o * oh * oh * (c // g) * k * k


def torch_reference(layer, x, w, b):
    import torch

    _, c, hw, o, k, s, g = layer
    with torch.no_grad():
        return torch.relu(torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=s,
                                                     padding=k // 2, groups=g) + torch.from_numpy(b)).numpy()


def _inputs(shapes):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(sh).astype("float32") for sh in shapes[:3]] + [np.zeros(shapes[3], "float32")]


def check(packed_weights: bool = True) -> None:
    from gemm import micro_kernel_report

    for layer in LAYERS:
        sch, log, lib, shapes, pack = build(layer, packed_weights=packed_weights)
        x, w, b, y = _inputs(shapes)
        lib["main"](x, w if pack is None else pack(w), b, y)
        np.testing.assert_allclose(y, torch_reference(layer, x, w, b), rtol=1e-4, atol=1e-3)
        copies = [n for n in sch.state.blocks("main") if n.endswith("_global")]
        print(f"{layer[0]:26s} ok  rule={_conv_rule(log):13s} per-call copies={copies} "
              f"micro-kernel: {json.dumps(micro_kernel_report(sch))}")


# -- NHWC --------------------------------------------------------------------------------------


def nhwc_layer_func(c: int, hw: int, o: int, k: int, s: int, g: int):
    """``relu(conv2d_nhwc(x, w) + bias)`` as the graph builds it for one layer: the PrimFunc,
    argument shapes (weight in HWIO) and ``hwio -> kernel weight`` (PackWeights' NHWC panels of
    P = 32, else 16, output channels; depthwise and ragged channel counts keep HWIO)."""
    from ingot.graph.transform.pack_weights import default_panel
    from ingot.ops import packed

    panel, lanes = default_panel()
    x = te.placeholder((1, hw, hw, c), name="x")
    b = te.placeholder((o,), name="bias")
    w_shape = (k, k, c // g, o)
    p = panel if o % panel == 0 else lanes if o % lanes == 0 else None
    if g == 1 and p is not None:
        def pack(w, p=p):
            return packed.pack_conv2d_nhwc_weight(w, p)
        w = te.placeholder((o // p, k, k, c, p), name="w")
        conv = packed.conv2d_nhwc_packed_weight(x, w, strides=s, padding=k // 2)
    else:
        def pack(w):
            return w
        w = te.placeholder(w_shape, name="w")
        conv = ops.nn.conv2d_nhwc(x, w, strides=s, padding=k // 2, groups=g)
    y = ops.relu(ops.add(conv, b))
    shapes = [tuple(int(d) for d in t.shape) for t in (x, w, b, y)]
    shapes[1] = w_shape
    return te.create_prim_func([x, w, b, y]), shapes, pack, conv.op.name


def nhwc_build(layer, threads: int = 2, order: "str | None" = None):
    """(schedule, log, module, shapes, pack, conv block name) of an NHWC layer's default schedule
    (``order``: `conv_nhwc_rule`'s loop order forced to "rows"/"oc"/"pixels", other knobs default)."""
    from ingot.ir.transform import PassContext
    from ingot.ops.schedule import conv_nhwc, schedule_blocks
    from ingot.target import Target
    from ingot.tir.schedule import Schedule

    func, shapes, pack, conv_name = nhwc_layer_func(*layer[1:])
    log: list = []
    target = f"llvm -num-cores={threads}"
    # a forced order turns the special tiles (the 7x7 1x1 two-panel tile, ...) off: they are default-only choices
    config = {} if order is None else {conv_nhwc.POLICY_CONFIG: conv_nhwc.ConvNhwcPolicy(order=order)}
    with PassContext(config=config):
        sch = schedule_blocks(Schedule(func), Target(target), log=log)
    return sch, log, ingot.build(sch.mod, target), shapes, pack, conv_name


def _conv_params(layer, threads: int, order: "str | None" = None) -> str:
    """The `default_conv_params` a layer's conv gets (as text), or "-" outside `conv_nhwc_rule`."""
    from ingot.ops.schedule import conv_nhwc
    from ingot.ops.schedule.analysis import analyze_block
    from ingot.ops.schedule.conv_nhwc import analyze_conv_nhwc, default_conv_params, fit_conv_tile
    from ingot.target import Target
    from ingot.tir.schedule import Schedule

    cpu = Target(f"llvm -num-cores={threads}").cpu
    func, _, _, conv_name = nhwc_layer_func(*layer[1:])
    sch = Schedule(func)
    try:
        shape = analyze_conv_nhwc(sch, conv_name, analyze_block(sch, sch.get_block(conv_name)), cpu.lanes("float32"))
        shape = fit_conv_tile(shape, cpu, conv_name)
        p = default_conv_params(shape, cpu, order=order)
    except Exception:  # noqa: BLE001 - not a conv_nhwc_rule layer (depthwise, ragged channels)
        return "-"
    if order is None and conv_nhwc._two_panel_1x1(shape, cpu) and conv_nhwc._stride_1(sch, conv_name, shape):
        return f"oc {shape.ow}x{2 * shape.nvec} kc={conv_nhwc.two_panel_kc(shape.nr, cpu)} (two panels)"
    return f"{p.order} {p.mr}x{shape.nvec} kc={p.kc}"


def nhwc_versus(layers, threads: int, rounds: int, order: str, sample_seconds: float = 0.0005) -> None:
    """Default schedule vs the same with the loop order forced to ``order`` (e.g. "rows", the
    1x1 default before "pixels"), interleaved, MIN over ``rounds``; a Markdown table + load."""
    from common import banner, load_average, markdown_table

    banner(f"NHWC conv layers ({threads} threads): default vs order={order!r}; MIN over {rounds} "
           "interleaved rounds")
    rows = []
    for layer in layers:
        libs = []
        for forced in (None, order):
            _, _, lib, shapes, pack, _ = nhwc_build(layer, threads, forced)
            x, w, b, y = _nhwc_inputs(layer, shapes)
            lib["main"](x, pack(w), b, y)
            ref, _, _ = _nhwc_reference(layer, x, w, b)
            np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
            libs.append(lambda f=lib["main"], a=(x, pack(w), b, y): f(*a))
        t = [1e9, 1e9]
        for _ in range(rounds):
            for i, fn in enumerate(libs):
                t[i] = min(t[i], _min_seconds(fn, sample_seconds))
        f = flops(layer) / 1e9
        rows.append([layer[0], _conv_params(layer, threads), _conv_params(layer, threads, order),
                     f"{t[0] * 1e6:.0f}", f"{t[1] * 1e6:.0f}", f"{f / t[0]:.1f}", f"{t[0] / t[1]:.3f}"])
        print(f"  {layer[0]}: {t[0] / t[1]:.3f}", flush=True)
    print(markdown_table(["layer", "default", f"order={order}", "default µs", f"{order} µs",
                          "default GFLOP/s", "default / forced"], rows))
    print(f"load average after: {load_average()}")


def _nhwc_inputs(layer, shapes):
    """x (NHWC), w (HWIO), bias, y and the OIHW weight / NCHW input of the references."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shapes[0]).astype("float32")
    w = (rng.standard_normal(shapes[1]) * 0.1).astype("float32")
    b = rng.standard_normal(shapes[2]).astype("float32")
    return x, w, b, np.zeros(shapes[3], "float32")


def _nhwc_reference(layer, x, w, b):
    _, c, hw, o, k, s, g = layer
    x_nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    w_oihw = np.ascontiguousarray(w.transpose(3, 2, 0, 1))
    return torch_reference(layer, x_nchw, w_oihw, b.reshape(1, -1, 1, 1)).transpose(0, 2, 3, 1), x_nchw, w_oihw


def nhwc_check(layers) -> None:
    from gemm import micro_kernel_report

    for layer in layers:
        sch, log, lib, shapes, pack, conv_name = nhwc_build(layer)
        x, w, b, y = _nhwc_inputs(layer, shapes)
        lib["main"](x, pack(w), b, y)
        ref, _, _ = _nhwc_reference(layer, x, w, b)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
        rule = dict((n, r) for n, r, _ in log).get(conv_name)
        print(f"{layer[0]:26s} ok  rule={str(rule):16s} micro-kernel: {json.dumps(micro_kernel_report(sch))}",
              flush=True)


def _min_seconds(fn, min_seconds: float = 0.02) -> float:
    """One sample: the mean time of ``fn`` over enough calls to last ``min_seconds``."""
    from common import timed_calls

    fn()
    return timed_calls(fn, min_seconds, max_calls=1 << 16)[1]


def nhwc_table(layers, threads: int, rounds: int, sample_seconds: float = 0.0005) -> None:
    import torch
    from common import banner, load_average, markdown_table

    torch.set_num_threads(threads)
    banner(f"conv2d layers (batch 1, fp32, NHWC, {threads} threads): Ingot default schedule vs PyTorch "
           f"(channels_last, NCHW) / ONNX Runtime (NCHW model); MIN over {rounds} interleaved rounds")
    rows = []
    for layer in layers:
        _, c, hw, o, k, s, g = layer
        _, log, lib, shapes, pack, conv_name = nhwc_build(layer, threads)
        x, w, b, y = _nhwc_inputs(layer, shapes)
        wk = pack(w)
        lib["main"](x, wk, b, y)
        ref, x_nchw, w_oihw = _nhwc_reference(layer, x, w, b)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
        tw, tb = torch.from_numpy(w_oihw), torch.from_numpy(b.reshape(1, -1, 1, 1))
        tx = torch.from_numpy(x_nchw)
        tx_cl = tx.contiguous(memory_format=torch.channels_last)
        tw_cl = tw.contiguous(memory_format=torch.channels_last)

        def run_torch(xx, ww, s=s, k=k, g=g, tb=tb):
            with torch.no_grad():
                torch.relu(torch.nn.functional.conv2d(xx, ww, stride=s, padding=k // 2, groups=g) + tb)

        sess = _onnxruntime_session(layer, x_nchw, w_oihw, b.reshape(1, -1, 1, 1), threads)
        fns = [lambda f=lib["main"], a=(x, wk, b, y): f(*a), lambda a=(tx_cl, tw_cl): run_torch(*a),
               lambda a=(tx, tw): run_torch(*a)]
        if sess is not None:
            fns.append(lambda sess=sess, feed={"x": x_nchw}: sess.run(None, feed))
        times = [[] for _ in fns]
        for _ in range(rounds):  # interleaved: every candidate sees the same machine state
            for i, fn in enumerate(fns):
                times[i].append(_min_seconds(fn, sample_seconds))
        t = [min(ts) for ts in times]
        f = flops(layer) / 1e9
        to = t[3] if sess is not None else None
        rule = dict((n, r) for n, r, _ in log).get(conv_name)
        rows.append([layer[0], str(rule), f"{f / t[0]:.1f}", f"{f / t[1]:.1f}", f"{f / t[2]:.1f}",
                     "-" if to is None else f"{f / to:.1f}", "-" if to is None else f"{to / t[0]:.2f}",
                     f"{min(t[1:]) / t[0]:.2f}"])
        print(f"  {layer[0]}: {f / t[0]:.1f} GFLOP/s", flush=True)
    print(markdown_table(["layer", "rule", "Ingot GFLOP/s", "PyTorch channels_last", "PyTorch NCHW",
                          "ONNX Runtime", "Ingot / ORT", "Ingot / best"], rows))
    print(f"load average after: {load_average()}")


def _onnxruntime_session(layer, x, w, b, threads: int):
    """An ONNX Runtime session of ``relu(conv(x, w) + b)`` (NCHW model), or None without ORT."""
    try:
        import onnx  # noqa: F401  (availability check)
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    _, c, hw, o, k, s, g = layer
    p = k // 2
    nodes = [helper.make_node("Conv", ["x", "w", "bv"], ["c"], strides=[s, s], pads=[p, p, p, p], group=g),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b.reshape(-1), "bv")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # onnx 1.23 stamps IR 14, which ONNX Runtime 1.31 does not read yet
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _onnxruntime_seconds(layer, x, w, b, threads: int) -> "float | None":
    from common import median_seconds

    sess = _onnxruntime_session(layer, x, w, b, threads)
    if sess is None:
        return None
    return median_seconds(lambda: sess.run(None, {"x": x}), repeat=9, min_seconds=0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="numerics and assembly only (no timing)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--weights", choices=["packed", "per-call"], default="packed",
                        help="pre-packed constant weights (what PackWeights compiles) or plain OIHW weights")
    parser.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw",
                        help="nhwc: the NHWC kernels (packed [O/P, KH, KW, C, P] weights) on LAYERS_NHWC")
    parser.add_argument("--only", default="", help="NHWC mode: only the layers whose name contains this text")
    parser.add_argument("--rounds", type=int, default=100, help="NHWC mode: interleaved timing rounds (min taken)")
    parser.add_argument("--sample-seconds", type=float, default=0.0005,
                        help="NHWC mode: length of one timing sample (short: a 2-thread kernel whose sample "
                             "spans a preemption of one thread waits for it; 20 ms samples read MobileNetV2's "
                             "last 1x1 at 0.25-0.44x ORT, single calls at 1.07-1.12x)")
    parser.add_argument("--versus-order", choices=["rows", "oc", "pixels"], default=None,
                        help="NHWC mode: time the default against the same layers with conv_nhwc_rule's "
                             "loop order forced (rows: the 1x1 default before session 6's pixels order)")
    args = parser.parse_args()
    if args.layout == "nhwc":
        layers = [lay for lay in LAYERS_NHWC if args.only in lay[0]]
        if args.versus_order:
            nhwc_versus(layers, args.threads, args.rounds, args.versus_order, args.sample_seconds)
        elif args.check:
            nhwc_check(layers)
        else:
            nhwc_table(layers, args.threads, args.rounds, args.sample_seconds)
        return
    packed_weights = args.weights == "packed"
    if args.check:
        check(packed_weights)
        return
    import torch
    from common import banner, ingot_median_seconds, load_average, markdown_table, median_seconds

    torch.set_num_threads(args.threads)
    banner(f"conv2d layers (batch 1, fp32, NCHW, {args.threads} threads, {args.weights} weights): "
           "Ingot default schedule vs PyTorch / ONNX Runtime")
    rows = []
    for layer in LAYERS:
        _, log, lib, shapes, pack = build(layer, args.threads, packed_weights)
        x, w, b, y = _inputs(shapes)
        wk = w if pack is None else pack(w)
        lib["main"](x, wk, b, y)
        np.testing.assert_allclose(y, torch_reference(layer, x, w, b), rtol=1e-4, atol=1e-3)
        t = ingot_median_seconds(lib, "main", (x, wk, b, y), repeat=9, min_repeat_ms=50)
        tx, tw, tb = (torch.from_numpy(a) for a in (x, w, b))
        _, c, hw, o, k, s, g = layer

        def run_torch(tx=tx, tw=tw, tb=tb, s=s, k=k, g=g):
            with torch.no_grad():
                torch.relu(torch.nn.functional.conv2d(tx, tw, stride=s, padding=k // 2, groups=g) + tb)

        tt = median_seconds(run_torch, repeat=9, min_seconds=0.05)
        to = _onnxruntime_seconds(layer, x, w, b, args.threads)
        f = flops(layer) / 1e9
        best = min(tt, to or tt)
        rule = _conv_rule(log)
        rows.append([layer[0], rule, f"{f / t:.1f}", f"{f / tt:.1f}", "-" if to is None else f"{f / to:.1f}",
                     f"{best / t:.2f}"])
        print(f"  {layer[0]}: {f / t:.1f} GFLOP/s", flush=True)
    print(markdown_table(["layer", "rule", "Ingot GFLOP/s", "PyTorch", "ONNX Runtime", "Ingot / best"], rows))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
