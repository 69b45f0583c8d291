"""Shared workloads for Ingot's tests and benchmarks: one definition of each model they both build.

Note: this package sits on top of Ingot (docs/architecture.md): it may import any layer, and
nothing in ``ingot`` imports it. Importing it (or `ingot.testing.mlp`, `ingot.testing.zoo`) needs
numpy only; `ingot.testing.architectures` imports torch, and the zoo's export functions import
torch/onnxruntime when called.

* `ingot.testing.architectures`: real architectures in ``torch.nn`` (ResNet-50, MobileNetV2, a BERT
  encoder, DenseNet, GoogLeNet, VGG, SqueezeNet, ShuffleNetV2, MobileNetV3, EfficientNet, GPT-2,
  ViT) at full and small sizes, ``build(name, size)``;
* `ingot.testing.zoo`: zoo models exported to ONNX (cached full-size files for the benchmarks, the
  small ones run against ONNX Runtime for the tests);
* `ingot.testing.mlp`: the 784-128-10 MLP graph, its parameters and a numpy reference;
* `ingot.testing.kernels`: small PrimFuncs (matmul, add) for the tuning tests and GEMM benchmarks;
* `ingot.testing.tune_mlp`: the model-tuning tests' 32-wide MLP (graph module, Model, ONNX file);
* `ingot.testing.onnx_run`: `run_compiled`, one ONNX model imported, built and run (importer tests).

Example:
    >>> from ingot.testing.mlp import mlp_module, mlp_params
    >>> mod = mlp_module(1, mlp_params())
"""
from __future__ import annotations

__all__ = ["architectures", "kernels", "mlp", "onnx_run", "tune_mlp", "zoo"]
