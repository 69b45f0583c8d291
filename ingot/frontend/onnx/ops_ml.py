"""ONNX converters of the ai.onnx.ml operators LabelEncoder, CategoryMapper, Binarizer,
ArrayFeatureExtractor, Scaler, Normalizer, Imputer, LinearRegressor, and of TfIdfVectorizer (the tree
ensembles are in `ingot.frontend.onnx.ops_trees`).

Note: the numeric ops are loop nests, composed from graph ops that compile to C: Binarizer is
``x > threshold`` cast back to ``x``'s type, ArrayFeatureExtractor a ``take`` on the last axis, Scaler
``(x - offset) * scale``, Normalizer a row reduction and a divide, Imputer a ``where``, LinearRegressor a
matmul plus intercepts.

LabelEncoder and CategoryMapper (key → value maps, strings on either side) and TfIdfVectorizer (n-gram
counting) are
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


def _as_float32(ctx: Any, node: Any) -> G.Expr:
    """Input 0 as float32 (these ai.onnx.ml ops output float32 for any numeric input)."""
    x = ctx.expr(node.input(0), node)
    return x if str(x.struct_info.dtype) == "float32" else ctx.expr(ctx.emit(G.op.astype(x, "float32")))


def _per_feature(node: Any, name: str, values: Any, features: Any, dtype: str) -> G.Constant:
    """A per-feature attribute (one value for all features, or one per feature) as a broadcastable constant."""
    arr = np.asarray(values, dtype).reshape(-1)
    if arr.size != 1 and isinstance(features, int) and arr.size != features:
        raise node.error(f"{name} has {arr.size} values for {features} features; give one, or one per feature")
    return G.const(arr)


@register("Scaler", since=1, domain=_ML)
def _scaler(ctx: Any, node: Any) -> Any:
    x = _as_float32(ctx, node)
    features = x.struct_info.shape[-1]
    offset = _per_feature(node, "offset", node.attr("offset", [0.0]), features, "float32")
    scale = _per_feature(node, "scale", node.attr("scale", [1.0]), features, "float32")
    return ctx.emit(G.op.multiply(ctx.expr(ctx.emit(G.op.subtract(x, offset))), scale))


@register("Normalizer", since=1, domain=_ML)
def _normalizer(ctx: Any, node: Any) -> Any:
    x = _as_float32(ctx, node)
    if x.struct_info.ndim != 2:
        raise node.error(f"X must be 2-D [N, C], got shape {list(x.struct_info.shape)}")
    norm = node.attr("norm", "MAX")

    def e(call: Any) -> G.Expr:
        return ctx.expr(ctx.emit(call))

    if norm == "MAX":  # the row's max (signed, ONNX Runtime and the spec); a zero max divides by 1
        denom = e(G.op.max(x, axis=1, keepdims=True))
        denom = e(G.op.where(e(G.op.equal(denom, G.const(np.array(0, "float32")))), G.const(np.array(1, "float32")),
                             denom))
    elif norm in ("L1", "L2"):
        size = e(G.op.sum(e(G.op.abs(x)), axis=1, keepdims=True)) if norm == "L1" else \
            e(G.op.sqrt(e(G.op.sum(e(G.op.multiply(x, x)), axis=1, keepdims=True))))
        denom = e(G.op.maximum(size, G.const(np.array(1e-30, "float32"))))  # a zero row stays zero
    else:
        raise node.error(f"norm {norm!r} is not one of MAX, L1, L2")
    return ctx.emit(G.op.divide(x, denom))


@register("Imputer", since=1, domain=_ML)
def _imputer(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0), node)
    dt = str(x.struct_info.dtype)
    floats = dt.startswith("float")
    values = node.attr("imputed_value_floats" if floats else "imputed_value_int64s")
    if not values:
        raise node.error(f"a {dt} input needs imputed_value_{'floats' if floats else 'int64s'}")
    replaced = node.attr("replaced_value_float", 0.0) if floats else node.attr("replaced_value_int64", 0)
    fill = _per_feature(node, "the imputed values", values, x.struct_info.shape[-1], dt)
    if floats and np.isnan(replaced):
        missing = ctx.expr(ctx.emit(G.op.not_equal(x, x)))
    else:
        missing = ctx.expr(ctx.emit(G.op.equal(x, G.const(np.array(replaced, dt)))))
    return ctx.emit(G.op.where(missing, fill, x))


@register("LinearRegressor", since=1, domain=_ML)
def _linear_regressor(ctx: Any, node: Any) -> Any:
    x = _as_float32(ctx, node)
    if node.attr("post_transform", "NONE") != "NONE":
        raise node.error(f"post_transform {node.attr('post_transform')!r} is not supported (only NONE)")
    targets = int(node.attr("targets", 1))
    coef = np.asarray(node.attr("coefficients", ()), "float32").reshape(-1)
    if x.struct_info.ndim != 2 or coef.size % max(targets, 1) or (
            isinstance(x.struct_info.shape[1], int) and coef.size != targets * x.struct_info.shape[1]):
        raise node.error(f"coefficients ({coef.size} values) must be targets ({targets}) x features of the 2-D input "
                         f"{list(x.struct_info.shape)}")
    y = ctx.expr(ctx.emit(G.op.matmul(x, G.const(np.ascontiguousarray(coef.reshape(targets, -1).T)))))
    intercepts = node.attr("intercepts")
    if intercepts:
        y = ctx.expr(ctx.emit(G.op.add(y, _per_feature(node, "intercepts", intercepts, targets, "float32"))))
    return y


@register("CategoryMapper", since=1, domain=_ML)
def _category_mapper(ctx: Any, node: Any) -> Any:
    strings, ints = _table(node.attr("cats_strings", ()), "string"), _table(node.attr("cats_int64s", ()), "int64")
    if len(strings) != len(ints):
        raise node.error(f"cats_strings has {len(strings)} entries, cats_int64s {len(ints)}; they pair up")
    x = _graph_value(ctx, node, node.input(0))
    to_int = str(x.struct_info.dtype) == "string"
    params = {"keys": strings if to_int else ints, "values": ints if to_int else strings, "nan_matches": 0,
              "default": int(node.attr("default_int64", -1)) if to_int else node.attr("default_string", "_Unused"),
              "dtype": "int64" if to_int else "string"}
    return ctx.bb.emit(G.op.builtin("label_encoder", x, params=params,
                                    outputs=((tuple(x.struct_info.shape), params["dtype"]),)))
