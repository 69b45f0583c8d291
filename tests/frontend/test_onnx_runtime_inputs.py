"""ONNX ops whose shape-like inputs arrive at run time (issue 17): Resize scales/sizes/roi, Split sizes,
Trilu k, OneHot depth/values, Col2Im image_shape, DFT axis, STFT frame_step, AffineGrid size, window
lengths, and a shape holding run-time dims used as data (CenterCropPad's expansion). Each model is
compiled once, run on inputs whose run-time values differ, and compared with ONNX's reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
RNG = np.random.default_rng(0)


def _model(nodes, inputs, outputs, opset=19, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _out(name, rank, elem=F):
    return helper.make_tensor_value_info(name, elem, [f"{name}_{k}" for k in range(rank)])


def _builtins(mod):
    return [b.value.attrs["kind"] for b in mod["main"].body.blocks[0].bindings
            if isinstance(b.value, G.Call) and b.value.op.name == "builtin"]


def _check(model, feeds_list, rtol=1e-5, atol=1e-5):
    """Compile ``model`` once, run every feed, compare each output with ONNX's reference; returns the module."""
    mod, _ = from_onnx(model)
    vm = G.Executor(G.build(mod, "llvm"), ingot.cpu())
    ref = ReferenceEvaluator(model)
    names = [i.name for i in model.graph.input]
    for feeds in feeds_list:
        expected = ref.run(None, dict(zip(names, feeds)))
        out = vm["main"](*feeds)
        outs = list(out) if isinstance(out, tuple) else [out]
        assert len(outs) == len(expected)
        for got, exp in zip(outs, expected):
            got = got.numpy()
            assert got.shape == exp.shape and got.dtype == exp.dtype, (got.shape, exp.shape, got.dtype, exp.dtype)
            np.testing.assert_allclose(got, exp, rtol=rtol, atol=atol)
    return mod


@pytest.mark.compiler
@pytest.mark.parametrize("attrs", [
    {"mode": "linear"},
    {"mode": "cubic", "antialias": 1},
    {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "ceil"},
])
def test_resize_runtime_scales(attrs):
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], **attrs)
    model = _model([node], [_vi("x", F, [1, 2, 6, 8]), _vi("scales", F, [4])], [_out("y", 4)])
    x = RNG.standard_normal((1, 2, 6, 8)).astype("float32")
    mod = _check(model, [[x, np.array([1, 1, 0.5, 0.75], "float32")], [x, np.array([1, 1, 2, 1.5], "float32")]])
    assert "resize" in _builtins(mod)


@pytest.mark.compiler
def test_resize_runtime_sizes_roi_and_static_modes():
    # sizes with keep_aspect_ratio_policy, and tf_crop_and_resize's roi, both graph inputs
    sized = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest", axes=[2, 3],
                             keep_aspect_ratio_policy="not_larger")
    cropped = helper.make_node("Resize", ["x", "roi", "", "sizes4"], ["z"], mode="linear",
                               coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=3.0)
    inputs = [_vi("x", F, [1, 1, 4, 6]), _vi("sizes", I64, [2]), _vi("roi", F, [8]), _vi("sizes4", I64, [4])]
    model = _model([sized, cropped], inputs, [_out("y", 4), _out("z", 4)])
    x = RNG.standard_normal((1, 1, 4, 6)).astype("float32")
    roi = np.array([0, 0, 0.2, -0.1, 1, 1, 0.9, 1.2], "float32")
    _check(model, [[x, np.array([3, 3], "int64"), roi, np.array([1, 1, 3, 5], "int64")],
                   [x, np.array([8, 5], "int64"), roi, np.array([1, 1, 5, 2], "int64")]])


