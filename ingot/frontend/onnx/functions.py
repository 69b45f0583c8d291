"""ONNX ops defined as functions: expanded into their body when Ingot has no converter.

Note: many newer ONNX ops (Attention, RMSNormalization, RotaryEmbedding, Swish, Range,
GroupNormalization, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, CenterCropPad, ...) come with
a *function body* in their schema: a small graph of simpler ONNX ops that defines them. Some bodies
are fixed (``schema.has_function``); others depend on the node's attributes and input types
(``has_context_dependent_function``) and are built by onnx from the serialized node and the
``TypeProto`` of each input. When an op has no converter, the importer asks for that body here and
converts its nodes like ordinary ones, in a scope of their own (formal input names bound to the
caller's values; ``ref_attr_name`` attributes taken from the caller's node). A converter always
wins over the expansion, so ops get a dedicated converter when the body is slow or unsupported.

Example:
    >>> from onnx import helper
    >>> n = helper.make_node("Swish", ["x"], ["y"])
    >>> body = function_body(n, 24, [helper.make_tensor_type_proto(1, [2, 3])])
    >>> [b.op_type for b in body.node][-1]
    'Mul'
"""
from __future__ import annotations

from typing import Any, Sequence


def _schema(op_type: str, opset: int, domain: str = "") -> Any:
    from onnx import defs

    try:
        return defs.get_schema(op_type, opset, domain)
    except Exception:  # SchemaError: no such op at this opset
        return None


def is_expandable(op_type: str, opset: int, domain: str = "") -> bool:
    """Whether the op (at ``opset``) has a function body Ingot can expand.

    Example:
        >>> is_expandable("Attention", 23), is_expandable("Conv", 22)
        (True, False)
    """
    if domain not in ("", "ai.onnx"):
        return False
    schema = _schema(op_type, opset)
    return schema is not None and bool(schema.has_function or schema.has_context_dependent_function)


def _best(versions: Sequence[int], opset: int) -> "int | None":
    # The newest body not newer than the model's opset; else the oldest one: the schema (hence the
    # op's meaning) is the one in force at ``opset``, the version only says which opset the body's
    # own nodes are written in (Shrink-9's body is written in opset 18), and they convert at that one.
    usable = [v for v in versions if v <= opset]
    if usable:
        return max(usable)
    return min(versions) if versions else None


def function_body(node: Any, opset: int, input_types: Sequence[Any]) -> Any:
    """The ``FunctionProto`` defining ``node`` (a ``NodeProto``) at ``opset``; ``input_types`` are
    the ``TypeProto``s of its inputs (used by context-dependent bodies; empty ones for absent inputs).
    Raises ``NotImplementedError`` when the schema has no body usable at ``opset``.

    Example:
        >>> from onnx import helper
        >>> n = helper.make_node("Range", ["a", "b", "c"], ["y"])
        >>> function_body(n, 11, []).node[-1].op_type
        'Loop'
    """
    import onnx

    schema = _schema(node.op_type, opset)
    if schema is None:
        raise NotImplementedError(f"ONNX has no schema for {node.op_type!r} at opset {opset}")
    proto = onnx.FunctionProto()
    if schema.has_function:
        version = _best(schema.function_opset_versions, opset)
        if version is not None:
            proto.ParseFromString(schema.get_function_with_opset_version(version))
            return proto
    if schema.has_context_dependent_function:
        version = _best(schema.context_dependent_function_opset_versions, opset)
        if version is not None:
            data = schema.get_context_dependent_function_with_opset_version(
                version, node.SerializeToString(), [t.SerializeToString() for t in input_types])
            if data:
                proto.ParseFromString(data)
                return proto
    raise NotImplementedError(f"the ONNX schema of {node.op_type!r} has no function body usable at opset {opset}")


def type_proto(shape: "Sequence[Any] | None", dtype: "str | None") -> Any:
    """A tensor ``TypeProto`` for ``shape`` (ints, or symbolic dims written as ``dim_param``) and a
    numpy ``dtype`` name; an empty ``TypeProto`` when ``dtype`` is None (an absent input).

    Example:
        >>> type_proto((2, 3), "float32").tensor_type.elem_type
        1
    """
    import numpy as np
    from onnx import TypeProto, helper

    if dtype is None:
        return TypeProto()
    dims = None if shape is None else [int(d) if isinstance(d, (int, np.integer)) else str(d) for d in shape]
    return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), dims)


def bind_attributes(body_node: Any, caller: Any) -> Any:
    """A copy of ``body_node`` whose ``ref_attr_name`` attributes take the caller node's values
    (dropped when the caller does not set them, so the op's own default applies).

    Example:
        >>> from onnx import helper, AttributeProto
        >>> a = AttributeProto(name="alpha", ref_attr_name="alpha", type=AttributeProto.FLOAT)
        >>> body = helper.make_node("LeakyRelu", ["x"], ["y"]); _ = body.attribute.append(a)
        >>> caller = helper.make_node("Foo", ["x"], ["y"], alpha=0.5)
        >>> bind_attributes(body, caller).attribute[0].f
        0.5
    """
    import onnx

    if not any(a.ref_attr_name for a in body_node.attribute):
        return body_node
    given = {a.name: a for a in caller.attribute}
    out = onnx.NodeProto()
    out.CopyFrom(body_node)
    del out.attribute[:]
    for a in body_node.attribute:
        if not a.ref_attr_name:
            out.attribute.append(a)
        elif a.ref_attr_name in given:
            bound = onnx.AttributeProto()
            bound.CopyFrom(given[a.ref_attr_name])
            bound.name = a.name
            out.attribute.append(bound)
    return out


def with_default_attributes(caller: Any, body: Any, schema_opset: "int | None" = None) -> Any:
    """``caller`` with the function's attribute defaults (``FunctionProto.attribute_proto``, then the
    schema's defaults at ``schema_opset``) added for the attributes it does not set.

    Example:
        >>> import onnx
        >>> from onnx import helper
        >>> f = onnx.FunctionProto(); _ = f.attribute_proto.append(helper.make_attribute("alpha", 1.0))
        >>> with_default_attributes(helper.make_node("Foo", ["x"], ["y"]), f).attribute[0].f
        1.0
    """
    import onnx

    have = {a.name for a in caller.attribute}
    missing = [a for a in body.attribute_proto if a.name not in have]
    have |= {a.name for a in missing}
    # Defaults declared by the schema rather than by the body (e.g. Swish's alpha).
    schema = _schema(caller.op_type, int(schema_opset)) if schema_opset else None
    if schema is not None:
        for name, attr in schema.attributes.items():
            if name not in have and attr.default_value is not None and attr.default_value.name:
                missing.append(attr.default_value)
    if not missing:
        return caller
    out = onnx.NodeProto()
    out.CopyFrom(caller)
    out.attribute.extend(missing)
    return out
