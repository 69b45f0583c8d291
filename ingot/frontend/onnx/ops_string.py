"""ONNX converters of the string operators: StringConcat, StringSplit, StringNormalizer,
RegexFullMatch, and Equal on strings.

Note: a string tensor (dtype ``"string"``) is held by the graph executor as a numpy object array of
``str``; no kernel computes with it. Each string op becomes one ``builtin`` call
(`ingot.graph.op.dynamic.builtin`; the numpy functions are in `ingot.graph.op.string`) whose output
dims are known (StringConcat broadcasts, RegexFullMatch keeps the shape) or fresh where the data
decides them (the number of pieces of StringSplit, the words StringNormalizer keeps). A string
constant (an initializer, a ``Constant`` node) enters the graph as a ``string_const`` builtin whose
values are its parameters, so string data never reaches the weights blob.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("StringConcat", 20) is not None
    True
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from ingot import graph as G
from ingot.graph.op._common import broadcast_shapes

from .importer import is_static_string, register
from .ops_dynamic import fresh_dims


def string_expr(ctx: Any, node: Any, value: Any) -> G.Expr:
    """``value`` (an input of a string op) as a graph expression of dtype ``"string"``; a static string
    array becomes a ``string_const`` builtin (bound, not folded: a string Constant has no place in
    the weights blob).

    Example:
        >>> class Ctx: bb = G.BlockBuilder()
        >>> x = G.Var("x", G.TensorStructInfo((2,), "string"))
        >>> string_expr(Ctx(), None, x) is x
        True
    """
    if isinstance(value, G.Expr):
        if str(value.struct_info.dtype) != "string":
            raise node.error(f"expects a string tensor, got dtype {value.struct_info.dtype}")
        return value
    if not is_static_string(value):
        raise node.error(f"expects a string tensor, got a constant of dtype {np.asarray(value).dtype}")
    values = tuple(str(s) if not isinstance(s, bytes) else s.decode("utf-8") for s in value.reshape(-1))
    call = G.op.builtin("string_const", params={"values": values, "shape": tuple(value.shape)},
                        outputs=((tuple(value.shape), "string"),))
    return ctx.bb.emit(call)


def _plain(value: Any) -> bool:
    """Whether an attribute value survives the plan's JSON (ints, floats, strings, None, nested tuples)."""
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def touches_strings(call: Any) -> bool:
    """Whether graph op call ``call`` reads or produces a string tensor (and is not a builtin already).

    Example:
        >>> x = G.Var("x", G.TensorStructInfo((2, 3), "string"))
        >>> touches_strings(G.op.reshape(x, (6,))), touches_strings(G.op.relu(G.Var("y", G.TensorStructInfo((2,), "float32"))))
        (True, False)
    """
    if not isinstance(call, G.Call) or getattr(call.op, "name", None) in ("builtin", "tensor_to_shape"):
        return False
    sinfos = [a.struct_info for a in call.args] + [call.struct_info]
    fields = [f for s in sinfos for f in (s.fields if isinstance(s, G.TupleStructInfo) else [s])]
    return any(isinstance(f, G.TensorStructInfo) and f.dtype.is_string for f in fields)


def string_graph_op(ctx: Any, call: G.Call) -> Any:
    """``call``, an op that moves string data (a reshape, take, concat... of a string tensor), as a
    ``graph_op`` builtin: the executor runs the op's numpy reference on the object arrays (no kernel can
    hold strings). Ops whose attributes are not plain values (symbolic dims) are refused with the fix."""
    op = call.op.name
    attrs = tuple(sorted(call.attrs.items()))
    if not _plain(attrs):
        raise ValueError(f"{op} on a string tensor needs plain attributes (no symbolic dims), got {dict(attrs)}; "
                         f"give the string inputs static shapes with shape_dict")
    sinfo = call.struct_info
    fields = sinfo.fields if isinstance(sinfo, G.TupleStructInfo) else [sinfo]
    if not all(isinstance(f, G.TensorStructInfo) and f.shape is not None for f in fields):
        raise ValueError(f"{op} on a string tensor: its result {sinfo} has no known shape")
    outputs = tuple((tuple(f.shape), str(f.dtype)) for f in fields)
    out = _emit(ctx, "graph_op", list(call.args), {"op": op, "attrs": attrs}, outputs)
    if isinstance(sinfo, G.TupleStructInfo):
        return ctx.bb.emit(G.Tuple([ctx.bb.emit(G.TupleGetItem(out, i)) for i in range(len(fields))]))
    return out


