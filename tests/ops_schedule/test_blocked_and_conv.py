"""The cache-blocked GEMM rule and the channel-vectorized conv rule: numbers vs numpy, the rule
the driver picks, the micro-kernel in the assembly (zmm FMAs, no stack traffic, C not reloaded
every k step), and fallback when the sizes do not fit the tiles."""
from __future__ import annotations


import numpy as np
import pytest

from ingot import ops, te
from ingot.ops.schedule.blocked import blocked_gemm_rule, is_large_gemm
from ingot.ops.schedule.analysis import analyze_block
from ingot.tir.schedule import Schedule
from ingot.tir.schedule.error import ScheduleError

from .schedule_testutil import AVX512_CPU, AVX512_TARGET, kernel_loop as _kernel_loop, run as _run, schedule as _schedule

pytestmark = pytest.mark.compiler

RNG = np.random.default_rng(1)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _check_kernels(tensors, host_sch, check_avx512):
    """The assembly of the host's schedule (full-width FMAs) and, compiled for an AVX-512 CPU
    whatever the host, of that CPU's schedule (``check_avx512(loop)``)."""
    host = _kernel_loop(host_sch)
    assert host["vector"] == host["fma"] > 0, host
    avx512_sch, _ = _schedule(tensors, AVX512_TARGET)
    check_avx512(_kernel_loop(avx512_sch, AVX512_TARGET))


def test_large_matmul_gets_the_blocked_rule_and_matches_numpy():
    A, B = te.placeholder((256, 512), name="A"), te.placeholder((512, 128), name="B")
    C = ops.matmul(A, B)
    sch, picked = _schedule([A, B, C])
    assert picked[C.op.name] == "blocked_gemm_rule"
    a, b = _rand(256, 512), _rand(512, 128)
    np.testing.assert_allclose(_run(sch, [a, b], (256, 128)), a @ b, rtol=1e-4, atol=1e-3)
    text = sch.mod["main"].script()
    assert "B_global" in text and "A_global" not in text  # B packed per k slice, A read in place

    def check(loop):
        # the 8 x 32 tile stays in zmm registers over the k loop: 16 FMAs per k step, and no
        # store of an accumulator inside the loop (GCC keeps C in registers: restrict outlining)
        assert loop["zmm"] >= 16 and loop["stack"] == 0 and loop["stores"] == 0, loop

    _check_kernels([A, B, C], sch, check)


def test_dense_bias_relu_blocked_with_epilogue():
    x, w, bias = te.placeholder((256, 512), name="x"), te.placeholder((128, 512), name="w"), \
        te.placeholder((128,), name="b")
    y = ops.relu(ops.nn.dense(x, w, bias))
    sch, picked = _schedule([x, w, bias, y])
    assert picked["T_dense"] == "blocked_gemm_rule"
    xa, wa, ba = _rand(256, 512), _rand(128, 512), _rand(128)
    np.testing.assert_allclose(_run(sch, [xa, wa, ba], (256, 128)), np.maximum(xa @ wa.T + ba, 0),
                               rtol=1e-4, atol=1e-3)


def test_batch_matmul_blocked():
    a_, b_ = te.placeholder((2, 64, 256), name="a"), te.placeholder((2, 256, 64), name="b")
    c_ = ops.matmul(a_, b_)
    sch, picked = _schedule([a_, b_, c_])
    a, b = _rand(2, 64, 256), _rand(2, 256, 64)
    np.testing.assert_allclose(_run(sch, [a, b], (2, 64, 64)), a @ b, rtol=1e-4, atol=1e-3)
    assert picked[c_.op.name] in ("blocked_gemm_rule", "gemm_rule")


@pytest.mark.parametrize("m,n,k", [(256, 272, 256), (260, 256, 256), (256, 256, 264)])
def test_ragged_sizes_fall_back_to_the_simple_rule(m, n, k):
    A, B = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    C = ops.matmul(A, B)
    sch = Schedule(te.create_prim_func([A, B, C]))
    info = analyze_block(sch, sch.get_block(C.op.name))
    assert is_large_gemm(info)
    # ragged for AVX-512's 8 x 2-vector tile (NR = 32): the blocked rule refuses, gemm_rule takes it
    with pytest.raises(ScheduleError):
        blocked_gemm_rule(sch.copy(), C.op.name, info, AVX512_CPU)
    _, picked = _schedule([A, B, C], AVX512_TARGET)
    assert picked[C.op.name] == "gemm_rule"
    sch2, _ = _schedule([A, B, C])  # whichever rule the host's tile allows: the same numbers
    a, b = _rand(m, k), _rand(k, n)
    np.testing.assert_allclose(_run(sch2, [a, b], (m, n)), a @ b, rtol=1e-4, atol=1e-3)


def test_small_gemm_keeps_the_simple_rule():
    A, B = te.placeholder((64, 64), name="A"), te.placeholder((64, 64), name="B")
    C = ops.matmul(A, B)
    _, picked = _schedule([A, B, C])
    assert picked[C.op.name] == "gemm_rule"


def _conv_ref(x, w, stride, pad):
    import numpy.lib.stride_tricks as st

    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    o, c, kh, kw = w.shape
    oh = (xp.shape[2] - kh) // stride + 1
    ow = (xp.shape[3] - kw) // stride + 1
    win = st.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride][:, :, :oh, :ow]
    return np.einsum("nchwyx,ocyx->nohw", win, w)


# ResNet-like structure at small sizes: widths 14 / 7 / stride 2 / 1x1, channels multiples of 16.
@pytest.mark.parametrize("c,hw,o,k,s", [(16, 14, 32, 3, 1), (16, 7, 32, 3, 1), (8, 14, 16, 3, 2),
                                         (32, 14, 64, 1, 1)])
def test_conv_vectorized_over_output_channels(c, hw, o, k, s):
    x, w = te.placeholder((1, c, hw, hw), name="x"), te.placeholder((o, c, k, k), name="w")
    b = te.placeholder((1, o, 1, 1), name="bias")
    conv = ops.nn.conv2d_nchw(x, w, strides=s, padding=k // 2)
    y = ops.relu(ops.add(conv, b))
    sch, picked = _schedule([x, w, b, y])
    assert picked["conv2d_nchw"] == "conv_oc_rule"
    xa, wa, ba = _rand(1, c, hw, hw), _rand(o, c, k, k), _rand(1, o, 1, 1)
    ref = np.maximum(_conv_ref(xa, wa, s, k // 2) + ba, 0)
    np.testing.assert_allclose(_run(sch, [xa, wa, ba], ref.shape), ref, rtol=1e-4, atol=1e-3)

    def check(loop):
        assert loop["zmm"] >= 7 and loop["stack"] == 0, loop

    _check_kernels([x, w, b, y], sch, check)


def test_depthwise_conv_is_refused_by_the_channel_rule():
    x, w = te.placeholder((1, 32, 14, 14), name="x"), te.placeholder((32, 1, 3, 3), name="w")
    y = ops.nn.conv2d_nchw(x, w, padding=1, groups=32)
    sch, picked = _schedule([x, w, y])
    assert picked["conv2d_nchw"] == "gemm_rule"
    xa, wa = _rand(1, 32, 14, 14), _rand(32, 1, 3, 3)
    ref = np.stack([_conv_ref(xa[:, i:i + 1], wa[i:i + 1], 1, 1)[:, 0] for i in range(32)], axis=1)
    np.testing.assert_allclose(_run(sch, [xa, wa], ref.shape), ref, rtol=1e-4, atol=1e-3)
