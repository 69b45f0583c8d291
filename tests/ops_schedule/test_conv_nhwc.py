"""NHWC convolutions, depthwise convolutions and pools under the default schedule: numbers vs
PyTorch, the rule the driver picks (`conv_nhwc_rule`, `nhwc_window_rule`), the fused epilogue in
one pass, and the micro-kernel in the assembly (zmm FMAs, no stack traffic)."""
from __future__ import annotations


import numpy as np
import pytest

from ingot import ops, te
from ingot.ops import packed
from ingot.ops.schedule import schedule_blocks
from ingot.ops.schedule.analysis import analyze_block
from ingot.ops.schedule.conv_nhwc import conv_nhwc_rule
from ingot.ops.schedule.conv_window import nhwc_window_rule
from ingot.target import Target
from ingot.tir.schedule import Schedule
from ingot.tir.schedule.error import ScheduleError

from .schedule_testutil import AVX512_CPU, AVX512_TARGET, CPU, CPU_TARGETS, TARGET, runs_here, kernel_loop as _kernel_loop, parallel_tasks, run as _run, schedule as _schedule

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.compiler

RNG = np.random.default_rng(7)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _torch_conv(x_nhwc, w_hwio, stride, pad, groups=1):
    x = torch.from_numpy(x_nhwc).permute(0, 3, 1, 2)
    w = torch.from_numpy(w_hwio).permute(3, 2, 0, 1)
    with torch.no_grad():
        y = torch.nn.functional.conv2d(x, w, stride=stride, padding=pad, groups=groups)
    return y.permute(0, 2, 3, 1).numpy()


