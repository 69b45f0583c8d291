"""The architecture zoo exported to ONNX: the small versions of `ingot.testing.architectures` checked
against ONNX Runtime (tests/models), and the full-size ONNX files the benchmarks read.

Note: torch and onnxruntime are imported inside the functions, so importing this module needs neither.

Example:
    >>> expected, got = export_and_run("squeezenet1_1", tmp_path, opset=17)   # doctest: +SKIP
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["export_module", "export", "onnx_file", "export_and_run"]


def export_module(module, x: np.ndarray, path: str, opset: int = 17) -> str:
    """Export the torch ``module`` run on the example input ``x`` to ONNX at ``path`` (one input,
    named "data"); returns ``path``.

    Example:
        >>> export_module(torch.nn.ReLU(), np.zeros((1, 4), "float32"), "/tmp/relu.onnx")  # doctest: +SKIP
        '/tmp/relu.onnx'
    """
    import torch

    # The fused fast path of nn.TransformerEncoder has no ONNX export: trace the decomposed ops.
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(x),), path, input_names=["data"], dynamo=False,
                          opset_version=opset)
    return path


def export(name: str, path: str, opset: int = 17, size: str = "small"):
    """Export zoo model ``name`` at ``size`` to ONNX at ``path`` (input "data"); returns the example input.

    Example:
        >>> x = export("vgg19", "/tmp/vgg.onnx", opset=11)   # doctest: +SKIP
    """
    from ingot.testing import architectures

    module, x = architectures.build(name, size)
    export_module(module, x, path, opset)
    return x


def onnx_file(name: str, workdir: str, size: str = "full", suffix: str = "") -> str:
    """The ONNX file of zoo model ``name`` at ``size`` in ``workdir`` (``<name><suffix>.onnx``), exported
    on first use (written under a temporary name, then renamed: a crash leaves no partial file).

    Example:
        >>> onnx_file("resnet50", "/tmp/ingot-models")   # doctest: +SKIP
        '/tmp/ingot-models/resnet50.onnx'
    """
    path = os.path.join(workdir, f"{name}{suffix}.onnx")
    if not os.path.exists(path):
        os.makedirs(workdir, exist_ok=True)
        tmp = path + ".tmp.onnx"
        export(name, tmp, size=size)
        os.replace(tmp, path)
    return path


def export_and_run(name: str, workdir, opset: int = 17):
    """``(ONNX Runtime output, Ingot output)`` of the small ``name`` exported at ``opset``, compiled with
    ``ingot.compile`` (default pipeline).

    Example:
        >>> expected, got = export_and_run("gpt2", tmp_path, opset=11)   # doctest: +SKIP
    """
    import onnxruntime as ort

    import ingot

    path = os.path.join(str(workdir), f"{name}_{opset}.onnx")
    x = export(name, path, opset)
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"data": x})[0]
    package = ingot.compile(ingot.load(path))
    got = list(ingot.run(package, {"data": x}).values())[0]
    return expected, np.asarray(got)
