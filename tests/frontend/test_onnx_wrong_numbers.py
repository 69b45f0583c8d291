"""Cases of ONNX's node suite that compiled and ran but gave wrong numbers (issue 17), and their kin.

Each model is compiled with the C backend and compared with numpy or ONNX's reference implementation
(``onnx.reference``), never with hard-coded outputs:

* ``Mod``: fmod=0 is numpy's ``mod`` (sign of the divisor), fmod=1 C's ``fmod`` (sign of the dividend),
  including infinities, NaN and signed zeros (it was composed from a division: NaN for an infinite divisor);
* max/min reductions start from -inf/+inf, so a row of -inf reduces to -inf (it gave -FLT_MAX, and
  Attention's fully-masked-row guard, ``ReduceMax(bias) == -inf``, never fired: NaN rows);
* float16/bfloat16 MatMul, Gemm, Conv, reductions accumulate in float32 (they accumulated in float16:
  up to 6 ulp off), and a float16 Softmax rounds each step as the reference does;
* Elu/Celu use ``expm1`` (``exp(x) - 1`` cancels in float16/bfloat16);
* a bfloat16 constant could not be hashed (the buffer protocol refuses ml_dtypes): bfloat16 models failed.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from ingot.testing.onnx_run import run_compiled  # noqa: E402

pytestmark = pytest.mark.compiler

_ELEM = {np.dtype("float16"): TP.FLOAT16, np.dtype("float32"): TP.FLOAT, np.dtype("float64"): TP.DOUBLE,
         np.dtype("int8"): TP.INT8, np.dtype("int32"): TP.INT32, np.dtype("int64"): TP.INT64,
         np.dtype("uint16"): TP.UINT16, np.dtype("bool"): TP.BOOL}
try:
    import ml_dtypes

    _ELEM[np.dtype(ml_dtypes.bfloat16)] = TP.BFLOAT16
except ImportError:  # onnx depends on ml_dtypes; kept optional all the same
    ml_dtypes = None


def _model(nodes, inputs: dict, outputs: dict, opset: int = 21, inits=()):
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(k, _ELEM[v.dtype], v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, _ELEM[np.dtype(d)], s) for k, (d, s) in outputs.items()], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _reference(model, inputs: dict) -> list:
    with np.errstate(all="ignore"):
        return ReferenceEvaluator(model).run(None, inputs)


def _exact_then_rounded(model, inputs: dict) -> np.ndarray:
    """The model's first output computed in float64 from the same (half) inputs, rounded to float16."""
    m64 = onnx.ModelProto()
    m64.CopyFrom(model)
    for vi in list(m64.graph.input) + list(m64.graph.output):
        if vi.type.tensor_type.elem_type == TP.FLOAT16:
            vi.type.tensor_type.elem_type = TP.DOUBLE
    wide = {k: v.astype(np.float64) if v.dtype == np.float16 else v for k, v in inputs.items()}
    return ReferenceEvaluator(m64).run(None, wide)[0]


# ------------------------------------------------------------------------------------------------ Mod
_EDGE_X = [0.0, -0.0, 0.0, -0.0, -3.0, 3.0, -1.0, 1.0, np.inf, -np.inf, 1.0, 1.0, np.nan, 1.0, -4.3, 7.2, 5.0, 1e30]
_EDGE_Y = [-2.0, 2.0, 2.0, -2.0, np.inf, np.inf, -np.inf, -np.inf, 2.0, 2.0, 0.0, -0.0, 2.0, np.nan, 2.1, -3.4, 8.0, 3.0]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_float_matches_numpy_on_edge_cases(dtype, fmod):
    x, y = np.array(_EDGE_X, dtype), np.array(_EDGE_Y, dtype)
    model = _model([helper.make_node("Mod", ["x", "y"], ["z"], fmod=fmod)], {"x": x, "y": y},
                   {"z": (dtype, x.shape)})
    (got,) = run_compiled(model, {"x": x, "y": y})
    with np.errstate(all="ignore"):
        want = np.fmod(x, y) if fmod else np.mod(x, y)
    np.testing.assert_array_equal(got, want)  # NaN where numpy has NaN, equal elsewhere
    finite_zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[finite_zero]), np.signbit(want[finite_zero]))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_int_matches_numpy(dtype, fmod):
    x = np.array([-4, 7, 5, 4, -7, 8, -9, 0], dtype)
    y = np.array([2, -3, 8, -2, 3, 5, -4, -3], dtype)
    model = _model([helper.make_node("Mod", ["x", "y"], ["z"], fmod=fmod)], {"x": x, "y": y},
                   {"z": (dtype, x.shape)})
    (got,) = run_compiled(model, {"x": x, "y": y})
    np.testing.assert_array_equal(got, np.fmod(x, y) if fmod else np.mod(x, y))