@pytest.mark.compiler
def test_resize_static_kernel_and_static_cubic():
    # Static nearest stays the resize2d kernel (the plan as before); static cubic (no kernel) runs the builtin
    # with static output dims.
    scales = onnx.numpy_helper.from_array(np.array([1, 1, 2, 2], "float32"), "scales")
    near = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    cubic = helper.make_node("Resize", ["x", "", "scales"], ["z"], mode="cubic")
    x = RNG.standard_normal((1, 2, 3, 4)).astype("float32")
    static = _model([near], [_vi("x", F, [1, 2, 3, 4])], [_vi("y", F, [1, 2, 6, 8])], inits=[scales])
    assert _builtins(_check(static, [[x]])) == []
    mod = _check(_model([cubic], [_vi("x", F, [1, 2, 3, 4])], [_vi("z", F, [1, 2, 6, 8])], inits=[scales]), [[x]])
    assert _builtins(mod) == ["resize"]
    assert str(mod["main"].ret_struct_info) == 'R.Tensor((1, 2, 6, 8), dtype="float32")'


@pytest.mark.compiler
def test_split_runtime_sizes():
    node = helper.make_node("Split", ["x", "split"], ["a", "b", "c"], axis=1)
    model = _model([node], [_vi("x", F, [2, 7]), _vi("split", I64, [3])], [_out(n, 2) for n in "abc"])
    x = RNG.standard_normal((2, 7)).astype("float32")
    _check(model, [[x, np.array([2, 0, 5], "int64")], [x, np.array([3, 3, 1], "int64")]])


@pytest.mark.compiler
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_runtime_k_one_kernel(upper):
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
    model = _model([node], [_vi("x", F, [2, 4, 5]), _vi("k", I64, [])], [_vi("y", F, [2, 4, 5])])
    x = RNG.standard_normal((2, 4, 5)).astype("float32")
    mod = _check(model, [[x, np.array(k, "int64")] for k in (-7, -1, 0, 2, 9)])
    assert _builtins(mod) == []  # the mask is an elementwise kernel of k, compiled once


@pytest.mark.compiler
def test_one_hot_runtime_depth_and_values():
    node = helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=1)
    model = _model([node], [_vi("i", I64, [2, 3]), _vi("depth", F, []), _vi("values", F, [2])], [_out("y", 3)])
    i = np.array([[0, -1, 4], [9, 2, -6]], "int64")
    _check(model, [[i, np.array(5.0, "float32"), np.array([-1, 3], "float32")],
                   [i, np.array(10.0, "float32"), np.array([0.5, 2], "float32")]])


@pytest.mark.compiler
def test_col2im_dft_stft_affine_grid_windows_runtime_attributes():
    nodes = [helper.make_node("Col2Im", ["cols", "image", "block"], ["img"]),
             helper.make_node("DFT", ["sig", "", "axis"], ["spec"]),
             helper.make_node("STFT", ["sig1", "step", "", "flen"], ["frames"]),
             helper.make_node("AffineGrid", ["theta", "size"], ["grid"]),
             helper.make_node("HannWindow", ["wlen"], ["win"], periodic=0)]
    inputs = [_vi("cols", F, [1, 4, 6]), _vi("image", I64, [2]), _vi("block", I64, [2]),
              _vi("sig", F, [2, 6, 4, 1]), _vi("axis", I64, []), _vi("sig1", F, [1, 16, 1]),
              _vi("step", I64, []), _vi("flen", I64, []), _vi("theta", F, [1, 2, 3]), _vi("size", I64, [4]),
              _vi("wlen", I64, [])]
    model = _model(nodes, inputs, [_out("img", 4), _out("spec", 4), _out("frames", 4), _out("grid", 4),
                                   _out("win", 1)], opset=20)
    feeds = [RNG.standard_normal((1, 4, 6)).astype("float32"), None, np.array([2, 2], "int64"),
             RNG.standard_normal((2, 6, 4, 1)).astype("float32"), None, RNG.standard_normal((1, 16, 1)).astype(
                 "float32"), None, np.array(8, "int64"), RNG.standard_normal((1, 2, 3)).astype("float32"), None, None]
    first, second = list(feeds), list(feeds)
    first[1], first[4], first[6], first[9], first[10] = (np.array([3, 4], "int64"), np.array(1, "int64"),
                                                         np.array(4, "int64"), np.array([1, 1, 3, 5], "int64"),
                                                         np.array(6, "int64"))
    second[1], second[4], second[6], second[9], second[10] = (np.array([4, 3], "int64"), np.array(-2, "int64"),
                                                              np.array(3, "int64"), np.array([1, 1, 2, 2], "int64"),
                                                              np.array(9, "int64"))
    _check(model, [first, second], rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
def test_runtime_shape_used_as_data():
    # Pad by run-time pads gives fresh dims; their Shape feeds arithmetic (shape_to_tensor), as in CenterCropPad.
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"]),
             helper.make_node("Shape", ["p"], ["s"]),
             helper.make_node("Sub", ["s", "delta"], ["y"])]
    model = _model(nodes, [_vi("x", F, [2, 3]), _vi("pads", I64, [4]), _vi("delta", I64, [2])], [_out("y", 1, I64)])
    x = RNG.standard_normal((2, 3)).astype("float32")
    mod = _check(model, [[x, np.array([0, 1, 2, 3], "int64"), np.array([1, 1], "int64")],
                         [x, np.array([1, 0, 0, 0], "int64"), np.array([0, 5], "int64")]])
    assert "shape_to_tensor" in _builtins(mod)


