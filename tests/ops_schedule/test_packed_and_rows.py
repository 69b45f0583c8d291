"""Default schedules of the pre-packed weight ops (ingot.ops.packed) and of row reductions: the
rule each block gets, no per-call weight packing stage, numbers vs numpy, and the micro-kernel in
the assembly (zmm FMAs, no stack traffic) for the channel-vectorized depthwise conv."""
from __future__ import annotations

import numpy as np
import pytest

from ingot import ops, te
from ingot.graph.op._ref import conv2d_nchw
from ingot.ops import packed
from ingot.ops.schedule.reduction import row_vector_lanes
from ingot.target import Target

from .schedule_testutil import TARGET, run as _run, schedule as _schedule

from .test_blocked_and_conv import _check_kernels

pytestmark = pytest.mark.compiler

RNG = np.random.default_rng(7)
LANES = Target(TARGET).vector_lanes("float32")


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _copies(sch):
    """Blocks the rules added to pack an operand per call (cache_read copies)."""
    return [b for b in sch.state.blocks("main") if b.endswith("_global")]


def test_transformer_dense_with_packed_weight_is_blocked_without_packing_b():
    m, k, n = 128, 768, 768  # BERT-base projection at sequence length 128
    x, w, b = _rand(1, m, k), _rand(n, k) / 16, _rand(n)
    wp = packed.pack_dense_weight(w, 2 * LANES)
    X, W, B = te.placeholder(x.shape, name="x"), te.placeholder(wp.shape, name="w"), te.placeholder((n,), name="b")
    Y = packed.dense_packed_weight(X, W, B)
    sch, picked = _schedule([X, W, B, Y])
    assert picked["T_dense"] == "blocked_gemm_rule"
    assert _copies(sch) == []  # no per-call copy: weight pre-packed, activations read in place (blocked.py note)
    text = sch.mod["main"].script()
    assert "T.parallel" in text and "T.vectorized" in text
    np.testing.assert_allclose(_run(sch, [x, wp, b], (1, m, n)), x @ w.T + b, rtol=1e-4, atol=1e-3)


def test_small_m_dense_with_one_vector_panels():
    x, w = _rand(2, 256), _rand(80, 256) / 16  # 80 features: 16-wide panels
    wp = packed.pack_dense_weight(w, LANES)
    X, W = te.placeholder(x.shape, name="x"), te.placeholder(wp.shape, name="w")
    sch, picked = _schedule([X, W, packed.dense_packed_weight(X, W)])
    assert picked["T_dense"] == "gemm_rule" and not _copies(sch)
    np.testing.assert_allclose(_run(sch, [x, wp], (2, 80)), x @ w.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,o,hw,stride", [(64, 64, 14, 1), (32, 48, 7, 2)])
def test_packed_conv_is_channel_vectorized_without_packing(c, o, hw, stride):
    x, w = _rand(1, c, hw, hw), _rand(o, c, 3, 3) / 8
    panel = 2 * LANES if o % (2 * LANES) == 0 else LANES
    wp = packed.pack_conv2d_weight(w, panel)
    X, W = te.placeholder(x.shape, name="x"), te.placeholder(wp.shape, name="w")
    Y = ops.relu(packed.conv2d_nchw_packed_weight(X, W, stride, 1))
    sch, picked = _schedule([X, W, Y])
    assert picked["conv2d_nchw"] == "conv_oc_rule" and not _copies(sch)
    ref = np.maximum(conv2d_nchw(x, w, (stride, stride), (1, 1, 1, 1)), 0)
    np.testing.assert_allclose(_run(sch, [x, wp], ref.shape), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,hw,stride", [(32, 28, 1), (96, 14, 1), (48, 14, 2), (144, 7, 1), (16, 112, 1)])
def test_depthwise_conv_vectorizes_over_channels_at_every_width(c, hw, stride):
    x, w, bias = _rand(1, c, hw, hw), _rand(c, 1, 3, 3), _rand(1, c, 1, 1)
    wp = packed.pack_depthwise_weight(w, LANES)
    X, W, B = te.placeholder(x.shape, name="x"), te.placeholder(wp.shape, name="w"), te.placeholder(bias.shape, name="b")
    Y = ops.relu(ops.add(packed.depthwise_conv2d_nchw_packed_weight(X, W, stride, 1), B))
    sch, picked = _schedule([X, W, B, Y])
    assert picked["depthwise_conv2d_nchw"] == "conv_oc_rule", picked
    ref = np.maximum(conv2d_nchw(x, w, (stride, stride), (1, 1, 1, 1), groups=c) + bias, 0)
    np.testing.assert_allclose(_run(sch, [x, wp, bias], ref.shape), ref, rtol=1e-4, atol=1e-4)
    if hw == 14 and stride == 1:
        def check(loop):
            # MR = 7 output columns x one 16-channel vector: 7 zmm FMAs per (ky, kx), no spills
            assert loop["zmm"] >= 7 and loop["stack"] == 0, loop

        # AVX-512's schedule reads 16-wide weight panels: pack them so for its own tensors
        wp16 = te.placeholder(packed.pack_depthwise_weight(w, 16).shape, name="w")
        _check_kernels([X, wp16, B, ops.relu(ops.add(packed.depthwise_conv2d_nchw_packed_weight(X, wp16, stride, 1), B))],
                       sch, check)


def test_row_vector_lanes():
    assert row_vector_lanes(768, 16) == 16 and row_vector_lanes(1000, 16) == 8
    assert row_vector_lanes(12, 16) == 4 and row_vector_lanes(10, 16) is None and row_vector_lanes(None, 16) is None


def test_softmax_and_layernorm_rows_use_vector_accumulators():
    x = _rand(128, 768)
    X = te.placeholder(x.shape, name="x")
    sch, picked = _schedule([X, ops.nn.softmax(X)])
    assert picked["T_softmax_maxelem"] == picked["T_softmax_expsum"] == "row_reduction_rule"
    assert "T_softmax_expsum_rf" in sch.state.blocks("main")
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(_run(sch, [x], x.shape), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    g, b = _rand(768), _rand(768)
    G, B = te.placeholder((768,), name="g"), te.placeholder((768,), name="b")
    sch, picked = _schedule([X, G, B, ops.nn.layer_norm(X, G, B)])
    assert picked["T_layer_norm_sum"] == "row_norm_rule"  # all stages under one row loop (test_row_norm.py)
    mean, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    np.testing.assert_allclose(_run(sch, [x, g, b], x.shape), (x - mean) / np.sqrt(var + 1e-5) * g + b,
                               rtol=1e-4, atol=1e-4)


def test_ragged_row_sum_and_max_use_narrower_vectors():
    x = _rand(6, 1000)
    X = te.placeholder(x.shape, name="x")
    sch, picked = _schedule([X, ops.sum(X, axis=1)])
    assert picked[next(iter(picked))] == "row_reduction_rule"
    assert "T.vectorized(8)" in sch.mod["main"].script()
    np.testing.assert_allclose(_run(sch, [x], (6,)), x.sum(1), rtol=1e-4, atol=1e-4)
    sch, picked = _schedule([X, ops.max_reduce(X, axis=1)])
    np.testing.assert_array_equal(_run(sch, [x], (6,)), x.max(1))
