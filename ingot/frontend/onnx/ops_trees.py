"""ONNX converters of the ai.onnx.ml tree ensembles: TreeEnsemble (opset 5), TreeEnsembleRegressor and
TreeEnsembleClassifier (opsets 1 and 3), compiled to C.

Note: every tree of every row is walked at once, one level per step, as ONNX Runtime's hand-written
kernel does, here composed from graph ops. Interior nodes and leaves share one index space in which a
leaf loops to itself, so after ``depth`` steps of "gather the node's feature, split and mode; compare;
gather the next index" over ``[rows, trees]`` every row sits on a leaf of every tree. Each step is a few
elementwise/gather ops that fuse into about two kernels. Each leaf's weights are a dense row over the
targets (``values``, with ``mask`` saying which targets it reaches), so the aggregation is a gather and
a sum (AVERAGE, SUM) or a min/max (MIN, MAX) over the trees. Comparisons are in float64 (exact for
float16/32 inputs, as ONNX Runtime compares).

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("TreeEnsemble", 5, "ai.onnx.ml") is not None
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import graph as G

from .importer import register

_ML = "ai.onnx.ml"

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


def _tree_depth(roots: np.ndarray, nxt: "tuple[np.ndarray, np.ndarray]", leaf: np.ndarray, node: Any) -> int:
    """The most interior nodes on a path from a root to a leaf (the steps the walk needs); a cycle
    among the interior nodes is an error."""
    depth: dict = {}
    for root in roots.tolist():
        stack = [(root, False)]
        on_path: set = set()
        while stack:
            i, done = stack.pop()
            if leaf[i]:
                depth[i] = 0
                continue
            if done:
                on_path.discard(i)
                depth[i] = 1 + max(depth[int(n[i])] for n in nxt)
                continue
            if i in depth:
                continue
            if i in on_path:
                raise node.error(f"the trees have a cycle through node {i}; each tree must be a tree")
            on_path.add(i)
            stack.append((i, True))
            stack += [(int(n[i]), False) for n in nxt if int(n[i]) not in depth]
    return max((depth[r] for r in roots.tolist()), default=0)


def _tree_tables(node: Any) -> dict:
    """TreeEnsemble's tables in one index space (interior ``0..M-1``, leaf ``j`` at ``M + j``, looping to
    itself), checked against each other."""
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
    values, mask = np.zeros((count + leaves, n_targets)), np.zeros((count + leaves, n_targets), bool)
    values[own, targets], mask[own, targets] = weights, True
    return {"modes": np.concatenate([modes, np.full(leaves, -1)]), "feat": np.concatenate([feat, pad]),
            "splits": np.concatenate([splits, np.zeros(leaves)]), "true": nxt_true, "false": nxt_false,
            "missing": np.concatenate([missing if missing.size else np.zeros(count, "int64"), pad]) != 0,
            "members": members, "values": values, "mask": mask, "roots": roots,
            "leaf": np.arange(count + leaves) >= count}


_LEGACY_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5,
                 "LEAF": -1}


def _legacy_tables(node: Any, prefix: str = "target", n_targets: "int | None" = None) -> dict:
    """TreeEnsembleRegressor's / TreeEnsembleClassifier's tables (nodes keyed by tree and node id, leaves
    among them with mode LEAF, a leaf's weights listed by ``target_*`` / ``class_*``) in the same form as
    `_tree_tables`."""
    a = node.attrs
    tree_ids, node_ids = _ints(node, "nodes_treeids"), _ints(node, "nodes_nodeids")
    index = {(t, n): k for k, (t, n) in enumerate(zip(tree_ids.tolist(), node_ids.tolist()))}
    count = len(index)
    given = list(a.get("nodes_modes", ()))
    unknown = [m for m in given if m not in _LEGACY_MODES]
    if unknown:
        raise node.error(f"nodes_modes {unknown[:3]} are not modes; each is one of {sorted(_LEGACY_MODES)}")
    if len(given) != count:
        raise node.error(f"nodes_modes has {len(given)} entries for {count} nodes; give one per node")
    modes = np.array([_LEGACY_MODES[m] for m in a["nodes_modes"]], "int64")
    leaf = modes < 0
    splits = np.asarray(a["nodes_values_as_tensor"] if "nodes_values_as_tensor" in a else a.get("nodes_values", ()),
                        "float64").reshape(-1)
    feat = _ints(node, "nodes_featureids")
    nxt = []
    for side in ("true", "false"):
        ids = _ints(node, f"nodes_{side}nodeids")
        targets = []
        for k, (t, n) in enumerate(zip(tree_ids.tolist(), ids.tolist())):
            if leaf[k]:
                targets.append(k)
            elif (t, n) not in index:
                raise node.error(f"node {node_ids[k]} of tree {t}: its {side} branch {n} is not a node of that tree")
            else:
                targets.append(index[(t, n)])
        nxt.append(np.array(targets, "int64"))
    for name, arr in (("nodes_featureids", feat), ("nodes_values", splits)):
        if len(arr) != count:
            raise node.error(f"{name} has {len(arr)} entries for {count} nodes; give one per node")
    n_targets = int(a.get("n_targets", 1)) if n_targets is None else n_targets
    values, mask = np.zeros((count, n_targets)), np.zeros((count, n_targets), bool)
    weights = np.asarray(a[f"{prefix}_weights_as_tensor"] if f"{prefix}_weights_as_tensor" in a
                         else a.get(f"{prefix}_weights", ()), "float64").reshape(-1)
    for t, n, target, w in zip(_ints(node, f"{prefix}_treeids").tolist(), _ints(node, f"{prefix}_nodeids").tolist(),
                               _ints(node, f"{prefix}_ids").tolist(), weights.tolist()):
        k = index.get((t, n))
        if k is None or not leaf[k] or not 0 <= target < n_targets:
            raise node.error(f"target entry (tree {t}, node {n}, target {target}) names no LEAF node or a target "
                             f"outside n_targets = {n_targets}")
        values[k, target] += w  # several entries of one leaf and target add up (ONNX Runtime)
        mask[k, target] = True
    # A tree's root is its node no branch of the tree points at.
    pointed = {int(k) for arr in nxt for j, k in enumerate(arr.tolist()) if not leaf[j]}
    roots = []
    for t in dict.fromkeys(tree_ids.tolist()):
        own = [k for k in range(count) if tree_ids[k] == t and k not in pointed]
        if len(own) != 1:
            raise node.error(f"tree {t} has {len(own)} nodes no branch points at; a tree has one root")
        roots.append(own[0])
    missing = _ints(node, "nodes_missing_value_tracks_true", required=False)
    return {"modes": modes, "feat": np.where(leaf, 0, feat), "splits": np.where(leaf, 0.0, splits),
            "true": nxt[0], "false": nxt[1], "missing": (missing if missing.size else np.zeros(count, "int64")) != 0,
            "members": np.full((count, 1), np.nan), "values": values, "mask": mask,
            "roots": np.array(roots, "int64"), "leaf": leaf}


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


def _walk_and_aggregate(ctx: Any, node: Any, x: Any, t: dict, agg: int) -> Any:
    """The ensemble's ``[N, n_targets]`` float64 scores of ``x`` [N, features] for tables ``t``."""
    shape, dt = tuple(x.struct_info.shape), str(x.struct_info.dtype)
    if len(shape) != 2 or not (dt.startswith("float") or dt.startswith("int")):
        raise node.error(f"X must be a 2-D numeric tensor [N, features], got {dt} {list(shape)}")
    t["present"] = sorted({int(m) for m in np.asarray(t["modes"])[~t["leaf"]].tolist()})
    t["depth"] = _tree_depth(t["roots"], (t["true"], t["false"]), t["leaf"], node)
    trees = len(t["roots"])
    # Step 1. walk: every (row, tree) starts at its root; `depth` levels reach a leaf everywhere
    xf = x if dt == "float64" else _e(ctx, G.op.astype(x, "float64"))  # compared as doubles, as ONNX Runtime
    idx = _e(ctx, G.op.broadcast_to(G.const(t["roots"]), (shape[0], trees)))
    for _ in range(t["depth"]):
        idx = _tree_step(ctx, t, xf, idx)
    # Step 2. the reached leaves' weight rows [N, trees, targets], reduced over the trees
    vals = _e(ctx, G.op.take(G.const(t["values"]), idx, axis=0))
    if agg in (0, 1):
        total = _e(ctx, G.op.sum(vals, axis=1))
        return _e(ctx, G.op.divide(total, G.const(np.array(float(max(trees, 1)))))) if agg == 0 else total
    # MIN / MAX over the leaves that reach each target; a target no leaf reaches is 0 (ONNX Runtime;
    # onnx.reference leaves the float type's largest / smallest value there)
    hit = _e(ctx, G.op.take(G.const(t["mask"]), idx, axis=0))
    picked = _e(ctx, G.op.where(hit, vals, G.const(np.array(np.inf if agg == 2 else -np.inf))))
    total = _e(ctx, (G.op.min if agg == 2 else G.op.max)(picked, axis=1))
    reached = _e(ctx, G.op.greater(_e(ctx, G.op.max(_e(ctx, G.op.astype(hit, "int8")), axis=1)),
                                   G.const(np.array(0, "int8"))))
    return _e(ctx, G.op.where(reached, total, G.const(np.array(0.0))))


@register("TreeEnsemble", since=5, domain=_ML)
def _tree_ensemble(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0), node)
    dt = str(x.struct_info.dtype)
    if not dt.startswith("float"):
        raise node.error(f"X must be a float tensor (float16/32/64), got {dt}")
    post = int(node.attr("post_transform", 0))
    if post != 0:
        raise node.error(f"post_transform {post} is not supported (only 0, NONE); apply the transform after the "
                         f"ensemble (Softmax / Sigmoid nodes)")
    agg = int(node.attr("aggregate_function", 1))
    if agg not in (0, 1, 2, 3):
        raise node.error(f"aggregate_function {agg} is not one of 0-3 (AVERAGE, SUM, MIN, MAX)")
    total = _walk_and_aggregate(ctx, node, x, _tree_tables(node), agg)
    return total if dt == "float64" else _e(ctx, G.op.astype(total, dt))


