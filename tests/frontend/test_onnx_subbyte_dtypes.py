"""Sub-byte integers (int4/uint4/int2/uint2) and float8_e8m0fnu, emulated by the C backend (issue 17):
ONNX Cast / QuantizeLinear / DequantizeLinear compiled and compared bit for bit with the ONNX reference
(`onnx.reference.ReferenceEvaluator`, whose casts are ml_dtypes'), and the runtime's ml_dtypes arrays.
"""
from __future__ import annotations

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import ingot  # noqa: E402
from ingot.testing.onnx_run import run_compiled  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402
from ingot.ops import lowp  # noqa: E402

SUB_BYTE = {"int4": TP.INT4, "uint4": TP.UINT4, "int2": TP.INT2, "uint2": TP.UINT2}
_SRC = {"float32": TP.FLOAT, "float16": TP.FLOAT16, "float64": TP.DOUBLE, "int32": TP.INT32, "int64": TP.INT64,
        "uint8": TP.UINT8, "bool": TP.BOOL}


def _model(nodes: list, inputs: list, outputs: list, opset: int = 25, inits: "list | None" = None):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs], inits or [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=11)


def _reference(model, inputs: dict) -> list:
    return ReferenceEvaluator(model).run(None, inputs)


def _assert_same(got: list, want: list) -> None:
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8) if g.dtype.itemsize == 1 else g,
                                      w.view(np.uint8) if w.dtype.itemsize == 1 else w)


def _values(src: str) -> np.ndarray:
    """Fractions, ties, values that wrap many times, int32 overflow, NaN/Inf (for floats)."""
    rng = np.random.default_rng(5)
    if src == "bool":
        return rng.integers(0, 2, 64).astype(bool)
    if np.dtype(src).kind in "iu":
        info = np.iinfo(src)
        return rng.integers(max(info.min, -(2 ** 40)), min(info.max, 2 ** 40), 400, dtype=np.int64).astype(src)
    x = np.concatenate([rng.standard_normal(300) * 6, np.arange(-20, 20, 0.5), rng.standard_normal(50) * 1e4,
                        [np.nan, np.inf, -np.inf, 2.0 ** 31 + 4, -(2.0 ** 33), 65504.0, -0.0]])
    with np.errstate(over="ignore"):
        return x.astype(src)


@pytest.mark.compiler
@pytest.mark.parametrize("src", list(_SRC))
def test_cast_to_sub_byte_and_back_matches_onnx_reference(src):
    # One model: x -> each sub-byte type (wraps, as ml_dtypes), and each of them back to x's type.
    names = list(SUB_BYTE)
    nodes = [helper.make_node("Cast", ["x"], [f"q_{n}"], to=SUB_BYTE[n]) for n in names]
    nodes += [helper.make_node("Cast", [f"q_{n}"], [f"b_{n}"], to=_SRC[src]) for n in names]
    x = _values(src)
    outputs = [(f"q_{n}", SUB_BYTE[n], [x.size]) for n in names] + [(f"b_{n}", _SRC[src], [x.size]) for n in names]
    model = _model(nodes, [("x", _SRC[src], [x.size])], outputs)
    got = run_compiled(model, {"x": x})
    _assert_same(got, _reference(model, {"x": x}))
    assert [g.dtype.name for g in got[:4]] == names


@pytest.mark.compiler
def test_sub_byte_inputs_sign_extend_and_move_unchanged():
    # int4/int2 inputs arrive in ml_dtypes' layout (low bits); a transpose moves them, casts widen them.
    rng = np.random.default_rng(2)
    xs = {n: rng.integers(-8 if n == "int4" else -2 if n == "int2" else 0,
                          {"int4": 8, "uint4": 16, "int2": 2, "uint2": 4}[n], (3, 5)).astype(getattr(ml_dtypes, n))
          for n in SUB_BYTE}
    nodes, outputs = [], []
    for n in SUB_BYTE:
        nodes += [helper.make_node("Transpose", [n], [f"t_{n}"], perm=[1, 0]),
                  helper.make_node("Cast", [n], [f"w_{n}"], to=TP.INT32)]
        outputs += [(f"t_{n}", SUB_BYTE[n], [5, 3]), (f"w_{n}", TP.INT32, [3, 5])]
    model = _model(nodes, [(n, SUB_BYTE[n], [3, 5]) for n in SUB_BYTE], outputs)
    got = run_compiled(model, xs)
    _assert_same(got, _reference(model, xs))


