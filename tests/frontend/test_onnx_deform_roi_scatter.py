"""ONNX DeformConv, RoiAlign and TensorScatter (issue 17): imported, run through the graph reference
(the ops' numpy references) and compiled with the C backend, compared with ONNX's reference
implementation (ONNX Runtime lacks DeformConv and TensorScatter, and its RoiAlign departs from the
specification's half_pixel rule in older releases).
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from test_onnx_image_signal_ops import _check, _ingot, _model  # noqa: E402 - its ONNX model and reference helpers

_RNG = np.random.default_rng(17)


def _f32(*shape, scale=1.0):
    return (_RNG.standard_normal(shape) * scale).astype("float32")


@pytest.mark.compiler
@pytest.mark.parametrize("with_bias,with_mask,group,offset_group,strides,pads,dilations", [
    (False, False, 1, 1, (1, 1), (1, 1, 1, 1), (1, 1)),
    (True, True, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1)),
    (True, True, 2, 2, (1, 2), (1, 0, 2, 1), (2, 1)),
    (False, True, 1, 2, (2, 1), (0, 1, 0, 1), (1, 2)),
])
def test_deform_conv_matches_onnx_reference(with_bias, with_mask, group, offset_group, strides, pads, dilations):
    n, c, h, w, oc, kh, kw = 2, 4, 6, 7, 6, 3, 2
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    inputs = {"X": _f32(n, c, h, w), "W": _f32(oc, c // group, kh, kw),
              "offset": _f32(n, offset_group * kh * kw * 2, oh, ow, scale=2.0)}
    names = ["X", "W", "offset", "", ""]
    if with_bias:
        inputs["B"], names[3] = _f32(oc), "B"
    if with_mask:
        inputs["mask"], names[4] = _RNG.random((n, offset_group * kh * kw, oh, ow)).astype("float32"), "mask"
    while names[-1] == "":
        names.pop()
    node = helper.make_node("DeformConv", names, ["Y"], kernel_shape=[kh, kw], group=group, offset_group=offset_group,
                            strides=list(strides), pads=list(pads), dilations=list(dilations))
    _check(_model(node, inputs), inputs, rtol=1e-4, atol=1e-4, onnx_reference=True)


def _rois(count: int, size: float) -> np.ndarray:
    lo = _RNG.random((count, 2)) * size - 1.0
    rois = np.concatenate([lo, lo + _RNG.random((count, 2)) * size * 0.7 - 0.5], axis=1)
    rois[0] = [2.0, 3.0, 1.5, 2.5]              # inverted: empty under half_pixel, 1x1 under output_half_pixel
    return rois.astype("float32")


@pytest.mark.compiler
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("coords", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio", [2, 0])
def test_roi_align_matches_onnx_reference(mode, coords, sampling_ratio):
    inputs = {"X": _f32(2, 3, 10, 9), "rois": _rois(6, 12.0), "batch_indices": np.array([0, 1, 1, 0, 1, 0], "int64")}
    node = helper.make_node("RoiAlign", ["X", "rois", "batch_indices"], ["Y"], mode=mode, output_height=3,
                            output_width=4, sampling_ratio=sampling_ratio, spatial_scale=0.8,
                            coordinate_transformation_mode=coords)
    _check(_model(node, inputs), inputs, rtol=1e-5, atol=1e-5, onnx_reference=True)


@pytest.mark.compiler
@pytest.mark.parametrize("mode,shape,update_len,axis,starts", [
    ("linear", (2, 3, 6, 4), 2, -2, [0, 4]),
    ("circular", (2, 3, 6, 4), 3, -2, [5, 2]),
    ("linear", (3, 5, 4), 1, 1, [4, 0, 2]),
    ("circular", (2, 4, 3), 4, 1, None),
])
def test_tensor_scatter_matches_onnx_reference(mode, shape, update_len, axis, starts):
    upd_shape = list(shape)
    upd_shape[axis] = update_len
    inputs = {"past": _f32(*shape), "update": _f32(*upd_shape)}
    names = ["past", "update"]
    if starts is not None:
        inputs["write_indices"], names = np.array(starts, "int64"), names + ["write_indices"]
    node = helper.make_node("TensorScatter", names, ["present"], mode=mode, axis=axis)
    _check(_model(node, inputs, opset=24), inputs, rtol=0, atol=0, onnx_reference=True)


def test_deform_conv_wrong_offset_shape_names_the_op_and_the_shape():
    from ingot.frontend.onnx import from_onnx

    inputs = {"X": _f32(1, 2, 5, 5), "W": _f32(2, 2, 3, 3), "offset": _f32(1, 16, 3, 3)}   # 18 channels needed
    node = helper.make_node("DeformConv", ["X", "W", "offset"], ["Y"], kernel_shape=[3, 3])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, 1, v.shape) for k, v in inputs.items()],
                              [helper.make_tensor_value_info("Y", 1, [1, 2, 3, 3])])
    with pytest.raises(Exception, match=r"deform_conv2d.*offset must be \(N, 18, 3, 3\)"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]))


def _roi_model(mode: str, sampling_ratio: int, coords: str, inputs: dict, opset: int = 16):
    # Opset 16: the newest RoiAlign that ONNX Runtime implements (the operator has not changed since).
    node = helper.make_node("RoiAlign", ["X", "rois", "batch_indices"], ["Y"], mode=mode, output_height=2,
                            output_width=3, sampling_ratio=sampling_ratio, spatial_scale=0.5,
                            coordinate_transformation_mode=coords)
    return _model(node, inputs, opset=opset)


@pytest.mark.compiler
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("sampling_ratio", [0, 3])
@pytest.mark.parametrize("coords", ["half_pixel", "output_half_pixel"])
def test_roi_align_rois_far_larger_than_the_image(mode, sampling_ratio, coords):
    # Detection boxes may extend far past the image: an adaptive grid then takes many samples per bin
    # (the 200-wide box below: ceil(100 / 3) = 34 across a 5-pixel-wide map), each counted in the average.
    from onnx.reference import ReferenceEvaluator

    ort = pytest.importorskip("onnxruntime")
    rois = np.array([[-20, -30, 40, 50], [0, 0, 200, 3], [1, 1, 2, 2], [-60, -5, 30, 90], [2.0, 3.0, 1.5, 2.5],
                     [-300, -300, 300, 300]], "float32")
    inputs = {"X": _f32(2, 3, 6, 5), "rois": rois, "batch_indices": np.array([0, 1, 1, 0, 1, 0], "int64")}
    model = _roi_model(mode, sampling_ratio, coords, inputs)
    want = ReferenceEvaluator(model).run(None, inputs)[0]
    ort_out = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    np.testing.assert_allclose(ort_out, want, rtol=1e-5, atol=1e-6)   # the two references agree
    for compiled in (False, True):
        got = _ingot(model, inputs, compiled)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"compiled={compiled}")


@pytest.mark.compiler
@pytest.mark.parametrize("roi,match", [
    ([0, 0, np.nan, 2], "roi_align: a ROI has a non-finite coordinate"),
    ([0, 0, 1e30, 2], "roi_align: a ROI has a non-finite coordinate or needs more than 2\\*\\*24 samples"),
])
def test_roi_align_unsampleable_roi_fails_at_run_time(roi, match):
    # A grid no loop can finish (or a NaN box) has no number to give: the kernel raises instead.
    inputs = {"X": _f32(1, 2, 4, 4), "rois": np.array([[0, 0, 2, 2], roi], "float32"),
              "batch_indices": np.array([0, 0], "int64")}
    with pytest.raises(Exception, match=match):
        _ingot(_roi_model("avg", 0, "half_pixel", inputs), inputs, True)


@pytest.mark.compiler
def test_roi_align_batch_index_outside_the_batch_fails_at_run_time():
    inputs = {"X": _f32(2, 2, 4, 4), "rois": np.array([[0, 0, 2, 2]], "float32"),
              "batch_indices": np.array([2], "int64")}
    with pytest.raises(Exception, match=r"roi_align: a batch_indices entry is outside \[0, N\)"):
        _ingot(_roi_model("max", 2, "half_pixel", inputs), inputs, True)


@pytest.mark.compiler
def test_roi_align_run_time_roi_count_and_batch():
    # Detection models give RoiAlign the boxes of a previous stage: R (and the batch) are run-time sizes,
    # one kernel serves every count.
    import ingot
    from ingot import graph as G
    from ingot.frontend.onnx import from_onnx
    from onnx import TensorProto as TP
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node("RoiAlign", ["X", "rois", "batch_indices"], ["Y"], output_height=2, output_width=3,
                            sampling_ratio=0, spatial_scale=0.5)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TP.FLOAT, ["N", 3, 6, 5]),
                                            helper.make_tensor_value_info("rois", TP.FLOAT, ["R", 4]),
                                            helper.make_tensor_value_info("batch_indices", TP.INT64, ["R"])],
                              [helper.make_tensor_value_info("Y", TP.FLOAT, ["R", 3, 2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    run = G.Executor(G.build(from_onnx(model)[0], "llvm"), ingot.cpu())["main"]
    for rois, batch in ((3, 2), (7, 1)):
        inputs = {"X": _f32(batch, 3, 6, 5), "rois": (_RNG.random((rois, 4)) * 60 - 20).astype("float32"),
                  "batch_indices": _RNG.integers(0, batch, rois).astype("int64")}
        want = ReferenceEvaluator(model).run(None, inputs)[0]
        np.testing.assert_allclose(run(*inputs.values()).numpy(), want, rtol=1e-5, atol=1e-6)
