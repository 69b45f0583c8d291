"""The architecture zoo exported to ONNX: the small versions of `ingot.testing.architectures` checked
against ONNX Runtime (tests/models), and the full-size ONNX files the benchmarks read.

Note: torch and onnxruntime are imported inside the functions, so importing this module needs neither.

Example:
    >>> expected, got = export_and_run("squeezenet1_1", tmp_path, opset=17)   # doctest: +SKIP
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["export", "export_and_run"]


def export(name: str, path: str, opset: int = 17):
    """Export the small ``name`` to ONNX at ``path`` (input "data"); returns the example input.

    Example:
        >>> x = export("vgg19", "/tmp/vgg.onnx", opset=11)   # doctest: +SKIP
    """
    import torch

    from ingot.testing import architectures

    module, x = architectures.build(name, "small")
    # The fused fast path of nn.TransformerEncoder has no ONNX export: trace the decomposed ops.
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(x),), path, input_names=["data"], dynamo=False,
                          opset_version=opset)
    return x


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
