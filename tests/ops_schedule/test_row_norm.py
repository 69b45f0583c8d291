"""layer_norm: shifted one-pass statistics (ops.nn.layer_norm) and `row_norm_rule` (every stage
under one parallel row loop), against float64 numpy."""
from __future__ import annotations

import numpy as np
import pytest

from ingot import ops, te
from ingot.target import Target
from ingot.tir.schedule import Schedule
from ingot.ops.schedule.analysis import analyze_block
from ingot.ops.schedule.reduction import row_norm_rule
from ingot.tir.schedule.error import ScheduleError

from .schedule_testutil import run as _run, schedule as _schedule


def _ref(x: np.ndarray, g: np.ndarray, b: np.ndarray, axes: tuple = (-1,)) -> np.ndarray:
    x64 = x.astype(np.float64)
    mu, var = x64.mean(axes, keepdims=True), x64.var(axes, keepdims=True)
    return (x64 - mu) / np.sqrt(var + 1e-5) * g + b


def _layer_norm(shape: tuple, axes: tuple = (-1,)) -> tuple:
    norm = shape[len(shape) - len(axes):]
    X, G, B = te.placeholder(shape, name="x"), te.placeholder(norm, name="g"), te.placeholder(norm, name="b")
    return [X, G, B, ops.nn.layer_norm(X, G, B, axes=axes)]


@pytest.mark.parametrize("offset", [0.0, 100.0])
def test_bert_rows_one_parallel_loop_and_accurate(offset):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((128, 768)) * 2 + offset).astype("float32")
    g, b = rng.standard_normal(768).astype("float32"), rng.standard_normal(768).astype("float32")
    sch, picked = _schedule(_layer_norm(x.shape))
    assert picked["T_layer_norm_sum"] == "row_norm_rule"
    script = sch.mod["main"].script()
    lanes = Target("llvm").vector_lanes("float32")  # the host's: 16 with AVX-512, 8 with AVX2
    assert script.count("T.parallel") == 1 and f"T.vectorized({lanes})" in script
    # the shift keeps E[d^2] - E[d]^2 accurate when |mean| >> std (the unshifted form fails here)
    np.testing.assert_allclose(_run(sch, [x, g, b], x.shape), _ref(x, g, b), rtol=0, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 16, 64), (4, 64), (6, 100), (3, 7)])
def test_batched_ragged_and_short_rows(shape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype("float32")
    g, b = rng.standard_normal(shape[-1:]).astype("float32"), rng.standard_normal(shape[-1:]).astype("float32")
    sch, picked = _schedule(_layer_norm(shape))
    # a 7-wide row has no vector split: the blocks are scheduled one by one
    assert (picked["T_layer_norm_sum"] == "row_norm_rule") == (shape[-1] != 7)
    np.testing.assert_allclose(_run(sch, [x, g, b], shape), _ref(x, g, b), rtol=0, atol=1e-5)


def test_constant_row_gives_beta():
    # variance rounds to <= 0 without the clamp: rstd must stay finite
    x = np.full((4, 64), 3.25, "float32")
    g, b = np.ones(64, "float32"), np.arange(64, dtype="float32")
    sch, _ = _schedule(_layer_norm(x.shape))
    np.testing.assert_allclose(_run(sch, [x, g, b], x.shape), np.broadcast_to(b, x.shape), atol=1e-6)


def test_two_axis_layer_norm_falls_back():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 8, 32)).astype("float32")
    g, b = rng.standard_normal((8, 32)).astype("float32"), rng.standard_normal((8, 32)).astype("float32")
    tensors = _layer_norm(x.shape, axes=(-2, -1))
    sch = Schedule(te.create_prim_func(tensors))
    with pytest.raises(ScheduleError, match="row_norm_rule"):
        row_norm_rule(sch, "T_layer_norm_sum", analyze_block(sch, sch.get_block("T_layer_norm_sum")), Target("llvm -num-cores=2").cpu)
    sch, picked = _schedule(tensors)
    assert picked["T_layer_norm_sum"] != "row_norm_rule"
    np.testing.assert_allclose(_run(sch, [x, g, b], x.shape), _ref(x, g, b, (-2, -1)), rtol=0, atol=1e-5)


def test_softmax_keeps_row_reduction_rule():
    # its exp stage is a full-size row, not a per-row scalar: not a row_norm group
    X = te.placeholder((8, 64), name="x")
    _, picked = _schedule([X, ops.nn.softmax(X)])
    assert picked["T_softmax_maxelem"] == "row_reduction_rule"