def _packed_conv_layer(c, hw, o, k, s, panel=32, residual=True, pad=None):
    """relu(conv2d_nhwc_packed_weight(x, w) + bias (+ res)): the kernel the graph hands over."""
    pad = k // 2 if pad is None else pad
    x = te.placeholder((1, hw, hw, c), name="x")
    w = te.placeholder((o // panel, k, k, c, panel), name="w")
    b = te.placeholder((o,), name="bias")
    conv = packed.conv2d_nhwc_packed_weight(x, w, strides=s, padding=pad)
    y = ops.add(conv, b)
    args = [x, w, b]
    if residual:
        r = te.placeholder(tuple(int(d) for d in conv.shape), name="res")
        y = ops.add(y, r)
        args.append(r)
    return args + [ops.relu(y)]


# name, in channels, size, out channels, kernel, stride, panel: ResNet families at small sizes
# (OW = 7, 14, an odd 9, stride 2, 1x1 and 3x3, P = 16 and 32)
CONVS = [
    ("3x3 ow14", 16, 14, 64, 3, 1, 32),
    ("3x3 ow7", 32, 7, 64, 3, 1, 32),
    ("3x3 odd ow9 P16", 8, 9, 32, 3, 1, 16),
    ("3x3 stride2", 16, 28, 32, 3, 2, 32),
    ("1x1 ow56", 16, 56, 64, 1, 1, 32),
    ("1x1 stride2", 32, 14, 64, 1, 2, 32),
    ("7x7 stem stride2", 3, 32, 64, 7, 2, 32),
]


@pytest.mark.parametrize("target", CPU_TARGETS)
@pytest.mark.parametrize("name,c,hw,o,k,s,panel", CONVS, ids=[c[0] for c in CONVS])
def test_packed_nhwc_conv_with_fused_epilogue_matches_torch(name, c, hw, o, k, s, panel, target):
    # the tiles derive from each CPU's registers: the micro-kernel stays in registers on all of
    # them; the numbers where the host runs the code
    tensors = _packed_conv_layer(c, hw, o, k, s, panel)
    sch, rules = _schedule(tensors, target)
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    loop = _kernel_loop(sch, target)
    assert loop["vector"] == loop["fma"] > 0 and loop["stack"] <= (2 if k == 7 else 0), (target, loop)
    if not runs_here(target):
        return
    # bias, residual add and relu are inlined into one block reading the accumulator tile
    blocks = set(sch.state.blocks("main"))
    assert "T_add" not in blocks and "T_add_1" not in blocks and "T_relu" in blocks, blocks
    xa, wa, ba = _rand(1, hw, hw, c), _rand(k, k, c, o), _rand(o)
    oh = (hw + 2 * (k // 2) - k) // s + 1
    ra = _rand(1, oh, oh, o)
    out = _run(sch, [xa, packed.pack_conv2d_nhwc_weight(wa, panel), ba, ra], (1, oh, oh, o), target)
    ref = np.maximum(_torch_conv(xa, wa, s, k // 2) + ba + ra, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("order", ["rows", "oc"])
def test_both_loop_orders_are_correct(order):
    tensors = _packed_conv_layer(16, 14, 64, 3, 1, residual=False)
    sch = Schedule(te.create_prim_func(tensors))
    info = analyze_block(sch, sch.get_block("conv2d_nhwc"))
    conv_nhwc_rule(sch, "conv2d_nhwc", info, CPU, order=order)
    sch = schedule_blocks(sch, Target(TARGET))  # the pad stage
    xa, wa, ba = _rand(1, 14, 14, 16), _rand(3, 3, 16, 64), _rand(64)
    out = _run(sch, [xa, packed.pack_conv2d_nhwc_weight(wa, 32), ba], (1, 14, 14, 64))
    np.testing.assert_allclose(out, np.maximum(_torch_conv(xa, wa, 1, 1) + ba, 0), rtol=1e-4, atol=1e-4)


def test_policy_order_forces_the_loop_order_as_the_argument_does():
    # ConvNhwcPolicy.order (pass config, how benchmarks/conv2d.py forces an order) gives the
    # schedule conv_nhwc_rule(order=...) gives; None keeps the rule's own choice.
    from ingot.ir import structural_hash
    from ingot.ir.transform import PassContext
    from ingot.ops.schedule.conv_nhwc import POLICY_CONFIG, ConvNhwcPolicy

    def scheduled(order=None, policy=None):
        sch = Schedule(te.create_prim_func(_packed_conv_layer(16, 14, 64, 3, 1, residual=False)))
        info = analyze_block(sch, sch.get_block("conv2d_nhwc"))
        with PassContext(config={} if policy is None else {POLICY_CONFIG: policy}):
            conv_nhwc_rule(sch, "conv2d_nhwc", info, CPU, order=order)
        return structural_hash(sch.mod)

    default = scheduled()
    forced = {o: scheduled(policy=ConvNhwcPolicy(order=o)) for o in ("rows", "oc")}
    assert forced == {o: scheduled(order=o) for o in ("rows", "oc")}
    assert len(set(forced.values())) == 2 and default in forced.values()
    assert scheduled(policy=ConvNhwcPolicy()) == default


@pytest.mark.parametrize("hw", [7, 14])
def test_big_weight_panels_slice_the_reduction(hw):
    # a 3x3 panel of 160 channels is 184 KB > BIG_PANEL: channel slices of 32 (36 KB, L1), the
    # output block accumulates across slices and the epilogue runs once per oc block; at OW = 14
    # the tile is 14 pixels x 2 vectors (28 zmm accumulators)
    from ingot.ops.schedule.conv_nhwc import choose_kc

    assert choose_kc(9, 160, 32, AVX512_CPU) == 32
    tensors = _packed_conv_layer(160, hw, 64, 3, 1)
    sch, rules = _schedule(tensors, AVX512_TARGET)
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    assert "rc_0" in sch.mod["main"].script()  # the slice loop
    xa, wa, ba, ra = _rand(1, hw, hw, 160), _rand(3, 3, 160, 64), _rand(64), _rand(1, hw, hw, 64)
    out = _run(sch, [xa, packed.pack_conv2d_nhwc_weight(wa, 32), ba, ra], (1, hw, hw, 64))
    np.testing.assert_allclose(out, np.maximum(_torch_conv(xa, wa, 1, 1) + ba + ra, 0), rtol=1e-4, atol=1e-4)
    loop = _kernel_loop(sch, AVX512_TARGET)
    assert loop["zmm"] >= 2 * min(hw, 14) and loop["stack"] == 0, loop


def test_plain_hwio_conv_nhwc_uses_the_rule():
    x, w = te.placeholder((1, 14, 14, 8), name="x"), te.placeholder((3, 3, 8, 32), name="w")
    y = ops.nn.conv2d_nhwc(x, w, strides=1, padding=1)
    sch, rules = _schedule([x, w, y])
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    xa, wa = _rand(1, 14, 14, 8), _rand(3, 3, 8, 32)
    np.testing.assert_allclose(_run(sch, [xa, wa], (1, 14, 14, 32)), _torch_conv(xa, wa, 1, 1), rtol=1e-4, atol=1e-4)


def test_plain_hwio_rgb_stem():
    # nn.conv2d_nhwc reduces (c, ky, kx): the rule reorders before fusing (kx, c) for C = 3
    x, w = te.placeholder((1, 20, 20, 3), name="x"), te.placeholder((7, 7, 3, 32), name="w")
    y = ops.nn.conv2d_nhwc(x, w, strides=2, padding=3)
    sch, rules = _schedule([x, w, y])
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    assert "rx_rc_fused" in sch.mod["main"].script()
    xa, wa = _rand(1, 20, 20, 3), _rand(7, 7, 3, 32)
    np.testing.assert_allclose(_run(sch, [xa, wa], (1, 10, 10, 32)), _torch_conv(xa, wa, 2, 3), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("o", [6, 2])
def test_rule_refuses_what_it_cannot_tile(o):
    # 6 or 2 output channels: no vector of 4 or more lanes divides them -> ScheduleError (2 once
    # divided by zero: fewer channels than the narrowest vector), the driver falls back
    x, w = te.placeholder((1, 7, 7, 8), name="x"), te.placeholder((1, 1, 8, o), name="w")
    y = ops.nn.conv2d_nhwc(x, w)
    sch = Schedule(te.create_prim_func([x, w, y]))
    info = analyze_block(sch, sch.get_block("conv2d_nhwc"))
    with pytest.raises(ScheduleError, match=f"{o} output channels"):
        conv_nhwc_rule(sch, "conv2d_nhwc", info, CPU)
    sch, rules = _schedule([x, w, y])
    assert rules["conv2d_nhwc"] != "conv_nhwc_rule"
    xa, wa = _rand(1, 7, 7, 8), _rand(1, 1, 8, o)
    np.testing.assert_allclose(_run(sch, [xa, wa], (1, 7, 7, o)), _torch_conv(xa, wa, 1, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", CPU_TARGETS + ("llvm -mcpu=x86-64-v2 -num-cores=2",))
@pytest.mark.parametrize("o", [20, 40])
def test_output_channels_off_the_vector_width_are_tiled_on_every_isa(o, target):
    # 20 / 40 outputs: no 16-lane (AVX-512) or, for 20, 8-lane vector divides them; the rule takes
    # the widest vector that does instead of refusing the shape on one ISA only (issue 16)
    x, w = te.placeholder((1, 7, 7, 8), name="x"), te.placeholder((1, 1, 8, o), name="w")
    y = ops.nn.conv2d_nhwc(x, w)
    sch, rules = _schedule([x, w, y], target)
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    if runs_here(target):
        xa, wa = _rand(1, 7, 7, 8), _rand(1, 1, 8, o)
        np.testing.assert_allclose(_run(sch, [xa, wa], (1, 7, 7, o), target), _torch_conv(xa, wa, 1, 0), rtol=1e-4,
                                   atol=1e-4)


def test_narrow_24_channel_projection_uses_8_lane_vectors():
    # MobileNetV2's 144 -> 24 projection: O = 3 x 8 lanes (ymm) instead of the generic fallback
    x, w = te.placeholder((1, 8, 8, 48), name="x"), te.placeholder((1, 1, 48, 24), name="w")
    y = ops.nn.conv2d_nhwc(x, w)
    sch, rules = _schedule([x, w, y])
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    assert "T.vectorized(8)" in sch.mod["main"].script()
    xa, wa = _rand(1, 8, 8, 48), _rand(1, 1, 48, 24)
    np.testing.assert_allclose(_run(sch, [xa, wa], (1, 8, 8, 24)), _torch_conv(xa, wa, 1, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,hw,k,s", [(32, 56, 1, 1), (32, 14, 3, 1), (32, 7, 3, 1), (3, 32, 7, 2)])
def test_micro_kernel_keeps_the_tile_in_zmm_registers(c, hw, k, s):
    # (the last one is the RGB stem: (kx, c) fused, no predictive-commoning spills); compiled for
    # an AVX-512 CPU whatever the host
    sch, _ = _schedule(_packed_conv_layer(c, hw, 64, k, s), AVX512_TARGET)
    loop = _kernel_loop(sch, AVX512_TARGET)
    # MR x 2 vectors: 8 x 2 at OW 56, 7 x 2 at OW 14 / 7, all zmm, no spill
    assert loop["zmm"] >= 14 and loop["zmm"] == loop["fma"] and loop["stack"] == 0, loop


@pytest.mark.parametrize("c,hw,o,s", [(64, 28, 64, 1), (64, 56, 128, 2)])
def test_1x1_pixels_order_matches_torch_keeps_the_tile_in_registers(c, hw, o, s):
    # unsliced 1x1 at OW 28 (2 oc blocks, residual): every oc block inside each 14-pixel tile
    from ingot.ops.schedule.conv_nhwc import ConvNhwcShape, default_conv_params

    oh = (hw - 1) // s + 1
    assert default_conv_params(ConvNhwcShape(1, oh, oh, o, c, 1, 6, 16, 2), AVX512_CPU).order == "pixels"
    sch, rules = _schedule(_packed_conv_layer(c, hw, o, 1, s), AVX512_TARGET)
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    loop = _kernel_loop(sch, AVX512_TARGET)
    # 14 x 2 tile, 4 steps; "rows" order spilled 3-7 accumulators here (6-14 stack accesses)
    assert loop["fma"] == loop["zmm"] == 112 and loop["stack"] <= 2, loop
    xa, wa, ba, ra = _rand(1, hw, hw, c), _rand(1, 1, c, o), _rand(o), _rand(1, oh, oh, o)
    out = _run(sch, [xa, packed.pack_conv2d_nhwc_weight(wa, 32), ba, ra], (1, oh, oh, o))
    np.testing.assert_allclose(out, np.maximum(_torch_conv(xa, wa, s, 0) + ba + ra, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hw,s", [(7, 1), (14, 2)])
def test_7x7_1x1_two_panel_tile_matches_torch(hw, s):
    # a sliced stride-1 1x1 at OW 7: the 7 x 4-vector tile spans two 32-wide weight panels
    # (stride 2 keeps the 7 x 2 tile)
    sch, rules = _schedule(_packed_conv_layer(512, hw, 128, 1, s), AVX512_TARGET)
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    loop = _kernel_loop(sch, AVX512_TARGET)
    assert loop["fma"] == loop["zmm"] == (28 if s == 1 else 56) and loop["stack"] <= 2, loop
    xa, wa, ba, ra = _rand(1, hw, hw, 512), _rand(1, 1, 512, 128), _rand(128), _rand(1, 7, 7, 128)
    out = _run(sch, [xa, packed.pack_conv2d_nhwc_weight(wa, 32), ba, ra], (1, 7, 7, 128))
    np.testing.assert_allclose(out, np.maximum(_torch_conv(xa, wa, s, 0) + ba + ra, 0), rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("o", [192, 320])
def test_7x7_1x1_odd_panel_pairs_use_balanced_one_panel_tasks(o):
    # 3 or 5 two-panel tasks split unevenly over 2 cores (MobileNetV2's 960->320): one-panel
    # tiles in "oc" order instead, o / 32 tasks (6, 10)
    import ingot

    sch, rules = _schedule(_packed_conv_layer(512, 7, o, 1, 1), AVX512_TARGET)
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    src = ingot.build(sch.mod, target=TARGET).get_source()
    assert o // 32 in parallel_tasks(src), "expected (n, 32-wide oc block) parallel tasks"
    loop = _kernel_loop(sch, AVX512_TARGET)
    assert loop["fma"] == loop["zmm"] == 56 and loop["stack"] <= 2, loop  # 7 x 2 vectors x 4 steps
    xa, wa, ba, ra = _rand(1, 7, 7, 512), _rand(1, 1, 512, o), _rand(o), _rand(1, 7, 7, o)
    out = _run(sch, [xa, packed.pack_conv2d_nhwc_weight(wa, 32), ba, ra], (1, 7, 7, o))
    np.testing.assert_allclose(out, np.maximum(_torch_conv(xa, wa, 1, 0) + ba + ra, 0), rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("c,residual", [(384, True), (192, False)])
def test_14x14_1x1_64_outputs_two_panel_row_tiles_match_torch(c, residual):
    # MobileNetV2's 384->64 / 192->64 projections: one 7 x 4-vector tile over both 32-wide
    # panels, (n, oh) rows parallel (14 tasks) instead of 2 (n, oc block) tasks of 7 x 2
    import ingot

    sch, rules = _schedule(_packed_conv_layer(c, 14, 64, 1, 1, residual=residual), AVX512_TARGET)
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    src = ingot.build(sch.mod, target=TARGET).get_source()
    assert 14 in parallel_tasks(src), "expected (n, oh) row tasks"
    loop = _kernel_loop(sch, AVX512_TARGET)
    assert loop["fma"] == loop["zmm"] == 28 and loop["stack"] <= 2, loop  # 7 x 4 vectors, 1 step
    _check_1x1_relu(sch, c, 14, 64, residual, atol=2e-4)


def _check_1x1_relu(sch, c, size, o, residual, atol):
    """Run a scheduled packed 1x1 conv (+ bias, + optional residual, relu) against torch."""
    xa, wa, ba = _rand(1, size, size, c), _rand(1, 1, c, o), _rand(o)
    args, want = [xa, packed.pack_conv2d_nhwc_weight(wa, 32), ba], _torch_conv(xa, wa, 1, 0) + ba
    if residual:
        ra = _rand(1, size, size, o)
        args, want = args + [ra], want + ra
    out = _run(sch, args, (1, size, size, o))
    assert np.abs(out).max() > 0
    np.testing.assert_allclose(out, np.maximum(want, 0), rtol=1e-4, atol=atol)


@pytest.mark.parametrize("c,residual", [(576, True), (960, False)])
def test_7x7_1x1_odd_oc_blocks_split_k_matches_torch(c, residual):
    # MobileNetV2's 576->160 / 960->160 (5 oc blocks at 7x7): the channels split in 2 parts by
    # rfactor, one (part, n) task per core, then a pass summing the partials with the epilogue
    from ingot.ops.schedule.conv_nhwc import ConvNhwcShape
    from ingot.ops.schedule.conv_nhwc_splitk import split_k_kc

    assert split_k_kc(ConvNhwcShape(1, 7, 7, 160, c, 1, 6, 16, 2), AVX512_CPU) == (120 if c == 960 else 288)
    assert not split_k_kc(ConvNhwcShape(1, 7, 7, 320, c, 1, 6, 16, 2), AVX512_CPU)  # 10 blocks: even
    sch, rules = _schedule(_packed_conv_layer(c, 7, 160, 1, 1, residual=residual), AVX512_TARGET)
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    assert "conv2d_nhwc_rf" in sch.mod["main"].script()
    loop = _kernel_loop(sch, AVX512_TARGET)
    assert loop["fma"] == loop["zmm"] == 56 and loop["stack"] == 0, loop  # 7 x 2 vectors x 4 steps
    _check_1x1_relu(sch, c, 7, 160, residual, atol=3e-4)
    # a build's pass context can turn the split off (ConvNhwcPolicy): the one-pass schedule
    from ingot.ir.transform import PassContext
    from ingot.ops.schedule.conv_nhwc import POLICY_CONFIG, ConvNhwcPolicy

    with PassContext(config={POLICY_CONFIG: ConvNhwcPolicy(split_k=0)}):
        sch, rules = _schedule(_packed_conv_layer(c, 7, 160, 1, 1, residual=residual), AVX512_TARGET)
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule" and "conv2d_nhwc_rf" not in sch.mod["main"].script()


# -- depthwise ----------------------------------------------------------------------------------


@pytest.mark.parametrize("c,hw,s", [(32, 14, 1), (64, 7, 1), (48, 16, 2), (96, 9, 2)])
def test_depthwise_nhwc_relu6_matches_torch(c, hw, s):
    x, w, b = te.placeholder((1, hw, hw, c), name="x"), te.placeholder((3, 3, 1, c), name="w"), \
        te.placeholder((c,), name="bias")
    conv = ops.nn.conv2d_nhwc(x, w, strides=s, padding=1, groups=c)
    assert conv.op.name == "depthwise_conv2d_nhwc"
    y = ops.clip(ops.add(conv, b), 0.0, 6.0)
    sch, rules = _schedule([x, w, b, y])
    assert rules["depthwise_conv2d_nhwc"] == "nhwc_window_rule", rules
    oh = (hw - 1) // s + 1
    xa, wa, ba = _rand(1, hw, hw, c) * 3, _rand(3, 3, 1, c), _rand(c)
    out = _run(sch, [xa, wa, ba], (1, oh, oh, c))
    ref = np.clip(_torch_conv(xa, wa, s, 1, groups=c) + ba, 0, 6)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,hw,s", [(960, 7, 1), (576, 14, 2)])
def test_depthwise_7x7_output_row_tasks_match_torch(c, hw, s):
    # 7 output rows (< 4 per core): the rows alone are parallel, the channel blocks serial inside,
    # so the accumulator tile is a per-tile local array (no shared full-size workspace)
    import ingot

    x, w, b = te.placeholder((1, hw, hw, c), name="x"), te.placeholder((3, 3, 1, c), name="w"), \
        te.placeholder((c,), name="bias")
    y = ops.clip(ops.add(ops.nn.conv2d_nhwc(x, w, strides=s, padding=1, groups=c), b), 0.0, 6.0)
    sch, rules = _schedule([x, w, b, y], AVX512_TARGET)
    assert rules["depthwise_conv2d_nhwc"] == "nhwc_window_rule", rules
    src = ingot.build(sch.mod, target=TARGET).get_source()
    assert "local = (float*)ingot_alloc_workspace" not in src and 7 in parallel_tasks(src)
    assert "depthwise_conv2d_nhwc_local[224]" in src  # 7 pixels x 32 channels
    xa, wa, ba = _rand(1, hw, hw, c) * 3, _rand(3, 3, 1, c), _rand(c)
    out = _run(sch, [xa, wa, ba], (1, 7, 7, c))
    np.testing.assert_allclose(out, np.clip(_torch_conv(xa, wa, s, 1, groups=c) + ba, 0, 6), rtol=1e-4, atol=1e-4)


def test_depthwise_micro_kernel_vectorized_over_channels():
    # compiled for an AVX-512 CPU whatever the host
    x, w = te.placeholder((1, 14, 14, 64), name="x"), te.placeholder((3, 3, 1, 64), name="w")
    sch, _ = _schedule([x, w, ops.nn.conv2d_nhwc(x, w, padding=1, groups=64)], AVX512_TARGET)
    # the padding is inlined (a bounds check per tap, uniform over the channel vector): the
    # accumulators go through the stack between taps, but every FMA is a 16-channel zmm one
    assert "pad_temp" not in set(sch.state.blocks("main"))
    loop = _kernel_loop(sch, AVX512_TARGET)
    assert loop["zmm"] >= 7 and loop["zmm"] == loop["fma"], loop
    x, w = te.placeholder((1, 14, 14, 64), name="x"), te.placeholder((3, 3, 1, 64), name="w")
    sch, _ = _schedule([x, w, ops.nn.conv2d_nhwc(x, w, padding=0, groups=64)], AVX512_TARGET)
    loop = _kernel_loop(sch, AVX512_TARGET)  # unpadded: the 7 x 2-vector tile stays in registers
    assert loop["zmm"] >= 14 and loop["zmm"] == loop["fma"] and loop["stack"] == 0, loop


def test_depthwise_tile_on_16_registers_keeps_its_accumulators_in_registers():
    # MobileNetV2's 14x14x384 depthwise on an AVX2 CPU: one-vector rows, 7 of them (the whole
    # row); the taps' address registers may be reloaded from the stack, the ymm tile never is
    haswell = "llvm -mcpu=haswell -num-cores=2"
    x, w = te.placeholder((1, 14, 14, 384), name="x"), te.placeholder((3, 3, 1, 384), name="w")
    sch, _ = _schedule([x, w, ops.nn.conv2d_nhwc(x, w, padding=1, groups=384)], haswell)
    loop = _kernel_loop(sch, haswell)
    assert loop["fma"] >= 7 and loop["vector"] == loop["fma"] and loop["vector_stack"] == 0, loop


# -- pools ----------------------------------------------------------------------------------------


def _torch_nhwc(fn, xa):
    with torch.no_grad():
        return fn(torch.from_numpy(xa).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()


@pytest.mark.parametrize("kind", ["max", "avg", "global"])
def test_nhwc_pools_vectorized_over_channels_match_torch(kind):
    shape = (1, 13, 13, 32)
    x = te.placeholder(shape, name="x")
    if kind == "max":
        y = ops.nn.pool2d(x, "max", 3, 2, 1, layout="NHWC")
        ref_fn = lambda t: torch.nn.functional.max_pool2d(t, 3, 2, 1)  # noqa: E731
    elif kind == "avg":
        y = ops.nn.pool2d(x, "avg", 3, 1, 1, layout="NHWC")
        ref_fn = lambda t: torch.nn.functional.avg_pool2d(t, 3, 1, 1, count_include_pad=False)  # noqa: E731
    else:
        y = ops.nn.global_avg_pool2d(x, layout="NHWC")
        ref_fn = lambda t: t.mean(dim=(2, 3), keepdim=True)  # noqa: E731
    sch, rules = _schedule([x, y], AVX512_TARGET)
    reduce_block = next(n for n in rules if n.startswith(("pool_", "adaptive_pool")) and n != "pool_avg")
    assert rules[reduce_block] == "nhwc_window_rule", rules
    assert "T.vectorized(16)" in sch.mod["main"].script()
    xa = _rand(*shape)
    out = _run(sch, [xa], tuple(int(d) for d in y.shape))
    np.testing.assert_allclose(out, _torch_nhwc(ref_fn, xa), rtol=1e-5, atol=1e-5)


def test_spatial_mean_without_keepdims_uses_the_window_rule():
    # the global pool ConvertLayout leaves before a flatten: (N, H, W, C) -> (N, C)
    x = te.placeholder((2, 7, 7, 64), name="x")
    y = ops.mean(x, axis=(1, 2))
    sch, rules = _schedule([x, y])
    assert rules["T_mean_sum"] == "nhwc_window_rule", rules
    xa = _rand(2, 7, 7, 64)
    np.testing.assert_allclose(_run(sch, [xa], (2, 64)), xa.mean(axis=(1, 2)), rtol=1e-5, atol=1e-6)


def test_window_rule_refuses_nchw_pools():
    x = te.placeholder((1, 16, 8, 8), name="x")
    y = ops.nn.pool2d(x, "max", 2, 2)
    sch = Schedule(te.create_prim_func([x, y]))
    info = analyze_block(sch, sch.get_block("pool_max"))
    with pytest.raises(ScheduleError, match="channels-last"):
        nhwc_window_rule(sch, "pool_max", info, CPU)


@pytest.mark.parametrize("c,hw,o,s", [(512, 14, 64, 1), (512, 14, 128, 2)])
def test_sliced_1x1_oc_order_prefetches_next_weight_slice_matches_torch(c, hw, o, s):
    # a 512-channel 1x1 panel is 64 KB > BIG_PANEL: sliced, (n, oc block) tasks, and each slice
    # prefetches the next slice's weights (ConvNhwcPolicy.weight_prefetch); same numbers
    import ingot
    from ingot.ops.schedule.conv_nhwc import ConvNhwcPolicy, ConvNhwcShape, default_conv_params

    WEIGHT_PREFETCH = ConvNhwcPolicy().weight_prefetch

    oh = (hw - 1) // s + 1
    params = default_conv_params(ConvNhwcShape(1, oh, oh, o, c, 1, 6, 16, 2), AVX512_CPU)
    assert (params.order, params.kc, params.prefetch) == ("oc", 128, WEIGHT_PREFETCH), params
    assert default_conv_params(ConvNhwcShape(1, 14, 14, 64, 512, 9, 6, 16, 2), AVX512_CPU).prefetch is None  # 3x3
    sch, rules = _schedule(_packed_conv_layer(c, hw, o, 1, s), AVX512_TARGET)
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    src = ingot.build(sch.mod, target=TARGET).get_source()
    assert src.count("__builtin_prefetch") == 1 and f", 0, {WEIGHT_PREFETCH})" in src
    xa, wa, ba, ra = _rand(1, hw, hw, c), _rand(1, 1, c, o), _rand(o), _rand(1, oh, oh, o)
    out = _run(sch, [xa, packed.pack_conv2d_nhwc_weight(wa, 32), ba, ra], (1, oh, oh, o))
    np.testing.assert_allclose(out, np.maximum(_torch_conv(xa, wa, s, 0) + ba + ra, 0), rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("target", ["llvm -mcpu=znver3 -num-cores=2", "llvm -mcpu=haswell -num-cores=2"])
def test_7_wide_maps_on_16_registers(target):
    # 16 registers hold no 7 x 2-vector tile with its weight vectors: Haswell gets 7 x 1-vector
    # tiles over half a 16-wide panel; an AVX2 Zen core keeps 7 x 2 with the weights read by the
    # FMAs from memory, its loop nest compiled with gcc's Zen tuning (which does that)
    import ingot

    tensors = _packed_conv_layer(64, 14, 64, 3, 1, panel=16)
    sch, rules = _schedule(tensors, target)
    assert rules["conv2d_nhwc"] == "conv_nhwc_rule", rules
    zen = "znver3" in target
    assert ('target("tune=znver3")' in ingot.build(sch.mod, target=target).get_source()) == zen
    loop = _kernel_loop(sch, target)
    assert loop["vector"] == loop["fma"] == (14 if zen else 28) and loop["stack"] == 0, loop
    if runs_here(target):
        xa, wa, ba, ra = _rand(1, 14, 14, 64), _rand(3, 3, 64, 64), _rand(64), _rand(1, 14, 14, 64)
        out = _run(sch, [xa, packed.pack_conv2d_nhwc_weight(wa, 16), ba, ra], (1, 14, 14, 64), target)
        np.testing.assert_allclose(out, np.maximum(_torch_conv(xa, wa, 1, 1) + ba + ra, 0), rtol=1e-4, atol=1e-4)
