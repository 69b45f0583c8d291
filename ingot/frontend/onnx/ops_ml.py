"""ONNX converters of the ai.onnx.ml operators LabelEncoder, Binarizer, ArrayFeatureExtractor, and of
TfIdfVectorizer (the tree ensembles are in `ingot.frontend.onnx.ops_trees`).

Note: Binarizer (``x > threshold`` cast back to ``x``'s type) and ArrayFeatureExtractor (a ``take`` on
the last axis) are loop nests: graph ops that compile to C.

LabelEncoder (key → value maps, strings on either side) and TfIdfVectorizer (n-gram counting) are
hash-table walks: they run as executor builtins (`ingot.graph.op.ml`) with the model's tables as the
call's parameters.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("Binarizer", 1, "ai.onnx.ml") is not None
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import graph as G

from .importer import is_static_string, register
from .ops_string import string_expr

_ML = "ai.onnx.ml"


def _graph_value(ctx: Any, node: Any, value: Any) -> G.Expr:
    if is_static_string(value) or (isinstance(value, G.Expr) and str(value.struct_info.dtype) == "string"):
        return string_expr(ctx, node, value)
    return ctx.expr(value, node)


def _table(values: Any, dtype: str) -> tuple:
    """A tuple of Python scalars (a builtin's parameters must be hashable and JSON-serializable)."""
    if dtype == "string":
        return tuple(v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in np.asarray(values).reshape(-1))
    return tuple(np.asarray(values, dtype=dtype).reshape(-1).tolist())


def _label_encoder_maps(node: Any) -> "tuple[tuple, str, tuple, str, Any]":
    """``(keys, key dtype, values, value dtype, default)`` from whichever attributes the node uses."""
    a = node.attrs
    if node.opset < 2:  # opset 1: classes_strings, string <-> its index
        classes = _table(a.get("classes_strings", ()), "string")
        index = tuple(range(len(classes)))
        if "default_string" in a and "default_int64" not in a:
            return index, "int64", classes, "string", a["default_string"]
        return classes, "string", index, "int64", int(a.get("default_int64", -1))
    keys = [(k, dt) for k, dt in (("keys_tensor", None), ("keys_strings", "string"), ("keys_int64s", "int64"),
                                  ("keys_floats", "float32")) if k in a]
    values = [(k, dt) for k, dt in (("values_tensor", None), ("values_strings", "string"),
                                    ("values_int64s", "int64"), ("values_floats", "float32")) if k in a]
    if len(keys) != 1 or len(values) != 1:
        raise node.error(f"needs exactly one keys_* and one values_* attribute, got "
                         f"{[k for k, _ in keys]} and {[k for k, _ in values]}")
    (kname, kdt), (vname, vdt) = keys[0], values[0]
    if kdt is None:
        kdt = "string" if is_static_string(a[kname]) else str(a[kname].dtype)
    if vdt is None:
        vdt = "string" if is_static_string(a[vname]) else str(a[vname].dtype)
    if vname == "values_tensor":
        if "default_tensor" in a:
            default = _table(a["default_tensor"], vdt)[0]
        else:
            default = "_Unused" if vdt == "string" else (-0.0 if vdt.startswith("float") else -1)
    else:
        default = {"string": a.get("default_string", "_Unused"), "int64": int(a.get("default_int64", -1)),
                   "float32": float(a.get("default_float", -0.0))}[vdt]
    return _table(a[kname], kdt), kdt, _table(a[vname], vdt), vdt, default


@register("LabelEncoder", since=1, domain=_ML)
def _label_encoder(ctx: Any, node: Any) -> Any:
    keys, kdt, values, vdt, default = _label_encoder_maps(node)
    x = _graph_value(ctx, node, node.input(0))
    xdt = str(x.struct_info.dtype)
    if xdt != kdt and not (kdt.startswith("float") and xdt.startswith("float")) and not (
            kdt.startswith("int") and xdt.startswith("int")):
        raise node.error(f"the input has dtype {xdt} but the keys are {kdt}; the input must have the keys' type")
    if len(keys) != len(values):
        raise node.error(f"{len(keys)} keys but {len(values)} values; give one value per key")
    if kdt != "string":
        keys = _table(keys, xdt)  # compared in the input's type
    params = {"keys": keys, "values": values, "default": default, "dtype": vdt, "nan_matches": int(node.opset >= 4)}
    return ctx.bb.emit(G.op.builtin("label_encoder", x, params=params, outputs=((tuple(x.struct_info.shape), vdt),)))


@register("TfIdfVectorizer", since=9)
def _tfidf(ctx: Any, node: Any) -> Any:
    a = node.attrs
    x = _graph_value(ctx, node, node.input(0))
    shape = tuple(x.struct_info.shape)
    if len(shape) not in (1, 2):
        raise node.error(f"the input must be [C] or [N, C], got shape {list(shape)}")
    strings = str(x.struct_info.dtype) == "string"
    if ("pool_strings" in a) != strings:
        raise node.error(f"a {x.struct_info.dtype} input needs pool_{'strings' if strings else 'int64s'}")
    indexes = [int(i) for i in a.get("ngram_indexes", ())]
    if not indexes:
        raise node.error("attribute ngram_indexes is required (the output column of each n-gram)")
    params = {"pool": _table(a["pool_strings"], "string") if strings else _table(a.get("pool_int64s", ()), "int64"),
              "ngram_counts": tuple(int(c) for c in a.get("ngram_counts", ())), "ngram_indexes": tuple(indexes),
              "min_gram_length": int(a["min_gram_length"]), "max_gram_length": int(a["max_gram_length"]),
              "max_skip_count": int(a["max_skip_count"]), "mode": a["mode"],
              "weights": tuple(float(w) for w in a.get("weights", ()))}
    width = max(indexes) + 1
    out = (width,) if len(shape) == 1 else (shape[0], width)
    return ctx.bb.emit(G.op.builtin("tfidf", x, params=params, outputs=((out, "float32"),)))


@register("Binarizer", since=1, domain=_ML)
def _binarizer(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0), node)
    dt = str(x.struct_info.dtype)
    above = ctx.emit(G.op.greater(x, G.const(np.array(node.attr("threshold", 0.0), dt))))
    return ctx.emit(G.op.astype(above, dt))


@register("ArrayFeatureExtractor", since=1, domain=_ML)
def _array_feature_extractor(ctx: Any, node: Any) -> Any:
    x, idx = ctx.expr(node.input(0), node), ctx.expr(node.input(1), node)
    shape, ishape = tuple(x.struct_info.shape), tuple(idx.struct_info.shape)
    count: Any = 1
    for d in ishape:
        count = count * d
    flat = ctx.emit(G.op.reshape(idx, (count,))) if len(ishape) != 1 else idx
    picked = ctx.emit(G.op.take(x, flat, axis=len(shape) - 1))
    # ONNX Runtime's rule: a 1-D input gives one row [1, count]; otherwise the last axis is replaced.
    out = (1, count) if len(shape) == 1 else shape[:-1] + (count,)
    return ctx.emit(G.op.reshape(picked, out)) if tuple(picked.struct_info.shape) != out else picked
