"""Errors raised by the model importers (`ingot.frontend`).

Each error names what is wrong (the file, the node and op, the input name) and says how to fix it,
in its first line, so that the CLI can print it as a one-line message.

Example:
    >>> err = UnsupportedOpsError({"Foo": ["n1", "n2"]}, "model.onnx")
    >>> str(err).splitlines()[0]
    'model.onnx: 1 unsupported operator type(s): Foo (2 nodes, e.g. n1, n2)'
"""
from __future__ import annotations

from typing import Mapping, Sequence

from ingot.ir.error import IngotError


class FrontendError(IngotError, ValueError):
    """Base of the importer errors."""


class ModelLoadError(FrontendError):
    """The model file cannot be read or is not a valid model (truncated, corrupt, fails the checker).

    Example:
        >>> str(ModelLoadError("m.onnx", "truncated protobuf"))
        'cannot load model m.onnx: truncated protobuf'
    """

    def __init__(self, path: str, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"cannot load model {self.path}: {reason}")


class UnsupportedOpsError(FrontendError):
    """The model uses operators the importer has no converter for; ALL of them are listed at once.

    ``ops`` maps each op type to the names of the nodes that use it (in model order).

    Example:
        >>> e = UnsupportedOpsError({"Loop": ["loop_0"]}, "m.onnx", opset=17)
        >>> e.ops
        {'Loop': ['loop_0']}
    """

    def __init__(self, ops: Mapping[str, Sequence[str]], source: str = "<model>", opset: "int | None" = None):
        self.ops = {k: list(v) for k, v in ops.items()}
        self.source = source
        parts = []
        for op_type, nodes in sorted(self.ops.items()):
            shown = ", ".join(repr(n)[1:-1] or "<unnamed>" for n in nodes[:3])
            more = ", ..." if len(nodes) > 3 else ""
            parts.append(f"{op_type} ({len(nodes)} node{'s' if len(nodes) != 1 else ''}, e.g. {shown}{more})")
        at = f" at opset {opset}" if opset is not None else ""
        super().__init__(
            f"{source}: {len(self.ops)} unsupported operator type(s){at}: " + "; ".join(parts)
            + "\n(list what is supported with ingot.frontend.onnx.supported_ops(); an unsupported op needs a "
              "converter in ingot/frontend/onnx/; or run them on ONNX Runtime: "
              "ingot.compile(model, fallback=\"onnxruntime\"), CLI: ingot compile --fallback onnxruntime)"
        )


class ShapeDictError(FrontendError):
    """``shape_dict``/``dtype_dict`` names an input the model does not have, or gives a bad shape.

    Example:
        >>> str(ShapeDictError("shape_dict has no input 'x'; the model's inputs are ['data']"))
        "shape_dict has no input 'x'; the model's inputs are ['data']"
    """


class ConversionError(FrontendError):
    """A node could not be converted (bad attribute, incompatible shapes); names the node and op.

    Example:
        >>> str(ConversionError("Conv", "conv1", "weight must be 4-D")).splitlines()[0]
        "cannot convert node 'conv1' (Conv): weight must be 4-D"
    """

    def __init__(self, op_type: str, node_name: str, message: str):
        self.op_type, self.node_name = op_type, node_name
        super().__init__(f"cannot convert node {node_name!r} ({op_type}): {message}")