def test_runtime_shape_data_error_without_a_context():
    # The static conversion (graph outputs, loop bodies) still names the problem.
    from ingot.frontend.onnx.importer import Context
    from ingot.graph.runtime_shape import shape_var

    with pytest.raises(Exception, match="symbolic dims"):
        Context.to_expr(np.array([shape_var("rt0"), 2], dtype=object))


@pytest.mark.compiler
def test_dims_of_two_runtime_sources_meet():
    # ConstantOfShape(s) has the dims of s, Range(0, n, 1) a size of its own: their Add relabels the range's
    # size to s's (match_cast), one kernel; a run where they differ is an error, not a broadcast guess.
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["z"], value=helper.make_tensor("v", F, [1], [0.5])),
             helper.make_node("Range", ["zero", "n", "one"], ["r"]),
             helper.make_node("Cast", ["r"], ["rf"], to=F),
             helper.make_node("Add", ["z", "rf"], ["y"])]
    model = _model(nodes, [_vi("s", I64, [2]), _vi("n", I64, [])], [_out("y", 2)],
                   inits=[onnx.numpy_helper.from_array(np.array(0, "int64"), "zero"),
                          onnx.numpy_helper.from_array(np.array(1, "int64"), "one")])
    mod = _check(model, [[np.array([2, 3], "int64"), np.array(3, "int64")],
                         [np.array([4, 5], "int64"), np.array(5, "int64")]])
    assert "match_cast" in _builtins(mod)
    vm = G.Executor(G.build(mod, "llvm"), ingot.cpu())
    with pytest.raises(Exception, match="match_cast: axis 0 has size 4"):
        vm["main"](np.array([2, 3], "int64"), np.array(4, "int64"))


@pytest.mark.compiler
def test_static_slice_of_a_runtime_size():
    # Pad by run-time pads, then a constant Slice [1:4] of the padded axis: ONNX clamps the end against a size
    # only the run knows, so the slice builtin takes it (a short axis gives fewer rows, as in the reference).
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"]),
             helper.make_node("Slice", ["p", "starts", "ends", "axes"], ["y"])]
    inits = [onnx.numpy_helper.from_array(np.array(v, "int64"), n)
             for n, v in (("starts", [1]), ("ends", [4]), ("axes", [0]))]
    model = _model(nodes, [_vi("x", F, [2, 3]), _vi("pads", I64, [4])], [_out("y", 2)], inits=inits)
    x = RNG.standard_normal((2, 3)).astype("float32")
    _check(model, [[x, np.array([0, 1, 0, 0], "int64")], [x, np.array([2, 0, 3, 1], "int64")]])