_AGGREGATES = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}


@register("TreeEnsembleRegressor", since=1, domain=_ML)
def _tree_ensemble_regressor(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0), node)
    post = node.attr("post_transform", "NONE")
    if post != "NONE":
        raise node.error(f"post_transform {post!r} is not supported (only NONE); apply the transform after the "
                         f"ensemble (Softmax / Sigmoid nodes)")
    agg = _AGGREGATES.get(node.attr("aggregate_function", "SUM"))
    if agg is None:
        raise node.error(f"aggregate_function {node.attr('aggregate_function')!r} is not one of {sorted(_AGGREGATES)}")
    t = _legacy_tables(node)
    total = _with_base_values(ctx, node, _walk_and_aggregate(ctx, node, x, t, agg), t["values"].shape[1])
    return _e(ctx, G.op.astype(total, "float32"))  # the regressor's Y is float32 whatever X is


def _with_base_values(ctx: Any, node: Any, total: Any, count: int) -> Any:
    base = node.attr("base_values_as_tensor", node.attr("base_values"))
    if base is None or not len(base):
        return total
    base = np.asarray(base, "float64").reshape(-1)
    if base.size != count:
        raise node.error(f"base_values has {base.size} entries for {count} targets/classes; give one per target")
    return _e(ctx, G.op.add(total, G.const(base)))


