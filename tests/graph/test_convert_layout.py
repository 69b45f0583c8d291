"""ConvertLayout (NHWC by default on CPUs): small networks of each family compiled with the default
pipeline, outputs equal to PyTorch's, and the layout conversions counted — one ``permute_dims``
at the input, at most one at the output — both in the graph after the layout passes and in the
built kernels. Plus before/after IR of the propagation rules and the opt-out."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.graph.op_registry import get_op_def  # noqa: E402
from ingot.graph.transform import (  # noqa: E402
    ConvertLayout, DeadCodeElimination, FoldConstant, SimplifyInference, default_build_pipeline, resolve_layout,
)
from ingot.ir import structural_equal, transform  # noqa: E402

# The blocks of the shared model zoo (same structure as the real networks); the tiny nets below
# compose a few of them to keep each layout case small.
from ingot.testing.architectures import Bottleneck, InvertedResidual, randomize_bn  # noqa: E402

rng = np.random.default_rng(11)


# -- helpers -------------------------------------------------------------------------------------


def _randomize_bn(module):
    """Non-trivial batch-norm statistics (so folding them into the weights is exercised)."""
    return randomize_bn(module, seed=0).eval()


def _layout_graph(model):
    """``main`` after the default pipeline's graph-level passes up to ConvertLayout (no compiler)."""
    from ingot.graph.transform.bind_params import BindParams

    mod = BindParams("main", model.params)(model.mod) if model.params else model.mod
    seq = transform.Sequential([FoldConstant(), SimplifyInference(), FoldConstant(), ConvertLayout(), FoldConstant(),
                                DeadCodeElimination()])
    return seq(mod)["main"]


def _ops(func):
    return [b.value.op.name for blk in func.body.blocks for b in blk.bindings
            if isinstance(b.value, G.Call) and isinstance(b.value.op, G.Op)]


def _permutes_in_kernels(package):
    """``permute_dims`` occurrences over the kernel calls of the built plan (fused names list their ops)."""
    steps = package.executable.plans["main"]["steps"]
    return sum(s.get("func", "").count("permute_dims") for s in steps if s.get("op") == "call_tir")


def _check_model(module, shape, max_out=1):
    module = _randomize_bn(module)
    x = rng.standard_normal(shape).astype("float32")
    model = ingot.load(module, example_inputs=(torch.from_numpy(x),))
    func = _layout_graph(model)
    ops = _ops(func)
    convs = [b.value for blk in func.body.blocks for b in blk.bindings
             if isinstance(b.value, G.Call) and getattr(b.value.op, "name", "") == "conv2d"]
    assert convs and all(c.attrs["data_layout"] == "NHWC" for c in convs)
    # One conversion where the input enters the NHWC region, at most one where the result leaves.
    first = next(b.value for blk in func.body.blocks for b in blk.bindings)
    assert first.op.name == "permute_dims" and first.args[0] is func.params[0]
    assert 1 <= ops.count("permute_dims") <= 1 + max_out, ops
    package = ingot.compile(model)
    assert 1 <= _permutes_in_kernels(package) <= 1 + max_out
    (y,) = ingot.run(package, {model.inputs[0].name: x}).values()
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    return func


def bn_conv(cin, cout, k, stride=1, groups=1):
    return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]


