"""`build_conv_nhwc` at explicit non-default points (the knobs `NhwcConv` samples): loop order,
tile height, channel slice, unrolled steps, parallel fusion — numbers vs PyTorch; and the
default knobs (`default_conv_params`) per layer class."""
from __future__ import annotations

import numpy as np
import pytest

from ingot import ops, te
from ingot.ops import packed
from ingot.ops.schedule import schedule_blocks
from ingot.ops.schedule.analysis import analyze_block
from ingot.ops.schedule.conv_nhwc import (ConvNhwcParams, ConvNhwcShape, analyze_conv_nhwc, build_conv_nhwc,
                                          default_conv_params)
from ingot.target import Target
from ingot.tir.schedule import Schedule

from .schedule_testutil import AVX512_CPU, AVX512_TARGET, TARGET, run as _run

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.compiler


def _layer(c, hw, o, k):
    x = te.placeholder((1, hw, hw, c), name="x")
    w = te.placeholder((o // 32, k, k, c, 32), name="w")
    b = te.placeholder((o,), name="bias")
    conv = packed.conv2d_nhwc_packed_weight(x, w, strides=1, padding=k // 2)
    return te.create_prim_func([x, w, b, ops.relu(ops.add(conv, b))])


def _reference(x, w, b, k):
    xt, wt = torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(w).permute(3, 2, 0, 1)
    with torch.no_grad():
        y = torch.nn.functional.conv2d(xt, wt, padding=k // 2).permute(0, 2, 3, 1).numpy()
    return np.maximum(y + b, 0)


# (c, hw, o, k, params): the other order, other MR, a sliced 1x1, an unsliced big panel, finer tasks
POINTS = [
    (64, 14, 64, 3, ConvNhwcParams("rows", 7, 0, 4, parallel_fuse=3)),
    (64, 14, 64, 3, ConvNhwcParams("oc", 14, 16, 8)),
    (160, 7, 64, 1, ConvNhwcParams("rows", 7, 32, 1)),
    (96, 8, 64, 3, ConvNhwcParams("oc", 4, 0, 8)),
    (32, 8, 64, 3, ConvNhwcParams("rows", 2, 16, 2, parallel_fuse=1)),
    (64, 14, 96, 1, ConvNhwcParams("pixels", 14, 0, 4)),
    (32, 8, 64, 3, ConvNhwcParams("pixels", 4, 0, 2, parallel_fuse=2)),
    # sliced, (n, oh, oc block) as one parallel loop (7 rows x 5 blocks = 35 tasks)
    (192, 7, 160, 1, ConvNhwcParams("rows", 7, 64, 4, parallel_fuse=3)),
]


@pytest.mark.parametrize("c,hw,o,k,params", POINTS, ids=[str(p[-1]) for p in POINTS])
def test_explicit_points_match_torch(c, hw, o, k, params):
    func = _layer(c, hw, o, k)
    sch = Schedule(func)
    info = analyze_block(sch, sch.get_block("conv2d_nhwc"))
    shape = analyze_conv_nhwc(sch, "conv2d_nhwc", info, 16)
    build_conv_nhwc(sch, "conv2d_nhwc", info, shape, params.order, params.x_factors(hw), params.c_factors(c), 2,
                    parallel_fuse=params.parallel_fuse)
    sch = schedule_blocks(sch, Target(TARGET))  # the pad stage
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((1, hw, hw, c), (k, k, c, o), (o,)))
    out = _run(sch, [x, packed.pack_conv2d_nhwc_weight(w, 32), b], (1, hw, hw, o))
    np.testing.assert_allclose(out, _reference(x, w, b, k), rtol=1e-4, atol=1e-3)


def test_default_params_per_layer_class():
    # ResNet-50 3x3 layers: sliced by 32 channels, 14 x 2-vector tile where 14 divides OW
    assert default_conv_params(ConvNhwcShape(1, 56, 56, 64, 64, 9, 6, 16, 2), AVX512_CPU) == ConvNhwcParams("rows", 14, 32, 2)
    assert default_conv_params(ConvNhwcShape(1, 7, 7, 512, 512, 9, 6, 16, 2), AVX512_CPU) == ConvNhwcParams("oc", 7, 32, 4)
    # MobileNetV2's last 1x1 (320 -> 1280 at 7x7): whole panel (40 KB), oc order
    assert default_conv_params(ConvNhwcShape(1, 7, 7, 1280, 320, 1, 6, 16, 2), AVX512_CPU) == ConvNhwcParams("oc", 7, 0, 4)
    # 1x1 with an L1-resident panel, OW = 28/56, >= 2 oc blocks, C >= 64: pixels order (each
    # 14-pixel tile runs every oc block), 14 x 2-vector tile
    assert default_conv_params(ConvNhwcShape(1, 28, 28, 512, 128, 1, 6, 16, 2), AVX512_CPU) == ConvNhwcParams("pixels", 14, 0, 4)
    assert default_conv_params(ConvNhwcShape(1, 56, 56, 64, 256, 1, 6, 16, 2), AVX512_CPU) == ConvNhwcParams("pixels", 14, 0, 4)
    # ... rows order when forced or at OW = 14 (>= 4 oc blocks); C = 32 keeps rows (the
    # pixels-order tile spills there)
    assert default_conv_params(ConvNhwcShape(1, 56, 56, 256, 64, 1, 6, 16, 2), AVX512_CPU, order="rows") == \
        ConvNhwcParams("rows", 14, 0, 4)
    assert default_conv_params(ConvNhwcShape(1, 14, 14, 1024, 256, 1, 6, 16, 2), AVX512_CPU) == ConvNhwcParams("rows", 14, 0, 4)
    assert default_conv_params(ConvNhwcShape(1, 28, 28, 192, 32, 1, 6, 16, 2), AVX512_CPU) == ConvNhwcParams("rows", 14, 0, 4)
    assert default_conv_params(ConvNhwcShape(1, 56, 56, 64, 32, 1, 6, 16, 2), AVX512_CPU) == ConvNhwcParams("rows", 8, 0, 4)
    # a sliced reduction asked for pixels order runs rows order
    assert default_conv_params(ConvNhwcShape(1, 7, 7, 512, 2048, 1, 6, 16, 2), AVX512_CPU, order="pixels").order == "rows"
    assert default_conv_params(ConvNhwcShape(1, 14, 14, 1024, 256, 1, 6, 16, 2), AVX512_CPU, order="oc").mr == 7
    with pytest.raises(Exception, match="does not divide"):
        default_conv_params(ConvNhwcShape(1, 7, 7, 64, 64, 9, 6, 16, 2), AVX512_CPU, kc=24)


def test_wide_1x1_default_matches_torch():
    # 1x1, 4 oc blocks, OW = 14: the default is the rows-order 14 x 2-vector tile
    c, hw, o = 32, 14, 128
    sch = schedule_blocks(Schedule(_layer(c, hw, o, 1)), Target(AVX512_TARGET))
    assert "T.unroll(14)" in sch.mod["main"].script()  # 28 accumulators: AVX-512's 32 registers
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((1, hw, hw, c), (1, 1, c, o), (o,)))
    out = _run(sch, [x, packed.pack_conv2d_nhwc_weight(w, 32), b], (1, hw, hw, o))
    np.testing.assert_allclose(out, _reference(x, w, b, 1), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("order", ["oc", "rows"])
def test_weight_prefetch_of_the_next_slice_matches_torch(order):
    # ConvNhwcParams.prefetch: each channel slice prefetches the next one's weights (lines of
    # the 3x3 x 16-channel x 32 panel slice), same numbers; the C has one __builtin_prefetch.
    import ingot

    c, hw, o, k = 64, 14, 64, 3
    params = ConvNhwcParams(order, 7, 16, 4, prefetch=3)
    sch = Schedule(_layer(c, hw, o, k))
    info = analyze_block(sch, sch.get_block("conv2d_nhwc"))
    shape = analyze_conv_nhwc(sch, "conv2d_nhwc", info, 16)
    build_conv_nhwc(sch, "conv2d_nhwc", info, shape, params.order, params.x_factors(hw), params.c_factors(c), 2,
                    prefetch=params.prefetch)
    sch = schedule_blocks(sch, Target(TARGET))
    src = ingot.build(sch.mod, target=TARGET).get_source()
    assert src.count("__builtin_prefetch") == 1 and ", 0, 3)" in src
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((1, hw, hw, c), (k, k, c, o), (o,)))
    out = _run(sch, [x, packed.pack_conv2d_nhwc_weight(w, 32), b], (1, hw, hw, o))
    np.testing.assert_allclose(out, _reference(x, w, b, k), rtol=1e-4, atol=1e-3)