#: TreeEnsembleClassifier's post_transform of the class scores (SOFTMAX_ZERO and PROBIT are not converted).
_CLASS_TRANSFORMS = {"NONE": None, "SOFTMAX": lambda z: G.op.softmax(z, axis=1), "LOGISTIC": G.op.sigmoid}


@register("TreeEnsembleClassifier", since=1, domain=_ML)
def _tree_ensemble_classifier(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0), node)
    strings = "classlabels_strings" in node.attrs
    labels = node.attr("classlabels_strings" if strings else "classlabels_int64s", ())
    if len(labels) < 2:
        raise node.error("needs classlabels_int64s or classlabels_strings with at least two classes")
    post = node.attr("post_transform", "NONE")
    if post not in _CLASS_TRANSFORMS:
        raise node.error(f"post_transform {post!r} is not supported ({sorted(_CLASS_TRANSFORMS)} are)")
    if len(set(_ints(node, "class_ids").tolist())) < 2:
        # ONNX Runtime's binary case (one score column turned into two by rules of its own) is not modelled
        raise node.error("a binary classifier with weights for one class only is not supported (class_ids "
                         "names a single class); list the weights of both classes")
    t = _legacy_tables(node, "class", len(labels))
    # Scores: the leaves' class weights summed over the trees, plus base_values (a classifier always sums).
    scores = _with_base_values(ctx, node, _walk_and_aggregate(ctx, node, x, t, 1), len(labels))
    scores = _e(ctx, G.op.astype(scores, "float32"))
    best = _e(ctx, G.op.argmax(scores, axis=1))  # the first of equal scores, as ONNX Runtime
    if strings:
        params = {"keys": tuple(range(len(labels))), "values": tuple(labels), "default": "", "dtype": "string",
                  "nan_matches": 0}
        label = ctx.bb.emit(G.op.builtin("label_encoder", best, params=params,
                                         outputs=((tuple(best.struct_info.shape), "string"),)))
    else:
        label = _e(ctx, G.op.take(G.const(np.asarray(labels, "int64")), best, axis=0))
    transform = _CLASS_TRANSFORMS[post]
    return [label, scores if transform is None else _e(ctx, transform(scores))]
