"""Models exported by current PyTorch with ``torch.onnx.export(..., dynamo=True)`` (opset 18+, the
exporter's default) and dynamic axes import, compile once and match ONNX Runtime at several sizes."""
from __future__ import annotations

import numpy as np
import pytest

import ingot

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")  # the dynamo exporter's dependency (extra "torch")
ort = pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.slow


def test_gpt2_with_dynamic_batch_and_sequence(tmp_path):
    # GPT-2's reshapes of reshapes over symbolic (batch, seq) must keep `batch` as `batch`
    # (8 * (batch * 96) // 768 did not broadcast against it), and one build serves every size.
    from ingot.testing import architectures

    module, tokens = architectures.build("gpt2", "small")
    path = str(tmp_path / "gpt2.onnx")
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(tokens),), path, input_names=["data"], dynamo=True,
                          dynamic_shapes=({0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")},))
    package = ingot.compile(ingot.load(path), target="llvm -num-cores=2")
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for x in (tokens, np.concatenate([tokens, tokens[:, ::-1]]), tokens[:, :5]):
        expected = session.run(None, {"data": x})[0]
        got = ingot.run(package, {"data": x})
        np.testing.assert_allclose(next(iter(got.values())), expected, rtol=1e-4, atol=1e-5)