# ----------------------------------------------------------------------------- -inf / +inf reductions
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_max_min_of_infinite_rows(op):
    x = np.array([[-np.inf] * 3, [np.inf] * 3, [1.0, -np.inf, 2.0]], np.float32)
    axes = helper.make_tensor("axes", TP.INT64, [1], [1])
    model = _model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)], {"x": x},
                   {"y": ("float32", [3, 1])}, opset=18, inits=[axes])
    (got,) = run_compiled(model, {"x": x})
    want = (np.max if op == "ReduceMax" else np.min)(x, axis=1, keepdims=True)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("select_last_index", [0, 1])
def test_argmax_argmin_of_infinite_rows(op, select_last_index):
    x = np.array([[-np.inf] * 4, [np.inf] * 4, [1.0, -np.inf, 2.0, 2.0], [-np.inf, 1.0, np.inf, np.inf]], np.float32)
    model = _model([helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0, select_last_index=select_last_index)],
                   {"x": x}, {"y": ("int64", [4])}, opset=18)
    (got,) = run_compiled(model, {"x": x})
    np.testing.assert_array_equal(got, _reference(model, {"x": x})[0])


# -------------------------------------------------------------------------------------------- Attention
def _attention_case(dtype, mask=None, is_causal=0, opset=23, softmax_precision=None, mode=None, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random((1, 2, 4, 8)).astype(dtype)
    k = rng.random((1, 2, 6, 8)).astype(dtype)
    v = rng.random((1, 2, 6, 8)).astype(dtype)
    inputs = {"Q": q, "K": k, "V": v}
    names = ["Q", "K", "V"]
    if mask is not None:
        inputs["attn_mask"] = mask
        names.append("attn_mask")
    attrs = {"is_causal": is_causal}
    outputs = {"Y": (dtype, [1, 2, 4, 8])}
    node_outputs = ["Y"]
    if softmax_precision is not None:
        attrs["softmax_precision"] = softmax_precision
    if mode is not None:
        attrs["qk_matmul_output_mode"] = mode
        node_outputs += ["", "", "qk"]
        outputs["qk"] = (dtype, [1, 2, 4, 6])
    model = _model([helper.make_node("Attention", names, node_outputs, **attrs)], inputs, outputs, opset=opset)
    return model, inputs


@pytest.mark.parametrize("opset", [23, 24])
def test_attention_fully_masked_rows_are_zero(opset):
    mask = np.ones((4, 6), bool)
    mask[0] = False  # query 0 may attend no key: Y and the mode-3 probabilities are 0 there, not NaN
    mask[2, 3:] = False
    model, inputs = _attention_case("float32", mask=mask, opset=opset, mode=3)
    got = run_compiled(model, inputs)
    want = _reference(model, inputs)
    assert not np.isnan(got[0]).any()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_attention_float_mask_with_minus_inf_row_and_causal():
    mask = np.zeros((4, 6), np.float32)
    mask[1] = -np.inf
    model, inputs = _attention_case("float32", mask=mask, is_causal=1)
    (got,) = run_compiled(model, inputs)
    np.testing.assert_allclose(got, _reference(model, inputs)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("is_causal", [0, 1])
def test_attention_float16_matches_reference(is_causal):
    model, inputs = _attention_case("float16", is_causal=is_causal, seed=3)
    (got,) = run_compiled(model, inputs)
    np.testing.assert_allclose(got.astype(np.float32), _reference(model, inputs)[0].astype(np.float32),
                               rtol=1e-3, atol=1e-7)


# -------------------------------------------------------------------------- float16 accumulation
def _assert_correctly_rounded(got: np.ndarray, exact: np.ndarray) -> None:
    # float32 accumulation of float16 products, rounded once: within one float16 ulp of the exact result.
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - exact) / ulp
    assert err.max() <= 1.0, f"{err.max():.2f} ulp from the exact result"


def test_float16_matmul_accumulates_in_float32():
    rng = np.random.default_rng(1)
    inputs = {"a": rng.random((2, 3, 4, 64)).astype(np.float16), "b": rng.random((2, 3, 64, 5)).astype(np.float16)}
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], inputs, {"y": ("float16", [2, 3, 4, 5])})
    (got,) = run_compiled(model, inputs)
    assert got.dtype == np.float16
    _assert_correctly_rounded(got, _exact_then_rounded(model, inputs))


