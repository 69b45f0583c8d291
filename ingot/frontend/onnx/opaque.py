"""Unsupported ONNX nodes kept as opaque ``onnx_node`` calls (``from_onnx(..., keep_unsupported=True)``).

Note: a node the importer cannot convert (no converter, or its converter refuses the node) is kept
whole: its ``NodeProto`` — op type, attributes, domain — is stored in an ``onnx_node`` graph call
(`ingot.graph.op.opaque`) per output, with its inputs renamed to ``in0, in1, ...`` and its outputs to
``out0, out1, ...`` so the stored node does not depend on the model's tensor names. The outputs are
typed by ONNX shape inference run on the node alone, with the input shapes Ingot knows at that point
(symbolic dims as ``dim_param``; static inputs as initializers, so shape-like inputs are read). An
output whose rank or dims stay unknown is refused with a `ConversionError` saying which input shapes
to fix. ``ingot.compile(model, fallback="onnxruntime")`` then hands these calls to the ONNX Runtime
backend (`ingot.byoc.onnxruntime`).

Example:
    >>> from onnx import helper, TensorProto
    >>> vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
    >>> g = helper.make_graph([helper.make_node("GlobalLpPool", ["x"], ["y"], name="lp")], "g",
    ...                       [vi("x", [2, 3, 3])], [vi("y", [2, 3, 1])])
    >>> from ingot.frontend.onnx import from_onnx
    >>> mod, _ = from_onnx(helper.make_model(g), keep_unsupported=True)
    >>> [b.value.attrs["op_type"] for b in mod["main"].body.blocks[0].bindings[:1]]
    ['GlobalLpPool']
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import graph as G
from ingot.ir import Var as DimVar

from ..errors import ConversionError


def _dim_names(ctx: Any, values: list) -> dict:
    """name → symbolic dim of every symbolic dim in the inputs' shapes."""
    out: dict = {}
    for v in values:
        if v is None or isinstance(v, np.ndarray):
            continue
        for d in ctx.shape(v) or ():
            if isinstance(d, DimVar):
                out[d.name] = d
    return out


def _value_info(name: str, shape: Any, dtype: str) -> Any:
    from onnx import helper

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    dims = None if shape is None else [d if isinstance(d, int) else str(d) for d in shape]
    return helper.make_tensor_value_info(name, elem, dims)


def infer_output_types(node: Any, inputs: list, ctx: Any, opset_imports: dict) -> list:
    """``[(shape, dtype) or None]`` per output of ``node`` (renamed: inputs ``in<k>``, outputs
    ``out<k>``) by ONNX shape inference over the node alone; None where inference gives nothing.

    Example: see the module docstring.
    """
    import onnx
    from onnx import helper, numpy_helper

    graph_inputs, inits = [], []
    for k, v in enumerate(inputs):
        if v is None:
            continue
        if isinstance(v, np.ndarray) and v.dtype != object:
            inits.append(numpy_helper.from_array(np.array(v, order="C"), f"in{k}"))  # (ascontiguousarray: 0-d -> 1-d)
        graph_inputs.append(_value_info(f"in{k}", *ctx.sinfo(v)))
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = helper.make_graph([node], "opaque", graph_inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opset_imports.items()])
    model.ir_version = min(model.ir_version, 9)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as exc:  # onnx raises InferenceError / ValidationError with a useful text
        raise ConversionError(node.op_type, node.name, f"kept for ONNX Runtime, but ONNX shape inference "
                              f"fails on it: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc}") \
            from None
    infos = {i.name: i for i in list(inferred.graph.value_info) + list(inferred.graph.output)}
    dims = _dim_names(ctx, inputs)
    out: list = []
    for name in node.output:
        info = infos.get(name) if name else None
        tt = info.type.tensor_type if info is not None and info.type.HasField("tensor_type") else None
        if tt is None or tt.elem_type == 0 or not tt.HasField("shape"):
            out.append(None)
            continue
        shape: list = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param in dims:
                shape.append(dims[d.dim_param])
            else:
                shape = None  # type: ignore[assignment]
                break
        out.append(None if shape is None else (tuple(shape), str(helper.tensor_dtype_to_np_dtype(tt.elem_type))))
    return out


def convert_opaque(ctx: Any, node: Any, opset_imports: dict, why: str = "") -> list:
    """The values of ``node``'s outputs as ``onnx_node`` calls (None for absent outputs).

    ``node`` is the importer's `Node` view; ``opset_imports`` the model's ``{domain: version}``
    (the default domain at the opset being converted). ``why`` is kept in error messages.

    Example: see the module docstring.
    """
    import onnx

    proto = node.proto
    for a in proto.attribute:
        if a.type in (a.GRAPH, a.GRAPHS):
            raise ConversionError(proto.op_type, node.name, "has a subgraph attribute: it cannot be kept whole for "
                                  "ONNX Runtime (subgraphs read outer tensors by name)" + (f"; {why}" if why else ""))
    stored = onnx.NodeProto()
    stored.CopyFrom(proto)
    del stored.input[:]
    del stored.output[:]
    stored.input.extend(f"in{k}" if v is not None else "" for k, v in enumerate(node.inputs))
    stored.output.extend(f"out{k}" if o else "" for k, o in enumerate(proto.output))
    domain = proto.domain if proto.domain not in ("", "ai.onnx") else ""
    imports = dict(opset_imports)
    imports[""] = int(node.opset)
    types = infer_output_types(stored, node.inputs, ctx, imports)
    args = [ctx.expr(v, node) for v in node.inputs if v is not None]
    data = stored.SerializeToString()
    results: list = []
    for k, (name, t) in enumerate(zip(proto.output, types)):
        if not name:
            results.append(None)
            continue
        if t is None:
            known = {f"in{j}": ctx.sinfo(v) for j, v in enumerate(node.inputs) if v is not None}
            raise ConversionError(proto.op_type, node.name, f"kept for ONNX Runtime (fallback), but ONNX shape "
                                  f"inference gives no static shape/dtype for output {name!r} (input shapes, dtypes: "
                                  f"{known}); fix the model's input shapes with shape_dict=... or run "
                                  f"onnx.shape_inference on the model first")
        shape, dtype = t
        call = G.op.onnx_node(*args, node=data, op_type=proto.op_type, domain=domain, opset=int(node.opset),
                              domain_version=int(opset_imports.get(domain, 0)) if domain else 0,
                              output_index=k, node_name=node.name, shape=shape, dtype=dtype)
        results.append(ctx.bb.emit(call))
    return results
