"""A model exported with a dynamic batch (``torch.onnx.export(..., dynamo=True, dynamic_shapes=...)``)
gets the default schedule rules of its constant-batch export for every kernel (register-tiled NHWC
conv, depthwise window, row norms, GEMM...: `ingot.ops.schedule.analysis.plan_symbolic_extents`),
and its one build matches ONNX Runtime at several batch sizes."""
from __future__ import annotations

import numpy as np
import pytest

import ingot

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")  # the dynamo exporter's dependency
ort = pytest.importorskip("onnxruntime")
from ingot.testing.architectures import TinyConvNet  # noqa: E402  (needs torch)

TARGET = "llvm -num-cores=2"


def _export(module, x, path, dynamic):
    torch.manual_seed(0)
    torch.backends.mha.set_fastpath_enabled(False)  # the fused attention path has no ONNX export
    shapes = ({0: torch.export.Dim("batch", min=1, max=64)},) if dynamic else None
    with torch.no_grad():
        torch.onnx.export(module.eval(), (torch.from_numpy(x),), path, input_names=["data"], dynamo=True,
                          dynamic_shapes=shapes, external_data=False)
    return path


def _rules(path):
    """``{kernel: ((block, rule), ...)}`` of the default schedule of each fused kernel."""
    from ingot.graph.transform import default_build_pipeline
    from ingot.ops.schedule.default import schedule_blocks
    from ingot.target import Target
    from ingot.tir.function import PrimFunc
    from ingot.tir.schedule import Schedule

    target = Target(TARGET)
    mod = default_build_pipeline(target, "auto")(ingot.load(path).mod)
    rules = {}
    for key, func in mod.functions.items():
        if isinstance(func, PrimFunc):
            log: list = []
            schedule_blocks(Schedule(func), target, log=log)
            rules[str(getattr(key, "name_hint", key))] = tuple((blk, rule) for blk, rule, _ in log)
    return rules


def _compute_rules(rules):
    """The sorted rules of the blocks that got a GEMM/conv/reduction rule (the classifier over a
    run-time batch is planned as batch 1: the static model's gemv_rule)."""
    plain = {"elementwise_rule", "inline_injective", None}
    return sorted(rule for blocks in rules.values() for _, rule in blocks if rule not in plain)


def _check(module, x, tmp_path, tiled_rules):
    torch.manual_seed(0)
    # a batch-1 example would let torch.export specialize the batch to 1 (nn.MultiheadAttention)
    dyn = _export(module, np.concatenate([x, x]), str(tmp_path / "dyn.onnx"), dynamic=True)
    static = _export(module, x, str(tmp_path / "static.onnx"), dynamic=False)
    dyn_rules, static_rules = _rules(dyn), _rules(static)
    # The exporter's graphs of the two may fuse differently (kernel and block names differ):
    # compare the rules of the compute blocks (GEMM, conv, reductions) as multisets.
    assert _compute_rules(dyn_rules) == _compute_rules(static_rules)
    used = {rule for blocks in static_rules.values() for _, rule in blocks}
    assert tiled_rules <= used, used  # the model exercises the rules this test is about
    package = ingot.compile(ingot.load(dyn), target=TARGET)
    session = ort.InferenceSession(dyn, providers=["CPUExecutionProvider"])
    for batch in (1, 3):
        data = np.random.default_rng(batch).standard_normal((batch, *x.shape[1:])).astype("float32")
        expected = session.run(None, {"data": data})[0]
        got = next(iter(ingot.run(package, {"data": data}).values()))
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_conv_net_with_dynamic_batch_keeps_conv_rules(tmp_path):
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype("float32")
    _check(TinyConvNet(), x, tmp_path, {"conv_nhwc_rule", "nhwc_window_rule"})


def test_transformer_block_with_dynamic_batch_keeps_rules(tmp_path):
    layer = torch.nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, activation="gelu", batch_first=True)
    x = np.random.default_rng(0).standard_normal((1, 8, 32)).astype("float32")
    _check(layer, x, tmp_path, {"row_norm_rule"})


def test_symbolic_batch_conv_keeps_register_tile_local_and_matches_numpy():
    # conv_nhwc_rule on a (batch, 8, 8, 16) conv whose batch is an int64 run-time size: the batch
    # loop stays serial outside the parallel loop, so the accumulator compacts to the tile (a
    # batch-sized "local" buffer means the register tile lives in memory), and one build serves
    # every batch.
    from ingot import te
    from ingot.ir.expr import Var
    from ingot.ops import nn
    from ingot.ops.schedule.default import schedule_blocks
    from ingot.target import Target
    from ingot.tir.schedule import Schedule

    batch = Var("batch", "int64")
    x = te.placeholder((batch, 8, 8, 16), name="x")
    w = te.placeholder((3, 3, 16, 16), name="w")
    y = nn.conv2d_nhwc(x, w, padding=1)
    log: list = []
    sch = schedule_blocks(Schedule(te.create_prim_func([x, w, y])), Target(TARGET), log=log)
    assert ("conv2d_nhwc", "conv_nhwc_rule") in [(blk, rule) for blk, rule, _ in log]
    lowered = ingot.lower(sch.mod)["main"].script()
    local = [line for line in lowered.splitlines() if 'scope="local"' in line]
    assert local and not any("batch" in line for line in local), local
    lib = ingot.build(sch.mod, TARGET)
    rng = np.random.default_rng(0)
    wv = rng.standard_normal((3, 3, 16, 16)).astype("float32")
    for n in (1, 3):
        xv = rng.standard_normal((n, 8, 8, 16)).astype("float32")
        out = np.zeros((n, 8, 8, 16), "float32")
        lib["main"](xv, wv, out)
        ref = torch.nn.functional.conv2d(torch.from_numpy(xv).permute(0, 3, 1, 2),
                                         torch.from_numpy(wv).permute(3, 2, 0, 1), padding=1)
        np.testing.assert_allclose(out, ref.permute(0, 2, 3, 1).numpy(), rtol=1e-4, atol=1e-4)
