"""Shape arithmetic on symbolic dims in the ONNX importer (models exported with dynamic axes): torch's
``expand(batch, -1, -1)`` (Equal/Where on a shape holding a symbolic dim, then Expand to a symbolic shape),
``1 / sqrt(head_dim)`` from a shape (Cast of the static part of a shape), ``arange(seq)`` position ids
(Range up to a symbolic dim) and a causal-mask buffer sliced to ``[:seq, :seq]`` (Slice to a symbolic end). Compiled once, run at several sizes, compared with ONNX Runtime."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import ingot  # noqa: E402

nn = torch.nn


class ClsTokenScale(nn.Module):
    """ViT's class-token concat with a dynamic batch, scaled by 1/sqrt(feature size) taken from the shape."""

    def __init__(self):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, 8))

    def forward(self, x):
        y = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1)
        return y * (1.0 / torch.sqrt(torch.tensor(x.shape[-1], dtype=torch.float32)))


class PositionIds(nn.Module):
    """GPT-2's learned position embedding indexed by ``arange(seq)`` with a dynamic sequence length."""

    def __init__(self):
        super().__init__()
        self.wpe = nn.Embedding(32, 8)

    def forward(self, x):
        pos = torch.arange(x.shape[1], dtype=torch.int64).unsqueeze(0)
        return x + self.wpe(pos)


class CausalMask(nn.Module):
    """GPT-2's causal attention: a (ctx, ctx) mask buffer sliced to [:seq, :seq] with a dynamic seq."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(16, 16, dtype=torch.bool)))

    def forward(self, x):
        t = x.shape[1]
        att = (x @ x.transpose(1, 2)).masked_fill(~self.mask[:t, :t], float("-inf"))
        return att.softmax(-1) @ x


@pytest.mark.compiler
@pytest.mark.parametrize("module,axes,sizes", [
    (ClsTokenScale, {0: "batch"}, [(1, 5, 8), (3, 5, 8)]),
    (PositionIds, {0: "batch", 1: "seq"}, [(1, 4, 8), (2, 7, 8)]),
    (CausalMask, {1: "seq"}, [(1, 4, 8), (1, 9, 8)]),
])
def test_symbolic_shape_arithmetic_matches_onnxruntime(module, axes, sizes, tmp_path):
    torch.manual_seed(0)
    m = module().eval()
    path = str(tmp_path / "m.onnx")
    x0 = torch.randn(*sizes[0])
    with torch.no_grad():
        torch.onnx.export(m, (x0,), path, input_names=["data"], dynamo=False, opset_version=17,
                          dynamic_axes={"data": axes})
    package = ingot.compile(ingot.load(path))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for shape in sizes:
        x = np.random.default_rng(len(shape)).standard_normal(shape).astype("float32")
        got = list(ingot.run(package, {"data": x}).values())[0]
        np.testing.assert_allclose(got, sess.run(None, {"data": x})[0], rtol=1e-5, atol=1e-6)
