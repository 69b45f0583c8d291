"""The recurrent layers' time-loop kernel (ingot/ops/recurrent.py) compiled, against its numpy reference
(which tests/frontend/test_onnx_rnn.py checks against ONNX Runtime): every layer kind and option, batch
sizes that are and are not multiples of the row tile, static and run-time sizes."""
from __future__ import annotations

import numpy as np
import pytest

from ingot.codegen.build import build_module
from ingot.ops.recurrent import (
    ROW_TILE, RecurrenceSpec, pack_recurrent_weights, recurrence_kernel, recurrence_numpy,
)

pytestmark = pytest.mark.compiler

ACTS = {"LSTM": (("sigmoid", 0, 0), ("tanh", 0, 0), ("tanh", 0, 0)), "GRU": (("sigmoid", 0, 0), ("tanh", 0, 0)),
        "RNN": (("tanh", 0, 0),)}


def _run(kind, reverse, steps, batch, hidden, static=False, acts=None, dtype="float32", **kw):
    spec = RecurrenceSpec(kind, hidden, reverse, (acts or ACTS[kind],) * len(reverse), dtype=dtype, **kw)
    func = recurrence_kernel(spec, steps if static else None, batch if static else None)
    lib = build_module(func.with_attr("global_symbol", "main"), "llvm")
    rng = np.random.default_rng(steps * 100 + batch)
    nd, gh = len(reverse), spec.gate_width
    args = [rng.standard_normal((steps, batch, nd * gh)).astype(dtype),
            pack_recurrent_weights((rng.standard_normal((nd, gh, hidden)) / np.sqrt(hidden)).astype(dtype), spec.panel)]
    optional = {}
    if spec.has_initial_h:
        optional["initial_h"] = rng.standard_normal((nd, batch, hidden)).astype(dtype)
    if spec.has_initial_c:
        optional["initial_c"] = rng.standard_normal((nd, batch, hidden)).astype(dtype)
    if spec.lens_dtype:
        lens = rng.integers(0, steps + 2, batch)
        lens[0], lens[-1] = steps + 1, 0    # one longer than T, one empty (a batch of 1: empty)
        optional["lens"] = lens.astype(spec.lens_dtype)
    if spec.has_peepholes:
        optional["peepholes"] = rng.standard_normal((nd, 3 * hidden)).astype(dtype)
    if spec.has_recurrent_h_bias:
        optional["recurrent_h_bias"] = rng.standard_normal((nd, hidden)).astype(dtype)
    expected = recurrence_numpy(spec, *args, **optional)
    outs = [np.full(e.shape, np.nan, dtype) for e in expected]   # every element must be written
    lib["main"](*args, *optional.values(), *outs)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for name, a, e in zip(("Y", "Y_h", "Y_c"), outs, expected):
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("batch", [1, 3, ROW_TILE, ROW_TILE + 3, 2 * ROW_TILE + 1])
@pytest.mark.parametrize("static", [False, True])
def test_lstm_row_tiles_sequence_lens_peepholes(batch, static):
    # hidden 16: R^T in panels (register-tiled GEMV), row groups full, partial and of one row.
    _run("LSTM", (False, True), 6, batch, 16, static=static, has_initial_h=True, has_initial_c=True,
         lens_dtype="int32", has_peepholes=True, clip=2.0)


def test_unpacked_weights_of_a_hidden_size_off_the_panel():
    _run("LSTM", (True,), 5, ROW_TILE + 1, 12, has_initial_c=True, lens_dtype="int64")


@pytest.mark.parametrize("lbr", [False, True])
def test_gru_both_candidate_forms_with_a_gate_axis_of_several_column_chunks(lbr):
    # hidden 64: the GEMV runs over several 64-column chunks (GRU's second GEMV over the h columns too).
    _run("GRU", (False, True), 5, ROW_TILE + 2, 64, linear_before_reset=lbr, has_recurrent_h_bias=lbr,
         has_initial_h=True, lens_dtype="int64")


def test_rnn_reverse_with_activation_parameters_static_sizes():
    _run("RNN", (True,), 7, 3, 8, static=True, acts=(("scaledtanh", 0.8, 1.3),), lens_dtype="int64")


def test_lstm_input_forget_and_activation_parameters():
    _run("LSTM", (False,), 4, 2, 8, static=True, input_forget=True, has_initial_c=True,
         acts=(("hardsigmoid", 0.3, 0.4), ("leakyrelu", 0.05, 0), ("softsign", 0, 0)))


def test_float64_gru_with_softplus():
    _run("GRU", (False, True), 5, 3, 8, dtype="float64", acts=(("sigmoid", 0, 0), ("softplus", 0, 0)),
         lens_dtype="int32")


@pytest.mark.parametrize("vector_bytes, panel", [(32, 16), (64, 32)])
def test_register_tile_of_the_target_vector_width(vector_bytes, panel):
    # The AVX-512 tile (64-byte vectors, panels of 32 columns) computes the same numbers: GCC's 64-byte
    # vectors run on any host (two ymm halves on AVX2), so the layout and indexing are checked here.
    spec = RecurrenceSpec("GRU", 32, (False, True), (ACTS["GRU"],) * 2, vector_bytes=vector_bytes)
    assert spec.panel == panel
    _run("GRU", (False, True), 5, ROW_TILE + 3, 32, has_initial_h=True, vector_bytes=vector_bytes)
    _run("LSTM", (False,), 4, 3, 32, static=True, has_initial_c=True, vector_bytes=vector_bytes)


def test_target_vector_bytes_and_panels():
    from ingot.ops.recurrent import panel_of, target_vector_bytes, unpack_recurrent_weights, weight_panel

    assert target_vector_bytes("llvm -mcpu=haswell") == 32
    assert target_vector_bytes("llvm -mcpu=znver3") == 32
    assert target_vector_bytes("llvm -mcpu=sapphirerapids") == 64
    assert weight_panel(32, "float32", 64) == 32 and weight_panel(16, "float32", 64) is None
    r = np.random.default_rng(0).standard_normal((2, 96, 32)).astype("float32")
    for p in (16, 32, None):
        rt = pack_recurrent_weights(r, p)
        np.testing.assert_array_equal(unpack_recurrent_weights(rt), r)
        assert panel_of(rt.shape, "float32") == ((p * 4 // 2, True) if p else (32, False))