# -- networks ------------------------------------------------------------------------------------


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(*bn_conv(3, 16, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.Sequential(Bottleneck(16, 8, 1), Bottleneck(32, 8, 1), Bottleneck(32, 16, 2))
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


class TinyMobileNetV2(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(*bn_conv(3, 16, 3, 2), nn.ReLU6(), InvertedResidual(16, 16, 1, 2),
                                      InvertedResidual(16, 24, 2, 2), InvertedResidual(24, 24, 1, 2),
                                      *bn_conv(24, 64, 1), nn.ReLU6())
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class SENet(nn.Module):
    """Squeeze-excitation with fully connected layers (pool → flatten → FC → relu → FC → sigmoid →
    reshape → multiply): the (N, C) excursion converts with reshapes, not transposes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(*bn_conv(3, 32, 3), nn.ReLU())
        self.fc1, self.fc2 = nn.Linear(32, 8), nn.Linear(8, 32)
        self.head = nn.Conv2d(32, 16, 1)

    def forward(self, x):
        y = self.conv(x)
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1)))))
        return self.head(y * s.reshape(-1, 32, 1, 1))


class DenseInception(nn.Module):
    """DenseNet-style concatenation of a block's input with its output, Inception-style branches
    (1x1, 3x3, max-pool + 1x1) concatenated on channels, average-pool transition."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(*bn_conv(3, 16, 3), nn.ReLU())
        self.dense = nn.Sequential(*bn_conv(16, 16, 3), nn.ReLU())
        self.b1 = nn.Conv2d(32, 16, 1)
        self.b2 = nn.Sequential(nn.Conv2d(32, 8, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1))
        self.b3 = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(32, 16, 1))
        self.out = nn.Conv2d(48, 8, 1)

    def forward(self, x):
        y = self.stem(x)
        y = torch.cat([y, self.dense(y)], 1)
        y = torch.relu(torch.cat([self.b1(y), self.b2(y), self.b3(y)], 1))
        return self.out(F.avg_pool2d(y, 2))


class PadPoolCeil(nn.Module):
    """Asymmetric explicit pad, ceil-mode max and average pools; ends in NCHW feature maps."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3)
        self.c2 = nn.Conv2d(16, 32, 3)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = F.max_pool2d(F.pad(y, (1, 2, 0, 1)), 3, 2, ceil_mode=True)
        y = self.c2(y) * 0.5 - 1.0
        return F.avg_pool2d(y, 3, 2, padding=1, ceil_mode=True, count_include_pad=False)


# -- compiled networks ---------------------------------------------------------------------------


def test_resnet_style_residual_downsample_maxpool_global_pool_fc():
    func = _check_model(TinyResNet(), (1, 3, 32, 32), max_out=0)
    ops = _ops(func)
    assert {"max_pool2d", "global_avg_pool2d"} <= set(ops)
    pools = [b.value for blk in func.body.blocks for b in blk.bindings
             if getattr(getattr(b.value, "op", None), "name", "") in ("max_pool2d", "global_avg_pool2d")]
    assert all(p.attrs["layout"] == "NHWC" for p in pools)


def test_mobilenet_v2_style_depthwise_relu6_residual():
    func = _check_model(TinyMobileNetV2(), (1, 3, 32, 32), max_out=0)
    dw = [b.value for blk in func.body.blocks for b in blk.bindings
          if getattr(getattr(b.value, "op", None), "name", "") == "conv2d" and b.value.attrs["groups"] > 1]
    assert dw and all(c.args[1].struct_info.shape[2] == 1 for c in dw)  # HWIO (KH, KW, 1, C)


def test_squeeze_excitation_block():
    _check_model(SENet(), (1, 3, 16, 16), max_out=1)


def test_densenet_inception_style_concat():
    func = _check_model(DenseInception(), (1, 3, 16, 16), max_out=1)
    concats = [b.value for blk in func.body.blocks for b in blk.bindings
               if getattr(getattr(b.value, "op", None), "name", "") == "concat"]
    assert concats and all(c.attrs["axis"] == 3 for c in concats)


def test_pad_and_ceil_mode_pools():
    _check_model(PadPoolCeil(), (1, 3, 19, 17), max_out=1)


def test_layout_nchw_opt_out_keeps_the_model_layout():
    module = _randomize_bn(TinyMobileNetV2())
    x = rng.standard_normal((1, 3, 16, 16)).astype("float32")
    model = ingot.load(module, example_inputs=(torch.from_numpy(x),))
    package = ingot.compile(model, layout="NCHW")
    assert _permutes_in_kernels(package) == 0
    (y,) = ingot.run(package, {model.inputs[0].name: x}).values()
    with torch.no_grad():
        np.testing.assert_allclose(y, module(torch.from_numpy(x)).numpy(), rtol=1e-4, atol=1e-5)


def test_layout_choice_per_target():
    assert resolve_layout("llvm") == "NHWC" and resolve_layout("c") == "NHWC"
    assert resolve_layout("cuda") == "NCHW" and resolve_layout("llvm", "NCHW") == "NCHW"
    with pytest.raises(ValueError, match="layout='NCHW4c'"):
        default_build_pipeline("llvm", layout="NCHW4c")
    names = [p.info.name for p in default_build_pipeline("llvm").passes]
    assert "ConvertLayout" in names and names.index("ConvertLayout") < names.index("FuseOps")
    assert "ConvertLayout" not in [p.info.name for p in default_build_pipeline("cuda").passes]


# -- propagation rules, before/after IR ----------------------------------------------------------


def T(shape):
    return G.TensorStructInfo(shape, "float32")


def C(*shape):
    return G.const(rng.standard_normal(shape).astype("float32"))


def _evaluate(mod, *args):
    func = mod["main"]
    env = {id(p): a for p, a in zip(func.params, args)}

    def val(e):
        if isinstance(e, G.Constant):
            return e.data
        if isinstance(e, G.Tuple):
            return [val(f) for f in e.fields]
        return env[id(e)]

    for block in func.body.blocks:
        for b in block.bindings:
            v = b.value
            env[id(b.var)] = val(v) if isinstance(v, G.Var) else \
                get_op_def(v.op.name).numpy([val(a) for a in v.args], v.attrs)
    return val(func.body.body)


def test_residual_add_of_two_nhwc_tensors_and_spatial_mean_follow():
    """add(conv, conv) stays NHWC; mean over H, W without keepdims gives (N, C) directly."""
    w1, w2 = C(8, 4, 3, 3), C(8, 4, 1, 1)
    x = G.Var("x", T((1, 4, 6, 6)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(G.op.conv2d(x, w1, padding=1))
            b = bb.emit(G.op.conv2d(x, w2))
            y = bb.emit(G.op.add(a, b))
            y = bb.emit(G.op.relu(y))
            gv = bb.emit_output(G.op.mean(y, axis=(2, 3)))
        bb.emit_func_output(gv)
    before = bb.get()
    after = ConvertLayout()(before)
    x2 = G.Var("x", T((1, 4, 6, 6)))
    bb2 = G.BlockBuilder()
    with bb2.function("main", [x2]):
        with bb2.dataflow():
            xt = bb2.emit(G.op.permute_dims(x2, (0, 2, 3, 1)))
            a = bb2.emit(G.op.conv2d(xt, G.const(w1.data.transpose(2, 3, 1, 0).copy()), padding=1,
                                     data_layout="NHWC"))
            b = bb2.emit(G.op.conv2d(xt, G.const(w2.data.transpose(2, 3, 1, 0).copy()), data_layout="NHWC"))
            y = bb2.emit(G.op.add(a, b))
            y = bb2.emit(G.op.relu(y))
            gv = bb2.emit_output(G.op.mean(y, axis=(1, 2)))
        bb2.emit_func_output(gv)
    assert structural_equal(after["main"], bb2.get()["main"])
    data = rng.standard_normal((1, 4, 6, 6)).astype("float32")
    np.testing.assert_allclose(_evaluate(after, data), _evaluate(before, data), rtol=1e-4, atol=1e-5)


def test_nchw_consumer_gets_one_materialized_permute_and_output_stays_nchw():
    """A reshape reads the NCHW value (converted once, shared by two readers); the NHWC value is
    still used by the later relu; the function result is NCHW."""
    x = G.Var("x", T((1, 3, 4, 4)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(G.op.conv2d(x, C(8, 3, 1, 1)))
            r1 = bb.emit(G.op.reshape(y, (1, 128)))
            r2 = bb.emit(G.op.reshape(y, (8, 16)))
            z = bb.emit(G.op.relu(y))
            gv = bb.emit_output(G.op.concat([z, y], axis=1))
            r3 = bb.emit(G.op.reshape(r2, (1, 128)))
            gv2 = bb.emit_output(G.op.add(r1, r3))
        bb.emit_func_output(G.Tuple([gv, gv2]))
    before = bb.get()
    after = ConvertLayout()(before)
    ops = _ops(after["main"])
    assert ops.count("permute_dims") == 3, ops  # x in; y out (for the reshapes); gv out
    assert ops.index("reshape") > ops.index("conv2d")
    data = rng.standard_normal((1, 3, 4, 4)).astype("float32")
    for got, want in zip(_evaluate(after, data), _evaluate(before, data)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_grouped_conv_pad_batch_norm_softmax_reduce_resize_slice_follow_in_nhwc():
    """Numerics of every propagation rule against the numpy references (no compiler): only the
    input conversion and the final one remain."""
    c = [G.const(np.abs(rng.standard_normal(8)).astype("float32") + 0.5) for _ in range(4)]
    x = G.Var("x", T((1, 4, 6, 7)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(G.op.conv2d(x, C(8, 2, 3, 3), padding=1, groups=2))
            y = bb.emit(G.op.pad(y, [(0, 0), (0, 0), (1, 0), (2, 1)], pad_value=0.5))
            y = bb.emit(G.op.batch_norm(y, *c))
            y = bb.emit(G.op.avg_pool2d(y, 2, 1))
            y = bb.emit(G.op.multiply(y, C(8, 1, 1)))
            y = bb.emit(G.op.subtract(C(1, 1, 1, 1), y))
            s = bb.emit(G.op.softmax(y, axis=1))
            m = bb.emit(G.op.max(s, axis=(1,), keepdims=True))
            y = bb.emit(G.op.divide(s, m))
            y = bb.emit(G.op.resize2d(y, (9, 10), method="nearest"))
            y = bb.emit(G.op.strided_slice(y, begin=[1, 2], end=[7, 9], axes=[1, 3]))
            gv = bb.emit_output(G.op.sigmoid(y))
        bb.emit_func_output(gv)
    before = bb.get()
    after = ConvertLayout()(before)
    ops = _ops(after["main"])
    assert ops.count("permute_dims") == 2 and ops[0] == ops[-1] == "permute_dims", ops
    calls = {b.value.op.name: b.value for blk in after["main"].body.blocks for b in blk.bindings}
    assert calls["softmax"].attrs["axis"] == 3 and calls["batch_norm"].attrs["axis"] == 3
    assert calls["max"].attrs["axis"] == (3,) and calls["resize2d"].attrs["layout"] == "NHWC"
    assert calls["pad"].attrs["pad_width"] == ((0, 0), (1, 0), (2, 1), (0, 0))
    assert calls["strided_slice"].attrs["axes"] == (3, 2)
    data = rng.standard_normal((1, 4, 6, 7)).astype("float32")
    np.testing.assert_allclose(_evaluate(after, data), _evaluate(before, data), rtol=1e-5, atol=1e-6)
