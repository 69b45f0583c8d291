"""ONNX GridSample, AffineGrid and the signal/linear-algebra ops of issue 17: imported, compiled with
the C backend, compared with ONNX Runtime (or ONNX's reference implementation where ONNX Runtime has
no kernel), and the numpy references with the same.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402
from ingot.frontend.reference import evaluate  # noqa: E402

_ELEM = {np.dtype("float32"): TP.FLOAT, np.dtype("float64"): TP.DOUBLE, np.dtype("int64"): TP.INT64,
         np.dtype("int32"): TP.INT32}


def _model(node, inputs: dict, n_out: int = 1, opset: int = 22, consts: dict = None, out_type: int = TP.FLOAT):
    consts = consts or {}
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()]
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, _ELEM[v.dtype], v.shape)
                                        for k, v in inputs.items()],
                          [helper.make_tensor_value_info(o, out_type, None) for o in node.output[:n_out]], inits)
    # output shapes from ONNX's shape inference (the checker wants them)
    return onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]))


def _expected(model, inputs: dict, onnx_reference: bool = False) -> list:
    """ONNX Runtime's outputs, or ONNX's reference implementation's where ONNX Runtime has no kernel
    (or where it departs from the ONNX specification, ``onnx_reference``)."""
    if not onnx_reference:
        try:
            import onnxruntime as ort

            sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            return sess.run(None, inputs)
        except Exception:  # noqa: BLE001 - NOT_IMPLEMENTED for this op/opset: use ONNX's reference
            pass
    return ReferenceEvaluator(model).run(None, inputs)


def _ingot(model, inputs: dict, compiled: bool) -> list:
    mod, _ = from_onnx(model, shape_dict={k: list(v.shape) for k, v in inputs.items()})
    if not compiled:
        return evaluate(mod, list(inputs.values()))
    out = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](*inputs.values())
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return [o.numpy() if hasattr(o, "numpy") else np.asarray(o) for o in outs]


def _check(model, inputs: dict, rtol=1e-5, atol=1e-5, compiled: bool = True, onnx_reference: bool = False) -> None:
    want = _expected(model, inputs, onnx_reference)
    for mode in ((False, True) if compiled else (False,)):
        got = _ingot(model, inputs, mode)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"compiled={mode}")


_GRID_CASES = [(m, p, a) for m, p, a in itertools.product(["nearest", "linear", "cubic"],
                                                          ["zeros", "border", "reflection"], [0, 1])]
# compiled for a representative share (each case compiles a kernel); the numpy reference for all.
# Reflection and cubic are among them: their coordinates are a stage of their own (KEEP_STAGE_KEY), which
# inlined into the taps made a megabyte of C that GCC compiled for minutes.
_GRID_COMPILED = {("nearest", "reflection", 0), ("linear", "zeros", 0), ("linear", "border", 1),
                  ("linear", "reflection", 0), ("cubic", "reflection", 1), ("cubic", "border", 0)}


@pytest.mark.compiler
def test_grid_sample_coordinates_stay_a_stage_of_their_own():
    # The reflected cubic coordinate, inlined into its 16 taps, printed as nested C expressions of
    # ~1 MB (GCC: minutes). Kept as its own loop nest, the whole kernel is a few tens of KB.
    x = np.zeros((1, 1, 3, 2), np.float32)
    grid = np.zeros((1, 2, 4, 2), np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="cubic", padding_mode="reflection")
    package = ingot.compile(ingot.load(_model(node, {"x": x, "grid": grid}, opset=20)), target="llvm")
    assert len(package.executable.lib.get_source()) < 300_000


@pytest.mark.parametrize("mode,padding,align", _GRID_CASES)
def test_grid_sample_2d_matches_onnxruntime(mode, padding, align):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    grid = (rng.standard_normal((2, 4, 6, 2)) * 1.4).astype(np.float32)   # many points outside [-1, 1]
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    compiled = (mode, padding, align) in _GRID_COMPILED
    # ONNX Runtime (as PyTorch) pads each cubic tap but does not first bring the coordinate inside the
    # image as the ONNX specification (and its node tests) do: there the specification is the reference.
    _check(_model(node, {"x": x, "grid": grid}, opset=20), {"x": x, "grid": grid}, rtol=1e-4, atol=1e-5,
           compiled=compiled, onnx_reference=mode == "cubic" and padding != "zeros")


@pytest.mark.compiler
@pytest.mark.parametrize("mode,padding", [("linear", "zeros"), ("nearest", "reflection"), ("linear", "border")])
def test_grid_sample_3d_matches_onnx_reference(mode, padding):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    grid = (rng.standard_normal((1, 2, 3, 4, 3)) * 1.3).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding)
    _check(_model(node, {"x": x, "grid": grid}, opset=20), {"x": x, "grid": grid}, rtol=1e-4)


@pytest.mark.compiler
@pytest.mark.parametrize("dims,align", [(2, 0), (2, 1), (3, 0), (3, 1)])
def test_affine_grid_matches_onnx(dims, align):
    theta = np.random.default_rng(3).standard_normal((2, dims, dims + 1)).astype(np.float32)
    size = np.array([2, 3, 4, 5, 6][: dims + 2], np.int64)
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)
    _check(_model(node, {"theta": theta}, opset=20, consts={"size": size}), {"theta": theta})


@pytest.mark.compiler
@pytest.mark.parametrize("inverse,onesided,complex_in,n", [(0, 0, 0, None), (0, 1, 0, 12), (1, 0, 1, None),
                                                          (1, 1, 1, 10), (0, 0, 1, 6)])
def test_dft_matches_onnxruntime(inverse, onesided, complex_in, n):
    x = np.random.default_rng(4).standard_normal((2, 8, 3, 2 if complex_in else 1)).astype(np.float32)
    consts = {"axis": np.array(1, np.int64)}
    inputs = ["x", "", "axis"]
    if n is not None:
        consts["n"] = np.array(n, np.int64)
        inputs[1] = "n"
    node = helper.make_node("DFT", inputs, ["y"], inverse=inverse, onesided=onesided)
    # the inverse of a one-sided spectrum (irfft) is compared with ONNX's reference: ONNX Runtime
    # does not read it as the specification does (numpy's irfft)
    _check(_model(node, {"x": x}, opset=20, consts=consts), {"x": x}, rtol=1e-4, atol=1e-4,
           onnx_reference=bool(inverse and onesided))


@pytest.mark.compiler
@pytest.mark.parametrize("with_window", [False, True])
def test_stft_matches_onnxruntime(with_window):
    signal = np.random.default_rng(5).standard_normal((2, 64, 1)).astype(np.float32)
    consts = {"step": np.array(8, np.int64), "length": np.array(16, np.int64)}
    if with_window:
        consts["window"] = np.hanning(16).astype(np.float32)
    node = helper.make_node("STFT", ["signal", "step", "window" if with_window else "", "length"], ["y"])
    _check(_model(node, {"signal": signal}, opset=17, consts=consts), {"signal": signal}, rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
def test_col2im_with_pads_strides_dilations_matches_onnxruntime():
    cols = np.random.default_rng(6).standard_normal((2, 2 * 6, 15)).astype(np.float32)   # 3 x 5 blocks
    consts = {"image": np.array([5, 6], np.int64), "block": np.array([2, 3], np.int64)}
    node = helper.make_node("Col2Im", ["cols", "image", "block"], ["y"], dilations=[2, 1], pads=[1, 0, 1, 1],
                            strides=[2, 1])
    _check(_model(node, {"cols": cols}, opset=18, consts=consts), {"cols": cols})


@pytest.mark.compiler
@pytest.mark.parametrize("size", [2, 3, 4])
def test_det_matches_onnxruntime(size):
    x = np.random.default_rng(7).standard_normal((3, 2, size, size)).astype(np.float32)
    node = helper.make_node("Det", ["x"], ["y"])
    _check(_model(node, {"x": x}, opset=11), {"x": x}, rtol=1e-4, atol=1e-5)