@pytest.mark.compiler
@pytest.mark.parametrize("qtype", list(SUB_BYTE))
def test_blocked_quantize_dequantize_with_sub_byte_weights_matches_onnx_reference(qtype):
    # Weights and zero points are sub-byte initializers (the packed weights blob holds their bytes).
    rng = np.random.default_rng(11)
    lo, hi = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}[qtype]
    w = rng.integers(lo, hi + 1, (4, 8))
    zp = rng.integers(lo, hi + 1, (4, 2))
    scale = rng.uniform(0.05, 0.5, (4, 2)).astype(np.float32)
    inits = [helper.make_tensor("w", SUB_BYTE[qtype], [4, 8], w.reshape(-1).tolist()),
             helper.make_tensor("zp", SUB_BYTE[qtype], [4, 2], zp.reshape(-1).tolist()),
             helper.make_tensor("s", TP.FLOAT, [4, 2], scale.reshape(-1).tolist())]
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "zp"], ["dw"], axis=1, block_size=4),
             helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1, block_size=4),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["dq"], axis=1, block_size=4)]
    x = (rng.standard_normal((4, 8)) * 2).astype(np.float32)
    x[0, :3] = [100.0, -100.0, 0.5 * scale[0, 0]]   # saturation and a tie
    model = _model(nodes, [("x", TP.FLOAT, [4, 8])],
                   [("dw", TP.FLOAT, [4, 8]), ("q", SUB_BYTE[qtype], [4, 8]), ("dq", TP.FLOAT, [4, 8])],
                   opset=21, inits=inits)
    _assert_same(run_compiled(model, {"x": x}), _reference(model, {"x": x}))


def test_sub_byte_numpy_cast_matches_ml_dtypes():
    for name in SUB_BYTE:
        for src in ("float32", "float64", "int64"):
            x = _values(src)
            with np.errstate(invalid="ignore", over="ignore"):
                want = x.astype(getattr(ml_dtypes, name))
            np.testing.assert_array_equal(lowp.cast_numpy(x, name).view(np.uint8), want.view(np.uint8))


def test_runtime_arrays_keep_ml_dtypes_layout():
    x = np.array([-8, -1, 0, 7], ml_dtypes.int4)
    a = ingot.runtime.array(x)
    assert a.dtype == "int4" and a.numpy().dtype == x.dtype
    np.testing.assert_array_equal(a.numpy().view(np.uint8), [8, 15, 0, 7])


# -- float8_e8m0fnu ----------------------------------------------------------------------------------

def _e8m0_inputs() -> np.ndarray:
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.standard_normal(200) * s for s in (1e-39, 1e-20, 1, 1e30)])
    x = np.concatenate([x, np.exp2(np.arange(-149, 128)), np.exp2(np.arange(-126, 127)) * 1.5,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -2.0, 2.0 ** 127 * 1.25]])
    with np.errstate(over="ignore"):
        return x.astype(np.float32)


@pytest.mark.compiler
def test_cast_to_e8m0_every_round_mode_matches_onnx_reference():
    modes = [(r, s) for r in ("up", "down", "nearest") for s in (1, 0)]
    nodes = [helper.make_node("Cast", ["x"], [f"y_{r}_{s}"], to=TP.FLOAT8E8M0, round_mode=r, saturate=s)
             for r, s in modes]
    x = _e8m0_inputs()
    model = _model(nodes, [("x", TP.FLOAT, [x.size])], [(f"y_{r}_{s}", TP.FLOAT8E8M0, [x.size]) for r, s in modes])
    got = run_compiled(model, {"x": x})
    assert got[0].dtype == np.dtype(ml_dtypes.float8_e8m0fnu)
    _assert_same(got, _reference(model, {"x": x}))


@pytest.mark.compiler
def test_cast_from_e8m0_every_code_matches_ml_dtypes():
    codes = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
    nodes = [helper.make_node("Cast", ["x"], ["f32"], to=TP.FLOAT),
             helper.make_node("Cast", ["x"], ["f16"], to=TP.FLOAT16),
             helper.make_node("Cast", ["x"], ["e4m3"], to=TP.FLOAT8E4M3FN)]
    model = _model(nodes, [("x", TP.FLOAT8E8M0, [256])],
                   [("f32", TP.FLOAT, [256]), ("f16", TP.FLOAT16, [256]), ("e4m3", TP.FLOAT8E4M3FN, [256])])
    f32, f16, e4m3 = run_compiled(model, {"x": codes})
    np.testing.assert_array_equal(f32, codes.astype(np.float32))
    with np.errstate(over="ignore"):   # codes above float16's range become inf, on both sides
        np.testing.assert_array_equal(f16, codes.astype(np.float32).astype(np.float16))
    np.testing.assert_array_equal(e4m3.view(np.uint8), lowp.encode_numpy(codes.astype(np.float32), "float8_e4m3fn"))


# -- BitCast (opset 26) ------------------------------------------------------------------------------

_BITCAST_PAIRS = [("float32", "int32"), ("int32", "float32"), ("float64", "uint64"), ("float16", "int16"),
                  ("uint16", "float16"), ("bfloat16", "int16"), ("uint16", "bfloat16"), ("float16", "bfloat16"),
                  ("bool", "uint8"), ("int8", "bool"), ("uint8", "int8"), ("float8_e4m3fn", "int8"),
                  ("uint8", "float8_e5m2"), ("int4", "uint4"), ("uint4", "int4"), ("uint2", "int2")]


