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


class _InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand + ReLU6, 3x3 depthwise + ReLU6, 1x1 linear projection."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                   nn.ReLU6(), nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class TinyMobileNetV2(nn.Module):
    """MobileNetV2 structure (stem, inverted residuals with and without skip, 1x1 head), narrow."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.blocks = nn.Sequential(_InvertedResidual(8, 8, 1, 1), _InvertedResidual(8, 12, 2, 6),
                                    _InvertedResidual(12, 12, 1, 6), _InvertedResidual(12, 16, 2, 6))
        self.head = nn.Sequential(nn.Conv2d(16, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU6())
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        y = self.head(self.blocks(self.stem(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def _randomize_bn(module):
    # Fresh BatchNorm layers are identities; random statistics make the folding actually matter.
    g = torch.Generator().manual_seed(1)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return module


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


@pytest.mark.slow
@pytest.mark.compiler
def test_tiny_mobilenet_v2(tmp_path):
    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype("float32")
    _check(_randomize_bn(TinyMobileNetV2()), x, tmp_path)
