"""Small zoo models (ingot.testing.architectures) with their matmuls on the cblas backend vs ONNX Runtime."""
from __future__ import annotations

import os

import numpy as np
import pytest


@pytest.mark.slow
@pytest.mark.compiler
@pytest.mark.parametrize("name", ["bert", "gpt2", "mobilenet_v2"])
def test_zoo_model_partitioned_for_cblas_matches_onnxruntime(name, tmp_path):
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
    report = G.transform.partition_report(mod, ["cblas"])
    assert any(r["accepted"] and r["op"] in ("matmul", "linear") for r in report)
    ex = G.build(ingot.byoc.partition(mod, ["cblas"]), "llvm")
    assert ex.external and "main" in ex.aot
    got = G.Executor(ex)["main"](x)
    got = (got[0] if isinstance(got, tuple) else got).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)
