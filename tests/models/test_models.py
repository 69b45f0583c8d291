"""Small real architectures exported from PyTorch (random weights), compiled by Ingot, compared
with ONNX Runtime at rtol/atol 1e-4."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("ingot.graph.executor")

import ingot  # noqa: E402
from ingot.driver import model as M  # noqa: E402

nn = torch.nn


class _Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class TinyResNet(nn.Module):
    """ResNet-18 style, one block per stage, reduced widths."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.stages = nn.Sequential(_Block(16, 16, 1), _Block(16, 32, 2), _Block(32, 64, 2), _Block(64, 64, 2))
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.stages(self.stem(x)), 1), 1))


class TinyEncoder(nn.Module):
    """A 2-layer BERT-style encoder."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x):
        return self.enc(x)


def _check(module, x, tmp_path):
    torch.manual_seed(0)
    module.eval()
    path = tmp_path / "m.onnx"
    # The fused fast path of nn.TransformerEncoder has no ONNX export; trace the decomposed ops.
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(x),), str(path), input_names=["data"], dynamo=False,
                          opset_version=17)
    expected = ort.InferenceSession(str(path)).run(None, {"data": x})[0]
    package = M.compile(M.load(str(path)))
    got = ingot.run(package, {"data": x})
    np.testing.assert_allclose(list(got.values())[0], expected, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.compiler
def test_tiny_resnet(tmp_path):
    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype("float32")
    _check(TinyResNet(), x, tmp_path)


@pytest.mark.slow
@pytest.mark.compiler
def test_tiny_bert_encoder(tmp_path):
    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((1, 16, 32)).astype("float32")
    _check(TinyEncoder(), x, tmp_path)
