"""The architecture zoo (ONNX "light" model families written in torch.nn at small sizes, random weights):
DenseNet, GoogLeNet/Inception, VGG, SqueezeNet, ShuffleNetV2, MobileNetV3, EfficientNet, GPT-2, ViT,
exported to ONNX (opset 17, and opset 11 for a few), compiled with ``ingot.compile`` (default pipeline) and
compared with ONNX Runtime at rtol 1e-4 / atol 1e-5. ResNet/MobileNetV2/BERT are in test_models.py."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from ingot.testing import architectures  # noqa: E402
from ingot.testing import zoo as Z  # noqa: E402

# (name, opset): every zoo model at opset 17; opset 11 where the older export differs most (Split as an
# attribute and Slice/Reshape chains for the channel shuffle; LayerNorm and tanh-GELU decomposed).
CASES = [(name, 17) for name in ("densenet121", "googlenet", "vgg19", "squeezenet1_1", "shufflenet_v2",
                                 "mobilenet_v3_small", "efficientnet_b0", "gpt2", "vit_b16")]
CASES += [("shufflenet_v2", 11), ("gpt2", 11)]


@pytest.mark.slow
@pytest.mark.compiler
@pytest.mark.parametrize("name,opset", CASES, ids=[f"{n}-opset{o}" for n, o in CASES])
def test_zoo_architecture_matches_onnxruntime(name, opset, tmp_path):
    expected, got = Z.export_and_run(name, tmp_path, opset)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_zoo_lists_the_architectures():
    # The benchmark reads the same registry: the real-size names must stay importable without compiling.
    assert {"densenet121", "googlenet", "vgg19", "squeezenet1_1", "shufflenet_v2", "gpt2", "vit_b16"} <= set(architectures.NAMES)
    with pytest.raises(KeyError, match="unknown architecture"):
        architectures.build("alexnet")
