"""ONNX MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv (issue 17): imported, run through the
graph reference and compiled with the C backend, compared exactly (integers) with ONNX's reference
implementation and with ONNX Runtime; per-row zero points and scales, which ONNX's reference broadcasts
along the wrong axis, against a numpy computation of the specification.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from test_onnx_image_signal_ops import _ingot  # noqa: E402 - runs a model interpreted or compiled

_RNG = np.random.default_rng(21)


def _q(dtype: str, *shape) -> np.ndarray:
    info = np.iinfo(dtype)
    return _RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def _model(op: str, inputs: dict, opset: int = 21, **attrs):
    names = list(inputs)
    while names and inputs[names[-1]] is None:
        names.pop()
    feeds = {k: v for k, v in inputs.items() if v is not None}
    node = helper.make_node(op, [k if inputs[k] is not None else "" for k in names], ["y"], **attrs)
    info = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for k, v in feeds.items()]
    graph = helper.make_graph([node], "g", info, [helper.make_tensor_value_info("y", 0, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True), feeds


def _run_both(model, feeds: dict, want: np.ndarray) -> None:
    for compiled in (False, True):
        got = _ingot(model, feeds, compiled)[0]
        assert got.dtype == want.dtype, f"compiled={compiled}: {got.dtype} != {want.dtype}"
        np.testing.assert_array_equal(got, want, err_msg=f"compiled={compiled}")


def _ort(model, feeds: dict) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _check(model, feeds: dict, with_ort: bool = True) -> None:
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    if with_ort:
        np.testing.assert_array_equal(_ort(model, feeds), want)   # the two references agree here
    _run_both(model, feeds, want)


@pytest.mark.compiler
@pytest.mark.parametrize("a_dt,b_dt", [("uint8", "uint8"), ("int8", "int8"), ("uint8", "int8")])
@pytest.mark.parametrize("a_shape,b_shape", [((5, 7), (7, 3)), ((2, 4, 6), (2, 6, 5)), ((3, 4, 6), (6, 5))])
def test_matmul_integer_matches_references(a_dt, b_dt, a_shape, b_shape):
    # per column of B: (N,) for a 2-D B, (..., 1, N) for a batch of them
    zb_shape = (b_shape[-1],) if len(b_shape) == 2 else b_shape[:-2] + (1, b_shape[-1])
    feeds = {"A": _q(a_dt, *a_shape), "B": _q(b_dt, *b_shape), "a_zero_point": _q(a_dt),
             "b_zero_point": _q(b_dt, *zb_shape)}
    model, feeds = _model("MatMulInteger", feeds, opset=10)
    # ONNX Runtime's uint8 x int8 kernel (AVX2 vpmaddubsw) saturates pairs of products at int16: not a reference
    _check(model, feeds, with_ort=(a_dt, b_dt) != ("uint8", "int8"))


@pytest.mark.compiler
def test_matmul_integer_per_row_zero_point_follows_the_specification():
    a, b = _q("uint8", 4, 6), _q("uint8", 6, 3)
    za, zb = _q("uint8", 4), _q("uint8", 3)                # one per row of A, one per column of B
    want = (a.astype(np.int64) - za[:, None].astype(np.int64)) @ (b.astype(np.int64) - zb.astype(np.int64))
    model, feeds = _model("MatMulInteger", {"A": a, "B": b, "a_zero_point": za, "b_zero_point": zb}, opset=10)
    _run_both(model, feeds, want.astype(np.int32))
    model, feeds = _model("MatMulInteger", {"A": a, "B": b, "a_zero_point": za.reshape(4, 1),
                                            "b_zero_point": zb.reshape(1, 3)}, opset=10)
    _check(model, feeds, with_ort=False)       # the (M, 1) / (1, N) forms broadcast in the reference


def _qlinear_matmul_feeds(dt: str, scale_dt: str, a_shape: tuple, b_shape: tuple, per_column: bool) -> dict:
    n = b_shape[-1]
    sc = np.dtype(scale_dt)
    return {"a": _q(dt, *a_shape), "a_scale": np.array(0.02, sc), "a_zero_point": _q(dt),
            "b": _q(dt, *b_shape),
            "b_scale": (_RNG.random(n) * 0.05 + 0.01).astype(sc) if per_column else np.array(0.03, sc),
            "b_zero_point": _q(dt, n) if per_column else _q(dt),
            "y_scale": np.array(0.7, sc), "y_zero_point": _q(dt)}


@pytest.mark.compiler
@pytest.mark.parametrize("dt", ["uint8", "int8"])
@pytest.mark.parametrize("scale_dt", ["float32", "float16"])
@pytest.mark.parametrize("a_shape,b_shape,per_column", [((4, 9), (9, 5), False), ((2, 3, 8), (2, 8, 4), True)])
def test_qlinear_matmul_matches_the_onnx_reference(dt, scale_dt, a_shape, b_shape, per_column):
    model, feeds = _model("QLinearMatMul", _qlinear_matmul_feeds(dt, scale_dt, a_shape, b_shape, per_column))
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    _run_both(model, feeds, want)


@pytest.mark.compiler
@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_qlinear_matmul_matches_onnxruntime(dt):
    # ONNX Runtime requantizes in float32 (the reference in float64): scales that are powers of two make
    # both exact, so they agree on every element, the ties (x.5, rounded to even) and the saturation too.
    feeds = _qlinear_matmul_feeds(dt, "float32", (6, 5), (5, 7), True)
    feeds.update(a_scale=np.array(0.5, "float32"), b_scale=np.full(7, 0.25, "float32"),
                 y_scale=np.array(4.0, "float32"))
    model, feeds = _model("QLinearMatMul", feeds, opset=10)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    info = np.iinfo(dt)
    assert (want == info.min).any() or (want == info.max).any()     # saturation is exercised
    np.testing.assert_array_equal(_ort(model, feeds), want)
    _run_both(model, feeds, want)


@pytest.mark.compiler
def test_qlinear_matmul_per_row_scale_follows_the_specification():
    feeds = _qlinear_matmul_feeds("int8", "float32", (4, 6), (6, 3), True)
    feeds["a_scale"] = np.array([0.01, 0.02, 0.04, 0.005], "float32")             # one per row of a
    feeds["a_zero_point"] = np.array([-3, 0, 5, 7], "int8")
    acc = ((feeds["a"].astype(np.int32) - feeds["a_zero_point"][:, None]) @
           (feeds["b"].astype(np.int32) - feeds["b_zero_point"].astype(np.int32)))
    mult = (feeds["a_scale"][:, None] * feeds["b_scale"] / feeds["y_scale"]).astype(np.float64)
    want = np.clip(np.rint(acc * mult + feeds["y_zero_point"]), -128, 127).astype(np.int8)
    model, feeds = _model("QLinearMatMul", feeds)
    _run_both(model, feeds, want)


_CONV_CASES = [
    # x shape, w shape, attributes
    ((1, 1, 3, 3), (2, 1, 2, 2), {"pads": [1, 1, 1, 1]}),
    ((2, 3, 7, 6), (4, 3, 3, 3), {"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2]}),
    ((1, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "auto_pad": "SAME_UPPER"}),
    ((2, 3, 9), (4, 3, 3), {"pads": [2, 1]}),                                            # 1-D
]


def _conv_reference(op: str, feeds: dict, attrs: dict) -> np.ndarray:
    """ONNX's reference result; a 1-D convolution as the 2-D one of height 1 (the reference's per-channel
    zero points and scales assume 2-D weights)."""
    if feeds["x"].ndim == 4:
        model, feeds = _model(op, feeds, opset=10, **attrs)
        return ReferenceEvaluator(model).run(None, feeds)[0]
    feeds = dict(feeds, x=feeds["x"][:, :, None], w=feeds["w"][:, :, None])
    pads = attrs.get("pads", [0, 0])
    model, feeds = _model(op, feeds, opset=10, **dict(attrs, pads=[0, pads[0], 0, pads[1]]))
    return ReferenceEvaluator(model).run(None, feeds)[0][:, :, 0]


@pytest.mark.compiler
@pytest.mark.parametrize("x_shape,w_shape,attrs", _CONV_CASES)
@pytest.mark.parametrize("w_dt", ["uint8", "int8"])
def test_conv_integer_matches_references(x_shape, w_shape, attrs, w_dt):
    feeds = {"x": _q("uint8", *x_shape), "w": _q(w_dt, *w_shape), "x_zero_point": _q("uint8"),
             "w_zero_point": _q(w_dt, w_shape[0])}                                   # per output channel
    model, feeds = _model("ConvInteger", feeds, opset=10, **attrs)
    _run_both(model, feeds, _conv_reference("ConvInteger", feeds, attrs))
    # ONNX Runtime's ConvInteger takes a per-tensor w_zero_point (and a uint8 w) only
    feeds["w_zero_point"] = _q(w_dt)
    model, feeds = _model("ConvInteger", feeds, opset=10, **attrs)
    want = _conv_reference("ConvInteger", feeds, attrs)
    if w_dt == "uint8":
        np.testing.assert_array_equal(_ort(model, feeds), want)
    _run_both(model, feeds, want)


@pytest.mark.compiler
@pytest.mark.parametrize("x_shape,w_shape,attrs", _CONV_CASES)
@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_qlinear_conv_matches_references(x_shape, w_shape, attrs, dt):
    m = w_shape[0]
    feeds = {"x": _q(dt, *x_shape), "x_scale": np.array(0.05, "float32"), "x_zero_point": _q(dt),
             "w": _q(dt, *w_shape), "w_scale": (_RNG.random(m) * 0.02 + 0.005).astype("float32"),
             "w_zero_point": _q(dt, m) if dt == "uint8" else np.zeros(m, dt), "y_scale": np.array(0.9, "float32"), "y_zero_point": _q(dt),
             "B": _RNG.integers(-2000, 2000, m).astype("int32")}
    model, feeds = _model("QLinearConv", feeds, opset=10, **attrs)
    want = _conv_reference("QLinearConv", feeds, attrs)
    _run_both(model, feeds, want)
    # ONNX Runtime (float32 requantization) differs from the float64 reference by at most one step, on
    # products that land within float32 rounding of a half (it takes x and w of one type here: its
    # uint8 x int8 kernel saturates pairs of products at int16)
    assert np.abs(_ort(model, feeds).astype(np.int32) - want.astype(np.int32)).max() <= 1


@pytest.mark.parametrize("op,inputs,out_shape,match", [
    ("MatMulInteger", {"A": np.zeros((4, 3), "uint8"), "B": np.zeros((3, 2), "uint8"),
                       "a_zero_point": np.zeros(3, "uint8")}, [4, 2],
     r"MatMulInteger.*a_zero_point of shape \(3,\) matches neither.*give \(4,\) or \(\.\.\., 4, 1\)"),
    ("ConvInteger", {"x": np.zeros((1, 1, 3, 3), "uint8"), "w": np.zeros((2, 1, 2, 2), "uint8"),
                     "x_zero_point": np.zeros(2, "uint8")}, [1, 2, 2, 2],
     r"ConvInteger.*x_zero_point must be a scalar \(per-tensor quantization\), got shape \(2,\)"),
])
def test_bad_zero_point_shape_names_the_node_and_the_fix(op, inputs, out_shape, match):
    from ingot.frontend.onnx import from_onnx

    node = helper.make_node(op, list(inputs), ["y"])
    info = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for k, v in inputs.items()]
    graph = helper.make_graph([node], "g", info, [helper.make_tensor_value_info("y", 6, out_shape)])
    with pytest.raises(Exception, match=match):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)]))
