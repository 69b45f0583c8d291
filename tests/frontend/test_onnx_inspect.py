"""`ingot.frontend.onnx.inspect_model` and `ingot inspect`: what a model needs, said before compiling."""
from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ingot.frontend.errors import ModelLoadError  # noqa: E402
from ingot.frontend.onnx import inspect_model  # noqa: E402

F = TensorProto.FLOAT


def _vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17, **kw):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8, **kw)


def test_counts_versions_dynamic_inputs():
    w = numpy_helper.from_array(np.ones((8, 4), "float32"), "w")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                helper.make_node("Relu", ["r"], ["y"])],
               [_vi("x", ["batch", 8]), _vi("z", [None, 3])], [_vi("y", ["batch", 4])], [w],
               producer_name="pytorch", producer_version="2.5")
    m.graph.node.append(helper.make_node("Identity", ["z"], ["z2"]))
    m.graph.output.append(_vi("z2", [None, 3]))
    r = inspect_model(m)
    assert (r.opset, r.ir_version, r.producer) == (17, 8, "pytorch 2.5")
    assert r.op_counts == {"Relu": 2, "MatMul": 1, "Identity": 1}
    assert r.supported and r.unsupported == () and r.unsupported_dtypes == {}
    assert r.dynamic_inputs == {"x": {0: "batch"}, "z": {0: "?"}}
    assert (r.num_params, r.param_bytes) == (32, 128)
    assert [i.name for i in r.inputs] == ["x", "z"]  # the initializer is not an input


def test_unsupported_ops_with_reasons():
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c2"])], "body",
                             [_vi("i", [], TensorProto.INT64), _vi("c", [], TensorProto.BOOL)],
                             [_vi("c2", [], TensorProto.BOOL)])
    nodes = [helper.make_node("Loop", ["", "cond"], [], body=body, name="loop0"),
             helper.make_node("NonZero", ["x"], ["nz"], name="nz0"),
             helper.make_node("FusedGemm", ["x", "x"], ["fg"], domain="com.microsoft", name="fg0")]
    m = _model(nodes, [_vi("x", [2, 2]), _vi("cond", [], TensorProto.BOOL)], [_vi("nz", [2, None], TensorProto.INT64)])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    r = inspect_model(m)
    reasons = {u.op_type: (u.node, u.reason) for u in r.unsupported}
    assert "Loop" not in reasons  # control flow converts (ops_control.py)
    assert "NonZero" not in reasons  # a data-dependent output size is a run-time shape (issue 17)
    assert "custom domain 'com.microsoft'" in reasons["com.microsoft.FusedGemm"][1]
    assert r.subgraph_op_counts == {"Identity": 1}
    assert not r.supported and "Loop" not in r.unsupported_ops and r.unsupported_ops["com.microsoft.FusedGemm"] == ["fg0"]


def test_run_time_value_where_a_constant_is_needed():
    # `shape` computed from a graph input's values -> a run-time input (supported); from Shape (folds at
    # import) -> nothing to say; Split's sizes computed at run time -> still unsupported.
    nodes = [helper.make_node("Abs", ["t"], ["t2"]), helper.make_node("Reshape", ["x", "t2"], ["y"], name="rt"),
             helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y2"], name="good"),
             helper.make_node("Split", ["x", "t"], ["y3", "y4"], axis=1, name="bad")]
    m = _model(nodes, [_vi("x", [2, 3]), _vi("t", [2], TensorProto.INT64)],
               [_vi("y", [3, 2]), _vi("y2", [2, 3]), _vi("y3", [2, 1]), _vi("y4", [2, 2])])
    r = inspect_model(m, try_import=False)
    assert [(u.op_type, u.node) for u in r.unsupported] == [("Split", "bad")]
    assert "'split' input (input 1, 't') is a graph input" in r.unsupported[0].reason
    assert [(i.op_type, i.node, i.role, i.input) for i in r.runtime_inputs] == [("Reshape", "rt", "shape", "t2")]
    assert "run-time values (sizes bound as the model runs): Reshape 'rt' shape ('t2')" in r.summary()
    assert list(r.to_dict()["runtime_inputs"]) == [{"op_type": "Reshape", "node": "rt", "role": "shape", "input": "t2"}]


def test_trial_import_reports_attribute_level_problems():
    m = _model([helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], ceil_mode=1, name="up")],
               [_vi("x", [1, 1, 3, 3])], [_vi("y", [1, 1, 2, 2])], opset=18)
    r = inspect_model(m)
    assert [(u.op_type, u.node) for u in r.unsupported] == [("LpPool", "up")]
    assert "ceil_mode" in r.unsupported[0].reason
    assert inspect_model(m, try_import=False).supported  # the converter exists: only the import tells


def test_unsupported_dtypes():
    # complex is not supported; float8 and int4 are emulated (issue 17), so they are
    nodes = [helper.make_node("Identity", ["x"], ["y"], name="keep_c")]
    c64 = TensorProto.COMPLEX64
    r = inspect_model(_model(nodes, [_vi("x", [4], c64)], [_vi("y", [4], c64)], opset=21, ))
    assert list(r.unsupported_dtypes) == ["complex64"]
    assert "'x'" in r.unsupported_dtypes["complex64"]   # where: the graph input that carries it
    assert not r.supported and "unsupported data type: complex64" in r.summary()
    for to in (TensorProto.FLOAT8E4M3FN, TensorProto.INT4):
        low = [helper.make_node("Cast", ["x"], ["q"], to=to, name="to_low"), helper.make_node("Cast", ["q"], ["y"], to=F)]
        assert not inspect_model(_model(low, [_vi("x", [4])], [_vi("y", [4])], opset=21, )).unsupported_dtypes


def test_corrupt_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 3)
    with pytest.raises(ModelLoadError, match="bad.onnx"):
        inspect_model(str(bad))
    with pytest.raises(ModelLoadError, match="no such file"):
        inspect_model(str(tmp_path / "missing.onnx"))


def test_cli_inspect(tmp_path):
    click_testing = pytest.importorskip("click.testing")
    from ingot.cli.main import main

    m = _model([helper.make_node("ImageDecoder", ["x"], ["t"], name="l0"),
                helper.make_node("Relu", ["x"], ["y"])],
               [_vi("x", ["n", 4]), _vi("c", [], TensorProto.BOOL)], [_vi("y", ["n", 4])])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    runner = click_testing.CliRunner()
    out = runner.invoke(main, ["inspect", str(path)])
    assert out.exit_code == 0, out.output
    assert "opset 17, IR version 8" in out.output
    assert "unsupported: ImageDecoder (1 node)" in out.output
    assert "dynamic inputs: x axis 0=n" in out.output
    js = runner.invoke(main, ["inspect", "--json", str(path)])
    data = json.loads(js.output)
    assert data["supported"] is False and data["dynamic_inputs"] == {"x": {"0": "n"}}
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not onnx")
    err = runner.invoke(main, ["inspect", str(bad)])
    assert err.exit_code == 1 and "Traceback" not in err.output and "bad.onnx" in err.output
