"""Small zoo models (ingot.testing.architectures) with their matmuls on a BYOC backend (cblas, or
ONNX Runtime itself) vs ONNX Runtime on the whole model."""
from __future__ import annotations

import os

import numpy as np
import pytest


@pytest.mark.slow
@pytest.mark.compiler
@pytest.mark.parametrize("name,backend", [("bert", "cblas"), ("gpt2", "cblas"), ("mobilenet_v2", "cblas"),
                                          ("bert", "onnxruntime"), ("resnet50", "onnxruntime")])
def test_zoo_model_partitioned_matches_onnxruntime(name, backend, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import ingot
    import ingot.byoc
    from ingot import graph as G

    from ingot.testing import zoo as Z

    path = os.path.join(str(tmp_path), f"{name}.onnx")
    x = Z.export(name, path)
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"data": x})[0]

    model = ingot.load(path)
    mod = G.transform.BindParams("main", model.params)(model.mod) if model.params else model.mod
    report = G.transform.partition_report(mod, [backend])
    assert any(r["accepted"] and r["op"] in ("matmul", "linear") for r in report)
    ex = G.build(ingot.byoc.partition(mod, [backend]), "llvm")
    assert ex.external
    assert ("main" in ex.aot) == (backend == "cblas")  # ONNX Runtime regions have no C entry: interpreter
    got = G.Executor(ex)["main"](x)
    got = (got[0] if isinstance(got, tuple) else got).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)
