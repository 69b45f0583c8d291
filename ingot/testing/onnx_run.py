"""One ONNX model through Ingot's graph pipeline, for the ONNX importer's tests.

Example:
    >>> import numpy as np
    >>> from onnx import TensorProto, helper
    >>> vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [3])
    >>> g = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g", [vi("x")], [vi("y")])
    >>> model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    >>> run_compiled(model, {"x": np.ones(3, "float32")})[0].tolist()
    [-1.0, -1.0, -1.0]
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["run_compiled"]


def run_compiled(model: Any, inputs: dict) -> list:
    """The outputs (numpy arrays, in the model's order) of ``model`` imported with the shapes of
    ``inputs`` (name → array, in the graph's input order), built for ``"llvm"`` and run once.

    Example:
        >>> # run_compiled(onnx_model, {"x": x})  -> [y]
    """
    import ingot
    from ingot import graph as G
    from ingot.frontend.onnx import from_onnx

    mod, _ = from_onnx(model, shape_dict={k: list(v.shape) for k, v in inputs.items()})
    out = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](*inputs.values())
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return [o.numpy() if hasattr(o, "numpy") else np.asarray(o) for o in outs]
