"""Winograd with a run-time batch (#17): a 3x3 conv of a model exported with a dynamic batch gets the
Winograd tile and schedule of its constant-batch twin (`ingot.ops.winograd` runs one image at a time:
the tile grid depends on H and W only), and one build matches ONNX Runtime / torch at several batches."""
from __future__ import annotations

import numpy as np
import pytest

import ingot

torch = pytest.importorskip("torch")

TARGET = "llvm -num-cores=2"


def _winograd_kernel(batch, hw, channels, tile):
    """(schedule log, scheduled module) of a Winograd conv kernel over ``(batch, hw, hw, channels)``."""
    from ingot import te
    from ingot.ops.schedule.default import schedule_blocks
    from ingot.ops.winograd import conv2d_nhwc_winograd
    from ingot.target import Target
    from ingot.tir.schedule import Schedule

    x = te.placeholder((batch, hw, hw, channels), name="x")
    u = te.placeholder(((tile + 2) ** 2, channels // 16, channels, 16), name="u")
    y = conv2d_nhwc_winograd(x, u, padding=1)
    log: list = []
    sch = schedule_blocks(Schedule(te.create_prim_func([x, u, y])), Target(TARGET), log=log)
    return [(blk, rule) for blk, rule, _ in log if rule is not None], sch.mod


@pytest.mark.parametrize("hw, channels, tile", [(28, 32, 2), (14, 32, 2), (28, 32, 4)])
def test_run_time_batch_winograd_kernel_gets_batch_1_schedule_and_matches_torch(hw, channels, tile):
    # (28, F(2, 3)): 14 tiles per row, the tile-row schedule; the others stage by stage (GEMM rule).
    from ingot.ir.expr import Var
    from ingot.ops.winograd import transform_weight

    static_log, _ = _winograd_kernel(1, hw, channels, tile)
    dyn_log, mod = _winograd_kernel(Var("batch", "int64"), hw, channels, tile)
    assert dyn_log == static_log
    assert any(rule in ("winograd_tile_rows", "gemm_rule") for _, rule in dyn_log), dyn_log
    lowered = ingot.lower(mod)["main"].script()
    # the per-tile local buffers (GEMM accumulators, input tiles) stay tile-sized, not batch-sized
    local = [line for line in lowered.splitlines() if 'scope="local"' in line]
    assert local and not any("batch" in line for line in local), local
    lib = ingot.build(mod, TARGET)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3, channels, channels)).astype("float32")
    u = transform_weight(w, tile, 16)
    for n in (1, 2, 3):
        x = rng.standard_normal((n, hw, hw, channels)).astype("float32")
        out = np.zeros((n, hw, hw, channels), "float32")
        lib["main"](x, u, out)
        ref = torch.nn.functional.conv2d(torch.from_numpy(x).permute(0, 3, 1, 2),
                                         torch.from_numpy(w).permute(3, 2, 0, 1), padding=1)
        np.testing.assert_allclose(out, ref.permute(0, 2, 3, 1).numpy(), rtol=1e-3, atol=1e-3)


class _ResNetLike(torch.nn.Module):
    """A stem, a residual block of 3x3 convs at 28x28 (F(4, 3)), a strided conv, a 3x3 conv at 14x14
    (F(2, 3)), global mean, classifier."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 32, 3, padding=1)
        self.a = torch.nn.Conv2d(32, 32, 3, padding=1)
        self.b = torch.nn.Conv2d(32, 32, 3, padding=1)
        self.down = torch.nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.c = torch.nn.Conv2d(64, 64, 3, padding=1)
        self.fc = torch.nn.Linear(64, 10)

    def forward(self, x):
        y = torch.relu(self.stem(x))
        y = torch.relu(y + self.b(torch.relu(self.a(y))))
        y = torch.relu(self.c(torch.relu(self.down(y))))
        return self.fc(y.mean((2, 3)))


def _export(module, x, path, dynamic):
    shapes = ({0: torch.export.Dim("batch", min=1, max=64)},) if dynamic else None
    with torch.no_grad():
        torch.onnx.export(module.eval(), (torch.from_numpy(x),), path, input_names=["data"], dynamo=True,
                          dynamic_shapes=shapes, external_data=False)
    return path


def _plan(path):
    """Sorted ``(Winograd α or None, rules of the kernel's blocks)`` of each fused kernel with a
    GEMM/conv/reduction block: per conv, its Winograd choice and its schedule."""
    from ingot.graph.transform import default_build_pipeline
    from ingot.ops.schedule.default import _top_level_blocks, schedule_blocks
    from ingot.ops.schedule.winograd import winograd_stages
    from ingot.target import Target
    from ingot.tir.function import PrimFunc
    from ingot.tir.schedule import Schedule

    target = Target(TARGET)
    mod = default_build_pipeline(target, "auto")(ingot.load(path).mod)
    plain = {"elementwise_rule", "inline_injective", None}
    plan = []
    for func in mod.functions.values():
        if not isinstance(func, PrimFunc):
            continue
        sch = Schedule(func)
        log: list = []
        stages = winograd_stages(sch, _top_level_blocks(func))
        alpha = None
        if stages:
            alpha = int(round(int(sch.get(sch.get_block(stages["input"])).writes[0].buffer.shape[-3]) ** 0.5))
        schedule_blocks(sch, target, log=log)
        rules = tuple(sorted({rule for _, rule, _ in log if rule not in plain}))
        if rules:
            plan.append((alpha or 0, rules))
    return sorted(plan)


def test_dynamic_batch_resnet_like_gets_static_winograd_and_rules_per_conv(tmp_path):
    pytest.importorskip("onnxscript")  # the dynamo exporter's dependency
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    module = _ResNetLike()
    x = np.random.default_rng(0).standard_normal((1, 3, 28, 28)).astype("float32")
    dyn = _export(module, np.concatenate([x, x]), str(tmp_path / "dyn.onnx"), dynamic=True)
    static = _export(module, x, str(tmp_path / "static.onnx"), dynamic=False)
    static_plan, dyn_plan = _plan(static), _plan(dyn)
    assert [a for a, _ in static_plan].count(6) == 2 and [a for a, _ in static_plan].count(4) == 1, static_plan
    assert dyn_plan == static_plan
    # the classifier (rows = the run-time batch) is planned as batch 1: gemv_rule, as the static model
    assert any("gemv_rule" in rules for _, rules in dyn_plan), dyn_plan
    package = ingot.compile(ingot.load(dyn), target=TARGET)
    session = ort.InferenceSession(dyn, providers=["CPUExecutionProvider"])
    for batch in (1, 2, 3):
        data = np.random.default_rng(batch).standard_normal((batch, 3, 28, 28)).astype("float32")
        expected = session.run(None, {"data": data})[0]
        got = next(iter(ingot.run(package, {"data": data}).values()))
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)
