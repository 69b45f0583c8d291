"""The operator registry: one entry per graph operator with everything the compiler needs.

Note: an operator is registered once (`register_op`) with
  * its attribute schema (name → default; `REQUIRED` for attributes without a default),
  * shape inference ``infer(args, attrs) -> StructInfo`` (numpy broadcasting, symbolic dims),
  * its fusion pattern kind (`OpPattern`, TVM's kinds: elementwise, broadcast, injective,
    reduction, out-elementwise-fusable, opaque) used by `FuseOps`,
  * its legalization ``legalize(inputs, attrs, out_sinfo) -> te.Tensor``: a TE compute from
    `ingot.ops` (TVM's topi), used by `LegalizeOps`/`FuseTIR`,
  * a numpy reference ``numpy(args, attrs) -> ndarray`` (used by `FoldConstant` and by tests).
Users build calls through the functions in `ingot.graph.op` (``G.op.relu(x)``), which go through
`make_call`: it checks arity and attributes and infers the result's struct info.
docs/adding_an_op.md walks through adding an operator.

Example:
    >>> from ingot.graph.op_registry import get_op_def, OpPattern
    >>> get_op_def("relu").pattern == OpPattern.ELEMWISE
    True
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

from ingot.ir.error import IRError


class OpPattern:
    """Fusion pattern kinds, ordered as in TVM (a group's kind is the max of its members')."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8
    NAMES = {0: "elemwise", 1: "broadcast", 2: "injective", 3: "reduction", 4: "out_elemwise_fusable",
             7: "tuple", 8: "opaque"}


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclasses.dataclass(frozen=True)
class OpDef:
    """Everything registered for one operator (see the module note)."""

    name: str
    num_inputs: "int | None"
    attrs: Mapping[str, Any]
    infer: Callable[[Sequence[Any], Mapping[str, Any]], Any]
    pattern: int
    legalize: "Callable[..., Any] | None"
    numpy: "Callable[..., Any] | None"
    doc: str = ""
    normalize_attrs: "Callable[[Mapping[str, Any], Sequence[Any]], Mapping[str, Any]] | None" = None


_REGISTRY: dict[str, OpDef] = {}


def register_op(
    name: str,
    *,
    num_inputs: "int | None",
    infer: Callable,
    pattern: int,
    attrs: "Mapping[str, Any] | None" = None,
    legalize: "Callable | None" = None,
    numpy: "Callable | None" = None,
    doc: str = "",
    normalize_attrs: "Callable | None" = None,
) -> OpDef:
    """Register operator ``name`` (once); returns its `OpDef`.

    Example:
        >>> from ingot.graph.op_registry import register_op, OpPattern
        >>> d = register_op("my_identity_demo", num_inputs=1, infer=lambda args, attrs: args[0].struct_info,
        ...                 pattern=OpPattern.ELEMWISE, numpy=lambda args, attrs: args[0])
        >>> d.name
        'my_identity_demo'
    """
    if name in _REGISTRY:
        raise IRError(f"operator {name!r} is already registered; each operator is registered once "
                      f"(pick another name, or edit its registration in ingot/graph/op/)")
    if pattern not in OpPattern.NAMES:
        raise IRError(f"operator {name!r}: unknown pattern kind {pattern}; use an OpPattern constant")
    op_def = OpDef(name, num_inputs, dict(attrs or {}), infer, pattern, legalize, numpy, doc, normalize_attrs)
    _REGISTRY[name] = op_def
    return op_def


def get_op_def(name: str) -> OpDef:
    """The registration of operator ``name``; a clear error lists similar names when unknown.

    Example:
        >>> get_op_def("add").num_inputs
        2
    """
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, _REGISTRY, n=5)
        hint = f"; did you mean {close}?" if close else ""
        raise IRError(f"unknown graph operator {name!r}{hint} (list them with ingot.graph.op_registry.list_ops())") \
            from None


def list_ops() -> list[str]:
    """Names of all registered operators, sorted.

    Example:
        >>> "conv2d" in list_ops()
        True
    """
    _ensure_loaded()
    return sorted(_REGISTRY)


def _ensure_loaded() -> None:
    # The op families register themselves on import of ingot.graph.op.
    import ingot.graph.op  # noqa: F401


def make_call(name: str, args: Sequence[Any], **attrs: Any):
    """A `Call` of operator ``name``: checks the arguments and attributes, infers the struct info.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4, 8), "float32"))
        >>> str(make_call("sum", [x], axis=(1,), keepdims=False).struct_info)
        'R.Tensor((4,), dtype="float32")'
    """
    from .expr import Call, Expr, Op

    op_def = get_op_def(name)
    args = list(args)
    if op_def.num_inputs is not None and len(args) != op_def.num_inputs:
        raise IRError(f"operator {name!r} takes {op_def.num_inputs} tensor argument(s), got {len(args)}")
    for index, a in enumerate(args):
        if not isinstance(a, Expr):
            raise IRError(
                f"operator {name!r}, argument {index}: expected a graph expression, got {type(a).__name__} "
                f"({a!r}); wrap arrays and scalars with G.const(...)"
            )
    unknown = set(attrs) - set(op_def.attrs)
    if unknown:
        raise IRError(f"operator {name!r} has no attribute(s) {sorted(unknown)}; its attributes are "
                      f"{sorted(op_def.attrs) or 'none'}")
    full = {}
    for key, default in op_def.attrs.items():
        value = attrs.get(key, default)
        if value is REQUIRED:
            raise IRError(f"operator {name!r}: attribute {key!r} is required")
        full[key] = value
    if op_def.normalize_attrs is not None:
        full = dict(op_def.normalize_attrs(full, args))
    sinfo = op_def.infer(args, full)
    return Call(Op.get(name), args, full, (), sinfo)


def op_error(name: str, message: str) -> IRError:
    """An `IRError` about operator ``name`` (helper for shape inference messages)."""
    return IRError(f"operator {name!r}: {message}")