def _emit(ctx: Any, kind: str, args: list, params: dict, outputs: tuple) -> Any:
    return ctx.bb.emit(G.op.builtin(kind, *args, params=params, outputs=outputs))


def string_equal(ctx: Any, node: Any) -> Any:
    """Equal of two string tensors (the Equal converter sends string operands here): a bool tensor of
    their broadcast shape."""
    a, b = (string_expr(ctx, node, v) for v in node.inputs[:2])
    shape = broadcast_shapes("Equal", a.struct_info.shape, b.struct_info.shape)
    return _emit(ctx, "string_equal", [a, b], {}, ((shape, "bool"),))


@register("StringConcat", since=20)
def _string_concat(ctx: Any, node: Any) -> Any:
    a, b = (string_expr(ctx, node, v) for v in node.inputs[:2])
    shape = broadcast_shapes("StringConcat", a.struct_info.shape, b.struct_info.shape)
    return _emit(ctx, "string_concat", [a, b], {}, ((shape, "string"),))


# RE2 (ONNX's regex syntax) has no backreferences or lookaround; Python's re reads the rest alike.
_NOT_RE2 = re.compile(r"\\[1-9]|\(\?[=!<]|\(\?P=")


@register("RegexFullMatch", since=20)
def _regex_full_match(ctx: Any, node: Any) -> Any:
    x = string_expr(ctx, node, node.input(0))
    pattern = node.attr("pattern")
    if pattern is None:
        raise node.error("attribute 'pattern' is required (an RE2 regular expression)")
    if _NOT_RE2.search(pattern):
        raise node.error(f"pattern {pattern!r} uses a backreference or lookaround, which RE2 (ONNX's regex "
                         f"syntax) does not have; rewrite it without them")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise node.error(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
    return _emit(ctx, "regex_full_match", [x], {"pattern": pattern}, ((tuple(x.struct_info.shape), "bool"),))


@register("StringSplit", since=20)
def _string_split(ctx: Any, node: Any) -> Any:
    x = string_expr(ctx, node, node.input(0))
    shape = tuple(x.struct_info.shape)
    params: dict = {"delimiter": node.attr("delimiter", "")}
    maxsplit = node.attr("maxsplit")
    if maxsplit is not None:
        params["maxsplit"] = int(maxsplit)
    # Y: the pieces, padded with "" to the largest count (a fresh dim); Z: each element's count
    outputs = ((shape + (fresh_dims(ctx, 1)[0],), "string"), (shape, "int64"))
    call = _emit(ctx, "string_split", [x], params, outputs)
    return [ctx.bb.emit(G.TupleGetItem(call, i)) for i in range(2)]


@register("StringNormalizer", since=10)
def _string_normalizer(ctx: Any, node: Any) -> Any:
    x = string_expr(ctx, node, node.input(0))
    shape = tuple(x.struct_info.shape)
    if not (len(shape) == 1 or (len(shape) == 2 and shape[0] == 1)):
        raise node.error(f"the input must have shape [C] or [1, C], got {list(shape)}")
    action = node.attr("case_change_action", "NONE")
    if action not in ("NONE", "LOWER", "UPPER"):
        raise node.error(f"case_change_action {action!r} is not one of NONE, LOWER, UPPER")
    params = {"case_change_action": action, "is_case_sensitive": int(node.attr("is_case_sensitive", 0)),
              "stopwords": tuple(node.attr("stopwords", ()))}
    # Without stopwords every element stays; with them the data decides how many (a fresh dim).
    width = shape[-1] if not params["stopwords"] else fresh_dims(ctx, 1)[0]
    if isinstance(width, int) and width == 0:  # no words at all: ONNX gives one empty string
        width = 1
    out_shape = (width,) if len(shape) == 1 else (1, width)
    return _emit(ctx, "string_normalizer", [x], params, ((out_shape, "string"),))
