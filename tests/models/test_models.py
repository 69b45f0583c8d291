"""Small real architectures exported from PyTorch (random weights), compiled by Ingot, compared
with ONNX Runtime at rtol/atol 1e-4.

Note: the building blocks come from the shared zoo (``ingot.testing.architectures``: MobileNetV2's
inverted residual, the BERT encoder, the BatchNorm randomization). The two CNNs here are kept on
purpose: ``TinyResNet`` is ResNet-18-style (basic blocks: two 3x3 convs), a structure the zoo's
ResNet-50 (bottlenecks) does not cover, and ``TinyMobileNetV2`` is four inverted residuals (with and
without skip) at 64x64, much cheaper to compile than the zoo's small MobileNetV2 (all 17 blocks)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import ingot  # noqa: E402
from ingot.driver import model as M  # noqa: E402
from ingot.testing import architectures as A  # noqa: E402
from ingot.testing.zoo import export_module  # noqa: E402

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


class TinyMobileNetV2(nn.Module):
    """MobileNetV2 structure (stem, inverted residuals with and without skip, 1x1 head), narrow."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.blocks = nn.Sequential(A.InvertedResidual(8, 8, 1, 1), A.InvertedResidual(8, 12, 2, 6),
                                    A.InvertedResidual(12, 12, 1, 6), A.InvertedResidual(12, 16, 2, 6))
        self.head = nn.Sequential(nn.Conv2d(16, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU6())
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        y = self.head(self.blocks(self.stem(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def _check(module, x, tmp_path):
    torch.manual_seed(0)
    module.eval()
    path = tmp_path / "m.onnx"
    export_module(module, x, str(path))
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
    _check(A.Encoder(layers=2, hidden=32, heads=4, ffn=64), x, tmp_path)  # 2-layer BERT-style


@pytest.mark.slow
@pytest.mark.compiler
def test_tiny_mobilenet_v2(tmp_path):
    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype("float32")
    _check(A.randomize_bn(TinyMobileNetV2()), x, tmp_path)
