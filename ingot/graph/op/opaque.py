"""``onnx_node``: an ONNX node Ingot cannot compile, kept opaque for an external runtime.

Note: with ``from_onnx(..., keep_unsupported=True)`` (``ingot.compile(model, fallback="onnxruntime")``)
the ONNX importer turns a node it has no converter for into one ``onnx_node`` call per output
instead of failing. The call holds the node itself (its serialized ``NodeProto``: op type,
attributes, domain) with the opset it was written for, and the output's shape and dtype from ONNX
shape inference, so the graph around it is typed as usual. The op has no legalization: Ingot never
compiles it. The ``onnxruntime`` BYOC backend (`ingot.byoc.onnxruntime`) takes these calls into
regions and runs the original nodes in an ONNX Runtime session; a build that meets one outside such
a region fails naming the ONNX op and the fix.

A node with several outputs becomes several calls (``output_index``); a region holding more than one
of them runs the node once.

Example:
    >>> from ingot import graph as G
    >>> from onnx import helper
    >>> x = G.Var("x", G.TensorStructInfo((2, 3, 3), "float32"))
    >>> node = helper.make_node("Det", ["x"], ["y"], name="det0")
    >>> call = onnx_node(x, node=node.SerializeToString(), op_type="Det", opset=17, shape=(2,), dtype="float32")
    >>> str(call.struct_info)
    'R.Tensor((2,), dtype="float32")'
"""
from __future__ import annotations

from typing import Any, Sequence

from ..expr import Call, Expr
from ..op_registry import REQUIRED, OpPattern, _REGISTRY, make_call, op_error, register_op
from ..struct_info import TensorStructInfo

__all__ = ["onnx_node", "is_onnx_node"]

_ATTRS = {"node": REQUIRED, "op_type": REQUIRED, "domain": "", "opset": REQUIRED, "domain_version": 0,
          "output_index": 0, "node_name": "", "shape": REQUIRED, "dtype": REQUIRED}


def _infer(args: Any, attrs: Any) -> TensorStructInfo:
    if not isinstance(attrs["node"], bytes):
        raise op_error("onnx_node", f"attribute node must be a serialized onnx.NodeProto (bytes), "
                                    f"got {type(attrs['node']).__name__}")
    return TensorStructInfo(tuple(attrs["shape"]), str(attrs["dtype"]))


def _legalize(inputs: Any, attrs: Any, out: Any) -> Any:
    what = f"ONNX {attrs['domain'] + '.' if attrs['domain'] else ''}{attrs['op_type']} (node {attrs['node_name']!r})"
    raise op_error("onnx_node", f"{what} has no Ingot kernel: it runs on ONNX Runtime only; compile with "
                                f"ingot.compile(model, fallback=\"onnxruntime\") (CLI: --fallback onnxruntime) or "
                                f"partition it with ingot.byoc.partition(mod, [\"onnxruntime\"])")


if "onnx_node" not in _REGISTRY:  # idempotent: a reload in tests must not fail
    register_op("onnx_node", num_inputs=None, pattern=OpPattern.OPAQUE, attrs=_ATTRS, infer=_infer,
                legalize=_legalize, numpy=None,
                doc="An ONNX node kept opaque for ONNX Runtime (fallback); never compiled by Ingot.")


def onnx_node(*args: Expr, node: bytes, op_type: str, opset: int, shape: Sequence[Any], dtype: str,
              domain: str = "", domain_version: int = 0, output_index: int = 0, node_name: str = "") -> Call:
    """Output ``output_index`` of the ONNX node ``node`` (a serialized ``NodeProto``) applied to ``args``.

    ``args`` are the node's inputs in order (absent optional inputs are dropped from the node before:
    the importer renames them away); ``shape``/``dtype`` type the result (from ONNX shape inference).

    Example:
        >>> from ingot import graph as G
        >>> from onnx import helper
        >>> x = G.Var("x", G.TensorStructInfo((4, 4), "float32"))
        >>> n = helper.make_node("Det", ["x"], ["y"]).SerializeToString()
        >>> onnx_node(x, node=n, op_type="Det", opset=17, shape=(), dtype="float32").attrs["op_type"]
        'Det'
    """
    return make_call("onnx_node", list(args), node=bytes(node), op_type=str(op_type), domain=str(domain),
                     opset=int(opset), domain_version=int(domain_version), output_index=int(output_index),
                     node_name=str(node_name), shape=tuple(shape), dtype=str(dtype))


def is_onnx_node(expr: Any) -> bool:
    """Whether ``expr`` is a call of ``onnx_node``.

    Example:
        >>> from ingot import graph as G
        >>> is_onnx_node(G.op.relu(G.Var("x", G.TensorStructInfo((2,), "float32"))))
        False
    """
    return isinstance(expr, Call) and getattr(expr.op, "name", None) == "onnx_node"
