"""ONNX converters of the ai.onnx.ml operators (LabelEncoder, Binarizer, ArrayFeatureExtractor,
TreeEnsemble) and of TfIdfVectorizer.

Note: the numeric ops that are loop nests become graph ops that compile to C:

* Binarizer is ``x > threshold`` cast back to ``x``'s type; ArrayFeatureExtractor a ``take`` on the
  last axis;
* TreeEnsemble walks every tree of every row at once, one level per step, as ONNX Runtime's
  compiled kernel does: the interior nodes and the leaves share one index space (leaf ``j`` is
  ``len(nodes) + j`` and loops to itself), so after ``depth`` steps of "gather the node's feature,
  split and mode, compare, gather the next index" every row sits on a leaf of every tree. Each step
  is a few elementwise/gather ops over ``[rows, trees]`` that fuse into one kernel; the leaves'
  weights are then summed (or min/max-ed) into their targets with a one-hot reduction.

LabelEncoder (key → value maps, strings on either side) and TfIdfVectorizer (n-gram counting) are
hash-table walks: they run as executor builtins (`ingot.graph.op.ml`) with the model's tables as the
call's parameters.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("TreeEnsemble", 5, "ai.onnx.ml") is not None
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


# -- TreeEnsemble -------------------------------------------------------------------------------------

#: nodes_modes: BRANCH_LEQ, LT, GTE, GT, EQ, NEQ (compare the feature with the split); 6 is MEMBER.
_COMPARE = {0: G.op.less_equal, 1: G.op.less, 2: G.op.greater_equal, 3: G.op.greater, 4: G.op.equal,
            5: G.op.not_equal}
_MEMBER = 6


def _ints(node: Any, name: str, required: bool = True) -> np.ndarray:
    value = node.attr(name)
    if value is None:
        if required:
            raise node.error(f"attribute {name} is required")
        return np.zeros(0, "int64")
    return np.asarray(value).reshape(-1).astype("int64")


def _tree_depth(roots: np.ndarray, nxt: "tuple[np.ndarray, np.ndarray]", count: int, node: Any) -> int:
    """The most interior nodes on a path from a root to a leaf (the steps the walk needs); a cycle
    among the interior nodes is an error."""
    depth: dict = {}
    for root in roots.tolist():
        stack = [(root, False)]
        on_path: set = set()
        while stack:
            i, done = stack.pop()
            if done:
                on_path.discard(i)
                depth[i] = 1 + max(depth.get(int(n[i]), 0) if n[i] < count else 0 for n in nxt)
                continue
            if i in depth:
                continue
            if i in on_path:
                raise node.error(f"the trees have a cycle through node {i}; each tree must be a tree")
            on_path.add(i)
            stack.append((i, True))
            stack += [(int(n[i]), False) for n in nxt if n[i] < count and int(n[i]) not in depth]
    return max((depth[r] for r in roots.tolist()), default=0)


def _tree_tables(node: Any) -> dict:
    """The node and leaf tables in one index space (interior ``0..M-1``, leaf ``j`` at ``M + j``, looping
    to itself), checked against each other."""
    modes = _ints(node, "nodes_modes")
    count = len(modes)
    feat, true_ids, false_ids = (_ints(node, n) for n in ("nodes_featureids", "nodes_truenodeids",
                                                          "nodes_falsenodeids"))
    true_leaf, false_leaf = _ints(node, "nodes_trueleafs"), _ints(node, "nodes_falseleafs")
    splits = np.asarray(node.attr("nodes_splits"), "float64").reshape(-1)
    targets, roots = _ints(node, "leaf_targetids"), _ints(node, "tree_roots")
    weights = np.asarray(node.attr("leaf_weights"), "float64").reshape(-1)
    missing = _ints(node, "nodes_missing_value_tracks_true", required=False)
    for name, arr in (("nodes_featureids", feat), ("nodes_truenodeids", true_ids), ("nodes_falsenodeids", false_ids),
                      ("nodes_trueleafs", true_leaf), ("nodes_falseleafs", false_leaf), ("nodes_splits", splits)):
        if len(arr) != count:
            raise node.error(f"{name} has {len(arr)} entries but nodes_modes has {count}; give one per node")
    if len(targets) != len(weights):
        raise node.error(f"leaf_targetids has {len(targets)} entries, leaf_weights {len(weights)}; one per leaf")
    leaves = len(weights)
    for ids, is_leaf, what in ((true_ids, true_leaf, "true"), (false_ids, false_leaf, "false")):
        bad = np.flatnonzero((ids < 0) | (ids >= np.where(is_leaf != 0, leaves, count)))
        if bad.size:
            raise node.error(f"node {int(bad[0])}'s {what} branch {int(ids[bad[0]])} is out of range "
                             f"({count} nodes, {leaves} leaves)")
    if roots.size and (roots.min() < 0 or roots.max() >= count):
        raise node.error(f"tree_roots {roots.tolist()} index outside the {count} nodes")
    n_targets = int(node.attr("n_targets", int(targets.max()) + 1 if targets.size else 1))
    if targets.size and (targets.min() < 0 or targets.max() >= n_targets):
        raise node.error(f"leaf_targetids {targets.tolist()} fall outside n_targets = {n_targets}")
    own = count + np.arange(leaves, dtype="int64")
    nxt_true = np.concatenate([np.where(true_leaf != 0, count + true_ids, true_ids), own])
    nxt_false = np.concatenate([np.where(false_leaf != 0, count + false_ids, false_ids), own])
    # MEMBER nodes: their sets, in node order, from membership_values (each set ends with a NaN)
    members = np.full((count + leaves, 1), np.nan)
    member_nodes = np.flatnonzero(modes == _MEMBER)
    if member_nodes.size:
        values = np.asarray(node.attr("membership_values", ()), "float64").reshape(-1)
        cuts = np.flatnonzero(np.isnan(values))
        if len(cuts) != len(member_nodes):
            raise node.error(f"{len(member_nodes)} MEMBER nodes but membership_values holds {len(cuts)} sets "
                             f"(each ends with a NaN)")
        sets = np.split(values, cuts + 1)[:len(member_nodes)]
        members = np.full((count + leaves, max(max(len(s) - 1 for s in sets), 1)), np.nan)
        for i, s in zip(member_nodes.tolist(), sets):
            members[i, :len(s) - 1] = s[:-1]
    pad = np.zeros(leaves, "int64")
    return {"modes": np.concatenate([modes, np.full(leaves, -1)]), "feat": np.concatenate([feat, pad]),
            "splits": np.concatenate([splits, np.zeros(leaves)]), "true": nxt_true, "false": nxt_false,
            "missing": np.concatenate([missing if missing.size else np.zeros(count, "int64"), pad]) != 0,
            "members": members, "weights": np.concatenate([np.zeros(count), weights]),
            "targets": np.concatenate([np.zeros(count, "int64"), targets]), "roots": roots,
            "n_targets": n_targets, "depth": _tree_depth(roots, (nxt_true, nxt_false), count, node),
            "present": sorted(set(modes.tolist()))}


def _e(ctx: Any, call: Any) -> G.Expr:
    """Bind ``call`` (folded when its inputs are constants) as a graph expression."""
    return ctx.expr(ctx.emit(call))


def _and(ctx: Any, a: Any, b: Any) -> Any:
    return _e(ctx, G.op.where(a, b, G.const(np.array(False))))


def _or(ctx: Any, a: Any, b: Any) -> Any:
    return _e(ctx, G.op.where(a, G.const(np.array(True)), b))


def _tree_step(ctx: Any, t: dict, x: Any, idx: Any) -> Any:
    """One level of every tree for every row: ``idx`` [N, T] node indices -> the next ones."""
    def gather(table: np.ndarray) -> Any:
        return _e(ctx, G.op.take(G.const(table), idx, axis=0))

    xv = _e(ctx, G.op.gather_elements(x, gather(t["feat"]), axis=1))  # [N, T] the nodes' features
    split = gather(t["splits"])
    mode = gather(t["modes"]) if len(t["present"]) > 1 else None
    cond = None
    for m in t["present"]:
        if m == _MEMBER:
            sets = _e(ctx, G.op.take(G.const(t["members"]), idx, axis=0))  # [N, T, K], NaN-padded
            hits = _e(ctx, G.op.equal(_e(ctx, G.op.expand_dims(xv, 2)), sets))
            c = _e(ctx, G.op.greater(_e(ctx, G.op.max(_e(ctx, G.op.astype(hits, "int8")), axis=2)),
                                      G.const(np.array(0, "int8"))))
        elif m in _COMPARE:
            c = _e(ctx, _COMPARE[m](xv, split))
        else:
            raise IndexError(f"nodes_modes value {m} is not a mode (0-6: LEQ, LT, GTE, GT, EQ, NEQ, MEMBER)")
        if mode is not None:
            c = _and(ctx, _e(ctx, G.op.equal(mode, G.const(np.array(m, "int64")))), c)
        cond = c if cond is None else _or(ctx, cond, c)
    if t["missing"].any():  # NaN features take the true branch where nodes_missing_value_tracks_true says so
        cond = _or(ctx, cond, _and(ctx, gather(t["missing"]), _e(ctx, G.op.not_equal(xv, xv))))
    return _e(ctx, G.op.where(cond, gather(t["true"]), gather(t["false"])))


@register("TreeEnsemble", since=5, domain=_ML)
def _tree_ensemble(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0), node)
    shape, dt = tuple(x.struct_info.shape), str(x.struct_info.dtype)
    if len(shape) != 2 or not dt.startswith("float"):
        raise node.error(f"X must be a 2-D float tensor [N, features], got {dt} {list(shape)}")
    post = int(node.attr("post_transform", 0))
    if post != 0:
        raise node.error(f"post_transform {post} is not supported (only 0, NONE); apply the transform after the "
                         f"ensemble (Softmax / Sigmoid nodes)")
    agg = int(node.attr("aggregate_function", 1))
    if agg not in (0, 1, 2, 3):
        raise node.error(f"aggregate_function {agg} is not one of 0-3 (AVERAGE, SUM, MIN, MAX)")
    t = _tree_tables(node)
    trees = len(t["roots"])
    # Step 1. walk: every (row, tree) starts at its root; `depth` levels reach a leaf everywhere
    xf = x if dt == "float64" else _e(ctx, G.op.astype(x, "float64"))  # compared as doubles, as ONNX Runtime
    idx = _e(ctx, G.op.broadcast_to(G.const(t["roots"]), (shape[0], trees)))
    for _ in range(t["depth"]):
        idx = _tree_step(ctx, t, xf, idx)
    # Step 2. aggregate the leaves' weights into their targets (a one-hot reduction over the trees)
    w = _e(ctx, G.op.expand_dims(_e(ctx, G.op.take(G.const(t["weights"]), idx, axis=0)), 2))
    hot = _e(ctx, G.op.equal(_e(ctx, G.op.expand_dims(_e(ctx, G.op.take(G.const(t["targets"]), idx, axis=0)), 2)),
                              G.const(np.arange(t["n_targets"], dtype="int64"))))
    if agg in (0, 1):
        total = _e(ctx, G.op.sum(_e(ctx, G.op.where(hot, w, G.const(np.array(0.0)))), axis=1))
        if agg == 0:
            total = _e(ctx, G.op.divide(total, G.const(np.array(float(max(trees, 1))))))
    else:  # MIN / MAX over the leaves that reach each target; a target no leaf reaches is 0 (ONNX Runtime;
        # onnx.reference leaves the float type's largest / smallest value there)
        picked = _e(ctx, G.op.where(hot, w, G.const(np.array(np.inf if agg == 2 else -np.inf))))
        total = _e(ctx, (G.op.min if agg == 2 else G.op.max)(picked, axis=1))
        reached = _e(ctx, G.op.greater(_e(ctx, G.op.max(_e(ctx, G.op.astype(hot, "int8")), axis=1)),
                                       G.const(np.array(0, "int8"))))
        total = _e(ctx, G.op.where(reached, total, G.const(np.array(0.0))))
    return total if dt == "float64" else _e(ctx, G.op.astype(total, dt))
