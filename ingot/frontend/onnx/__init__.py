"""`ingot.frontend.onnx`: import ONNX models (TVM's ``relax.frontend.onnx``).

* `from_onnx(model_or_path, shape_dict=None, dtype_dict=None, opset=None)` → ``(IRModule, params)``
* `inspect_onnx(model_or_path)` → inputs, outputs, op histogram, unsupported ops (``ingot inspect``)
* `inspect_model(model_or_path)` → a `ModelReport`: opset, IR version, op counts, unsupported ops (with
  reasons) and data types, dynamic inputs (``ingot inspect``)
* `supported_ops()` → the op types with a converter

Example:
    >>> from onnx import helper, TensorProto
    >>> vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8])
    >>> model = helper.make_model(helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "g",
    ...                                             [vi("x")], [vi("y")]))
    >>> mod, params = from_onnx(model)
    >>> inspect_onnx(model)["ops"]
    {'Sigmoid': 1}
"""
from __future__ import annotations

import collections
from typing import Any

from .importer import (
    find_unsupported, from_onnx, get_converter, graph_inputs, load_model, model_opset, np_dtype, register,
    supported_ops,
)
from .inspect import ModelReport, inspect_model


def _value_info(info: Any) -> dict:
    tt = info.type.tensor_type
    dims = []
    for d in tt.shape.dim:
        dims.append(int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?"))
    try:
        dtype = np_dtype(tt.elem_type)
    except Exception:
        dtype = f"onnx-type-{tt.elem_type}"
    return {"name": info.name, "shape": dims, "dtype": dtype}


def inspect_onnx(model_or_path: Any) -> dict:
    """What a model holds, without converting it: ``{"source", "opset", "inputs", "outputs", "ops",
    "unsupported", "num_params", "param_bytes"}`` (``ops``: op type → count, most frequent first;
    ``unsupported``: op type → node names).

    Example:
        >>> from onnx import helper, TensorProto
        >>> vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n"])
        >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [vi("x")], [vi("y")])
        >>> info = inspect_onnx(helper.make_model(g))
        >>> info["inputs"], info["unsupported"]
        ([{'name': 'x', 'shape': ['n'], 'dtype': 'float32'}], {})
    """
    model, source = load_model(model_or_path)
    opset = model_opset(model)
    hist = collections.Counter(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                               for n in model.graph.node)
    num, nbytes = 0, 0
    for init in model.graph.initializer:
        count = 1
        for d in init.dims:
            count *= int(d)
        num += count
        nbytes += len(init.raw_data) if init.raw_data else count * 4
    return {
        "source": source,
        "opset": opset,
        "inputs": [_value_info(i) for i in graph_inputs(model)],
        "outputs": [_value_info(o) for o in model.graph.output],
        "ops": dict(hist.most_common()),
        "unsupported": find_unsupported(model, opset),
        "num_params": num,
        "param_bytes": nbytes,
    }


__all__ = ["from_onnx", "inspect_onnx", "inspect_model", "ModelReport", "supported_ops", "register", "get_converter",
           "load_model"]