def test_float16_gemm_accumulates_in_float32():
    rng = np.random.default_rng(2)
    inputs = {"a": rng.random((4, 96)).astype(np.float16), "b": rng.random((7, 96)).astype(np.float16)}
    model = _model([helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)], inputs, {"y": ("float16", [4, 7])})
    (got,) = run_compiled(model, inputs)
    _assert_correctly_rounded(got, _exact_then_rounded(model, inputs))


@pytest.mark.parametrize("group", [1, 4])
def test_float16_conv_accumulates_in_float32(group):
    rng = np.random.default_rng(3)
    inputs = {"x": rng.random((1, 16, 8, 8)).astype(np.float16),
              "w": rng.random((8, 16 // group, 3, 3)).astype(np.float16)}
    model = _model([helper.make_node("Conv", ["x", "w"], ["y"], group=group)], inputs,
                   {"y": ("float16", [1, 8, 6, 6])})
    (got,) = run_compiled(model, inputs)
    _assert_correctly_rounded(got, _exact_then_rounded(model, inputs))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
def test_float16_reduction_accumulates_in_float32(op):
    rng = np.random.default_rng(4)
    inputs = {"x": rng.random((3, 512)).astype(np.float16)}
    axes = helper.make_tensor("axes", TP.INT64, [1], [1])
    model = _model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)], inputs, {"y": ("float16", [3])},
                   opset=18, inits=[axes])
    (got,) = run_compiled(model, inputs)
    _assert_correctly_rounded(got, _exact_then_rounded(model, inputs))


def test_float16_softmax_rounds_like_the_reference():
    rng = np.random.default_rng(5)
    inputs = {"x": (rng.random((4, 3, 64)) * 8 - 4).astype(np.float16)}
    model = _model([helper.make_node("Softmax", ["x"], ["y"])], inputs, {"y": ("float16", [4, 3, 64])})
    (got,) = run_compiled(model, inputs)
    np.testing.assert_array_equal(got, _reference(model, inputs)[0])


# ----------------------------------------------------------------------------------------- Elu family
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("op,attrs", [("Elu", {"alpha": 1.0}), ("Celu", {"alpha": 2.0}), ("Selu", {})])
def test_elu_family_near_zero(dtype, op, attrs):
    x = np.array([-3.0, -0.5, -0.01, -1e-3, -1e-6, 0.0, 0.5, 3.0], dtype)
    model = _model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, {"y": (dtype, x.shape)}, opset=18)
    (got,) = run_compiled(model, {"x": x})
    np.testing.assert_allclose(got, _reference(model, {"x": x})[0], rtol=1e-3 if dtype == "float16" else 1e-6,
                               atol=1e-7)


@pytest.mark.skipif(ml_dtypes is None, reason="needs ml_dtypes")
@pytest.mark.parametrize("op,attrs", [("Elu", {"alpha": 1.0}), ("Celu", {"alpha": 2.0})])
def test_elu_family_bfloat16_matches_reference(op, attrs):
    x = np.array([-3.0, -0.5, -0.01, 0.0, 0.5, 3.0], ml_dtypes.bfloat16)
    model = _model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, {"y": (x.dtype, x.shape)}, opset=22)
    (got,) = run_compiled(model, {"x": x})
    assert got.dtype == x.dtype
    np.testing.assert_allclose(got.astype(np.float32), _reference(model, {"x": x})[0].astype(np.float32),
                               rtol=1e-3, atol=1e-7)


@pytest.mark.skipif(ml_dtypes is None, reason="needs ml_dtypes")
def test_attention_bfloat16_causal_matches_reference():
    model, inputs = _attention_case(ml_dtypes.bfloat16, is_causal=1, seed=7)
    (got,) = run_compiled(model, inputs)
    want = _reference(model, inputs)[0]
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3, atol=1e-7)
