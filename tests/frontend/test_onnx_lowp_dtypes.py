"""Emulated float8/float4 (issue 17): exact conversions in numpy and in compiled kernels, and ONNX
Cast / QuantizeLinear / DequantizeLinear with them, against ml_dtypes and ONNX Runtime.

The emulation (`ingot.ops.lowp`) does not use ml_dtypes; these tests do, as the independent reference.
"""
from __future__ import annotations

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper  # noqa: E402

from ingot.testing.onnx_run import run_compiled  # noqa: E402
from ingot.ops import lowp  # noqa: E402

FORMATS = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn"]
_ONNX_TYPE = {"float8_e4m3fn": TP.FLOAT8E4M3FN, "float8_e4m3fnuz": TP.FLOAT8E4M3FNUZ,
              "float8_e5m2": TP.FLOAT8E5M2, "float8_e5m2fnuz": TP.FLOAT8E5M2FNUZ,
              "float4_e2m1fn": TP.FLOAT4E2M1}


def _samples(fmt: str, dtype: str = "float32") -> np.ndarray:
    """Random values over every binade, every representable value and every midpoint (ties), specials."""
    table = lowp.decode_table(fmt)
    finite = np.unique(table[np.isfinite(table)]).astype(np.float64)
    rng = np.random.default_rng(7)
    random = np.concatenate([rng.standard_normal(2000) * s for s in (1e-6, 1e-3, 0.05, 1, 40, 600, 1e5)])
    mids = (finite[:-1] + finite[1:]) / 2
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30]
    with np.errstate(over="ignore"):   # 1e30 and 1e5-scale samples overflow float16 to inf: kept
        return np.concatenate([random, finite, mids, -mids, special]).astype(dtype)


def _ml(fmt: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, fmt))


@pytest.mark.parametrize("fmt", FORMATS)
def test_decode_every_code_matches_ml_dtypes(fmt):
    n = 16 if fmt.startswith("float4") else 256
    codes = np.arange(n, dtype=np.uint8)
    np.testing.assert_array_equal(lowp.decode_numpy(codes, fmt), codes.view(_ml(fmt)).astype(np.float32))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_encode_saturating_matches_ml_dtypes_on_clipped_values(fmt, dtype):
    # ml_dtypes does not saturate: within range (and for NaN) both must agree bit for bit.
    x = _samples(fmt, dtype)
    big = float(np.nanmax(lowp.decode_table(fmt)[np.isfinite(lowp.decode_table(fmt))]))
    finite = np.isfinite(x)
    x = np.where(finite, np.clip(x, -big, big), x)
    x = x[finite | np.isnan(x)]
    got = lowp.encode_numpy(x, fmt).view(_ml(fmt)).astype(np.float32)
    want = x.astype(_ml(fmt)).astype(np.float32)
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])
    assert np.isnan(got[np.isnan(x)]).all() or fmt.startswith("float4")


@pytest.mark.parametrize("fmt", FORMATS)
def test_overflow_saturates_or_becomes_inf_nan(fmt):
    big = lowp._limits(fmt)[0]
    x = np.array([big * 4, -big * 4, np.inf, -np.inf], np.float32)
    assert lowp.decode_numpy(lowp.encode_numpy(x, fmt, saturate=True), fmt).tolist() == [big, -big, big, -big]
    no_sat = lowp.decode_numpy(lowp.encode_numpy(x, fmt, saturate=False), fmt)
    if fmt == "float8_e5m2":
        assert no_sat.tolist() == [np.inf, -np.inf, np.inf, -np.inf]
    elif fmt.startswith("float4"):   # float4 always saturates
        assert no_sat.tolist() == [big, -big, big, -big]
    else:
        assert np.isnan(no_sat).all()


def _cast_model(src: int, dst: int, shape: list, saturate: int = 1):
    node = helper.make_node("Cast", ["x"], ["y"], to=dst, saturate=saturate)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", src, shape)],
                          [helper.make_tensor_value_info("y", dst, shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.compiler
@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("src", ["float32", "float16", "float64"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_compiled_cast_to_and_from_matches_numpy_bit_for_bit(fmt, src, saturate):
    if fmt.startswith("float4") and not saturate:
        pytest.skip("float4 has no saturate attribute (it always saturates)")
    onnx_src = {"float32": TP.FLOAT, "float16": TP.FLOAT16, "float64": TP.DOUBLE}[src]
    x = _samples(fmt, src)
    (y,) = run_compiled(_cast_model(onnx_src, _ONNX_TYPE[fmt], [x.size], saturate), {"x": x})
    assert y.dtype == _ml(fmt)
    np.testing.assert_array_equal(y.view(np.uint8), lowp.encode_numpy(x, fmt, bool(saturate)))
    (back,) = run_compiled(_cast_model(_ONNX_TYPE[fmt], onnx_src, [y.size]), {"x": y})
    np.testing.assert_array_equal(back, lowp.decode_numpy(y, fmt).astype(src))


@pytest.mark.compiler
@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
def test_quantize_dequantize_float8_matches_onnxruntime(fmt):
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32) * 50
    scale = np.array([0.5, 2.0, 1.0, 0.25, 4.0, 1.5], np.float32)
    zp = np.zeros(6, _ml(fmt))
    inits = [helper.make_tensor("s", TP.FLOAT, [6], scale),
             helper.make_tensor("zp", _ONNX_TYPE[fmt], [6], zp.view(np.uint8).tolist(), raw=False)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=1)]
    # ONNX Runtime's Python API cannot return float8 arrays: the round trip is what is compared.
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [4, 6])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [4, 6])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = run_compiled(model, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