def _random_bits(dtype: str, n: int) -> np.ndarray:
    """Every kind of bit pattern of ``dtype`` (quiet NaNs only: a signalling NaN may be quieted on the way)."""
    from ingot.ir.dtype import DataType

    npd = DataType(dtype).numpy_dtype()
    rng = np.random.default_rng(4)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if DataType(dtype).is_sub_byte_int:
        return rng.integers(0, 1 << DataType(dtype).bits, n).astype(np.uint8).view(npd)
    raw = rng.integers(0, 256, n * npd.itemsize).astype(np.uint8).view(npd)
    if npd.kind == "f" or npd.name == "bfloat16":
        with np.errstate(over="ignore"):   # float64 patterns beyond float32 only need the NaN test
            vals = raw.astype(np.float32)
        raw = np.where(np.isnan(vals), npd.type(np.nan), raw).astype(npd)
    return raw


@pytest.mark.compiler
def test_bitcast_matches_onnx_reference_bit_for_bit():
    from ingot.ir.dtype import DataType

    onnx_type = {name: helper.np_dtype_to_tensor_dtype(DataType(name).numpy_dtype()) for pair in _BITCAST_PAIRS
                 for name in pair}
    nodes, inputs, outputs, feeds = [], [], [], {}
    for k, (src, dst) in enumerate(_BITCAST_PAIRS):
        nodes.append(helper.make_node("BitCast", [f"x{k}"], [f"y{k}"], to=onnx_type[dst]))
        inputs.append((f"x{k}", onnx_type[src], [64]))
        outputs.append((f"y{k}", onnx_type[dst], [64]))
        feeds[f"x{k}"] = _random_bits(src, 64)
    model = _model(nodes, inputs, outputs, opset=26)
    got, want = run_compiled(model, feeds), _reference(model, feeds)
    for (src, dst), g, w in zip(_BITCAST_PAIRS, got, want):
        assert g.dtype == w.dtype, (src, dst)
        if dst == "bool":   # numpy's view keeps the byte; a bool is true for any non-zero byte
            np.testing.assert_array_equal(g, w)
            continue
        if dst == "bfloat16":   # held as float32 in kernels: a signalling NaN comes out quiet (still NaN)
            nan = np.isnan(w.astype(np.float32))
            np.testing.assert_array_equal(np.isnan(g.astype(np.float32)), nan)
            g, w = g[~nan], w[~nan]
        np.testing.assert_array_equal(g.view(f"uint{8 * g.itemsize}"), w.view(f"uint{8 * w.itemsize}"),
                                      err_msg=f"{src} -> {dst}")


def test_bitcast_of_a_scalar_stays_a_scalar_interpreted_andrun_compiled():
    # np.ascontiguousarray made the numpy reference's 0-d result (1,) (a node-suite mismatch)
    model = _model([helper.make_node("BitCast", ["x"], ["y"], to=TP.INT32)], [("x", TP.FLOAT, [])],
                   [("y", TP.INT32, [])], opset=26)
    feeds = {"x": np.array(1.5, np.float32)}
    from ingot.frontend.reference import evaluate

    mod, _ = from_onnx(model, shape_dict={"x": []})
    for got in (run_compiled(model, feeds)[0], np.asarray(evaluate(mod, [feeds["x"]])[0])):
        assert got.shape == () and got == np.array(1.5, np.float32).view(np.int32)


def test_bitcast_of_different_widths_names_the_types():
    model = _model([helper.make_node("BitCast", ["x"], ["y"], to=TP.INT16)], [("x", TP.FLOAT, [4])],
                   [("y", TP.INT16, [4])], opset=26)
    with pytest.raises(Exception, match=r"float32 \(32 bits\) to int16 \(16 bits\)"):
        from_onnx(model)


def test_without_ml_dtypes_arrays_are_the_stored_bytes(monkeypatch):
    import sys

    from ingot.ir.dtype import DataType

    monkeypatch.setitem(sys.modules, "ml_dtypes", None)   # import ml_dtypes now raises ImportError
    assert DataType("int4").numpy_dtype() == np.uint8 and DataType("float8_e8m0fnu").numpy_dtype() == np.uint8
    # numpy's own "int4" means int32: the sub-byte path never asks numpy for it
    codes = lowp.cast_numpy(np.array([-1.0, 9.0, -8.5]), "int4")
    assert codes.dtype == np.uint8 and codes.tolist() == [15, 9, 8]
    assert lowp.sub_byte_values(codes, "int4").tolist() == [-1, -7, -8]


def test_inspect_reports_sub_byte_and_e8m0_as_supported():
    from ingot.frontend.onnx.inspect import inspect_model

    nodes = [helper.make_node("Cast", ["x"], ["y"], to=TP.INT4), helper.make_node("Cast", ["x"], ["z"], to=TP.FLOAT8E8M0)]
    report = inspect_model(_model(nodes, [("x", TP.FLOAT, [3])], [("y", TP.INT4, [3]), ("z", TP.FLOAT8E8M0, [3])]))
    assert report.supported, report
