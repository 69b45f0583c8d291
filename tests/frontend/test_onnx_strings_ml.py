"""String tensors and the ai.onnx.ml operators (issue 17), compiled and run through ``ingot.compile`` /
``ingot.run`` and compared with the ONNX reference (``onnx.reference.ReferenceEvaluator``) and, where it
has the op, ONNX Runtime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ingot
from ingot.frontend.onnx.inspect import inspect_model
from ingot.workflow.model import ModelInputError

S, F, D, I64 = TensorProto.STRING, TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64


def _model(nodes, inputs, outputs, opset=20, ml=None):
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("ai.onnx.ml", ml)] if ml else [])
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs), opset_imports=imports, ir_version=10)


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _strings(*values, shape=None):
    arr = np.array(list(values), dtype=object)
    return arr.reshape(shape) if shape is not None else arr


def _check(model, feeds, exact=True):
    """Compile and run ``model``; compare every output with the ONNX reference (strings exactly)."""
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = ingot.run(ingot.compile(ingot.load(model), cache=False), feeds)
    for (name, out), ref in zip(got.items(), expected):
        assert out.shape == ref.shape, (name, out.shape, ref.shape)
        if ref.dtype == object or ref.dtype.kind == "U":
            assert out.dtype == object and out.tolist() == ref.tolist(), (name, out, ref)
        else:
            assert out.dtype == ref.dtype, (name, out.dtype, ref.dtype)
            if exact:
                np.testing.assert_array_equal(out, ref)
            else:
                np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    return got


# -- string tensors --------------------------------------------------------------------------------


def test_string_concat_broadcast_and_equal():
    nodes = [helper.make_node("StringConcat", ["x", "y"], ["z"]), helper.make_node("Equal", ["z", "w"], ["e"])]
    m = _model(nodes, [_vi("x", S, [2, 3]), _vi("y", S, [3]), _vi("w", S, [2, 3])],
               [_vi("z", S, [2, 3]), _vi("e", TensorProto.BOOL, [2, 3])])
    x = _strings("a", "b", "", "é", "dd", "x", shape=(2, 3))
    w = _strings("a1", "b2", "3", "é1", "dd", "x3", shape=(2, 3))
    out = _check(m, {"x": x, "y": _strings("1", "2", "3"), "w": w})
    assert out["e"].tolist() == [[True, True, True], [True, False, True]]


def test_string_split_whitespace_delimiter_and_maxsplit():
    for attrs in ({}, {"delimiter": ","}, {"delimiter": ",", "maxsplit": 1}, {"delimiter": "::"}):
        m = _model([helper.make_node("StringSplit", ["x"], ["y", "n"], **attrs)], [_vi("x", S, [2, 2])],
                   [_vi("y", S, [2, 2, "k"]), _vi("n", I64, [2, 2])])
        x = _strings(" a  b c ", "a,b,,c", "", "x::y::z", shape=(2, 2))
        _check(m, {"x": x})


def test_string_normalizer_stopwords_case_and_empty_result():
    x = _strings("monday", "Tuesday", "MONDAY", "wednesday", shape=(1, 4))
    for attrs in ({"case_change_action": "UPPER", "stopwords": ["monday"]},
                  {"case_change_action": "LOWER", "is_case_sensitive": 1, "stopwords": ["monday"]},
                  {"case_change_action": "NONE"},
                  {"stopwords": ["monday", "tuesday", "wednesday"]}):  # nothing left: one ""
        m = _model([helper.make_node("StringNormalizer", ["x"], ["y"], **attrs)], [_vi("x", S, [1, 4])],
                   [_vi("y", S, [1, "k"])], opset=10)
        _check(m, {"x": x})


def test_regex_full_match_and_a_pattern_re2_lacks():
    m = _model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=r"[a-z.]+@(gmail|yahoo)\.com")],
               [_vi("x", S, [4])], [_vi("y", TensorProto.BOOL, [4])])
    _check(m, {"x": _strings("a.b@gmail.com", "x@gmail.co", "ab@yahoo.com", "@gmail.com")})
    bad = _model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=r"(a)\1")],
                 [_vi("x", S, [1])], [_vi("y", TensorProto.BOOL, [1])])
    with pytest.raises(Exception, match="backreference"):
        ingot.load(bad)


def test_string_input_is_validated_and_str_arrays_are_accepted():
    m = _model([helper.make_node("StringConcat", ["x", "x"], ["z"])], [_vi("x", S, [2])], [_vi("z", S, [2])])
    pkg = ingot.compile(ingot.load(m), cache=False)
    # numpy str arrays and bytes are string tensors too
    assert ingot.run(pkg, {"x": np.array(["a", "b"])})["z"].tolist() == ["aa", "bb"]
    assert ingot.run(pkg, {"x": np.array([b"c", b"d"], dtype=object)})["z"].tolist() == ["cc", "dd"]
    with pytest.raises(ModelInputError, match="'x'.*string"):
        ingot.run(pkg, {"x": np.zeros(2, "float32")})


def test_string_package_exports_and_runs_in_a_fresh_load(tmp_path):
    m = _model([helper.make_node("StringConcat", ["x", "c"], ["z"])], [_vi("x", S, [2])], [_vi("z", S, [2])])
    m.graph.initializer.append(numpy_helper.from_array(_strings("!", "?"), "c"))
    pkg = ingot.compile(ingot.load(m), cache=False)
    path = pkg.export(str(tmp_path / "strings.ingot"))
    out = ingot.run(path, {"x": _strings("a", "b")})
    assert out["z"].tolist() == ["a!", "b?"]


def test_inspect_reports_string_values_as_supported():
    m = _model([helper.make_node("StringConcat", ["x", "x"], ["z"])], [_vi("x", S, ["n"])], [_vi("z", S, ["n"])])
    report = inspect_model(m)
    assert report.supported and not report.unsupported_dtypes
    assert report.inputs[0].dtype == "string"


# -- ai.onnx.ml and TfIdfVectorizer ---------------------------------------------------------------


def _ml_node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, domain="ai.onnx.ml", **attrs)


def test_label_encoder_maps_both_ways_with_defaults():
    s2i = _ml_node("LabelEncoder", ["x"], ["y"], keys_strings=["a", "b", "c"], values_int64s=[1, 2, 3],
                   default_int64=-7)
    m = _model([s2i], [_vi("x", S, [5])], [_vi("y", I64, [5])], ml=2)
    _check(m, {"x": _strings("a", "c", "zz", "b", "")})
    f2s = _ml_node("LabelEncoder", ["x"], ["y"], keys_floats=[0.5, float("nan"), -2.0], values_strings=["h", "n", "m"])
    m = _model([f2s], [_vi("x", F, [5])], [_vi("y", S, [5])], ml=2)
    _check(m, {"x": np.array([0.5, np.nan, 3.0, -2.0, 0.25], "float32")})
    tensors = _ml_node("LabelEncoder", ["x"], ["y"],
                       keys_tensor=numpy_helper.from_array(np.array([3, 1, 2], "int64"), "k"),
                       values_tensor=numpy_helper.from_array(np.array([0.5, 1.5, 2.5], "float64"), "v"),
                       default_tensor=numpy_helper.from_array(np.array([9.0], "float64"), "d"))
    m = _model([tensors], [_vi("x", I64, [2, 3])], [_vi("y", D, [2, 3])], ml=4)
    _check(m, {"x": np.array([[1, 2, 3], [4, 3, 0]], "int64")})


def test_tfidf_ints_and_strings_all_modes():
    pool = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7]
    x = np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], "int32")
    for mode, extra in (("TF", {}), ("IDF", {"weights": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]}), ("TFIDF", {"weights": [.5] * 7})):
        for lo, hi, skip in ((1, 2, 0), (2, 2, 5), (1, 1, 3)):
            node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode=mode, min_gram_length=lo,
                                    max_gram_length=hi, max_skip_count=skip, ngram_counts=[0, 4],
                                    ngram_indexes=[0, 1, 2, 3, 4, 5, 6], pool_int64s=pool, **extra)
            m = _model([node], [_vi("x", TensorProto.INT32, [2, 6])], [_vi("y", F, [2, 7])], opset=9)
            _check(m, {"x": x}, exact=False)
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=2,
                            max_skip_count=1, ngram_counts=[0, 2], ngram_indexes=[2, 0, 1],
                            pool_strings=["a", "b", "a", "c"])
    m = _model([node], [_vi("x", S, [5])], [_vi("y", F, [3])], opset=9)
    _check(m, {"x": _strings("a", "b", "c", "a", "c")}, exact=False)


def test_binarizer_and_array_feature_extractor_compile_to_kernels():
    m = _model([_ml_node("Binarizer", ["x"], ["b"], threshold=0.25),
                _ml_node("ArrayFeatureExtractor", ["x", "i"], ["z"])],
               [_vi("x", F, [3, 5]), _vi("i", I64, [1, 2])], [_vi("b", F, [3, 5]), _vi("z", F, [3, 2])], ml=1)
    x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    _check(m, {"x": x, "i": np.array([[4, 1]], "int64")})
    pkg = ingot.compile(ingot.load(m), cache=False)
    steps = pkg.executable.plans["main"]["steps"]
    assert steps and all(s["op"] == "call_tir" for s in steps)  # no builtin: generated C


def _random_forest(rng, trees, depth, features, targets, modes):
    """Tables of ``trees`` random full binary trees of ``depth`` levels (ONNX TreeEnsemble attributes)."""
    t = {k: [] for k in ("nodes_featureids", "nodes_splits", "nodes_modes", "nodes_truenodeids",
                         "nodes_falsenodeids", "nodes_trueleafs", "nodes_falseleafs", "leaf_targetids",
                         "leaf_weights", "tree_roots", "nodes_missing_value_tracks_true")}
    members = []

    def grow(level):
        i = len(t["nodes_modes"])
        mode = int(rng.choice(modes))
        for k in ("nodes_featureids", "nodes_splits", "nodes_modes", "nodes_truenodeids", "nodes_falsenodeids",
                  "nodes_trueleafs", "nodes_falseleafs", "nodes_missing_value_tracks_true"):
            t[k].append(0)
        t["nodes_featureids"][i] = int(rng.integers(features))
        t["nodes_splits"][i] = float(np.round(rng.standard_normal(), 1))
        t["nodes_modes"][i] = mode
        t["nodes_missing_value_tracks_true"][i] = int(rng.integers(2))
        if mode == 6:  # no 0.0 member: onnx.reference ends a set at a 0.0 (a falsy value), not only at NaN
            values = np.round(rng.standard_normal(3), 1)
            members.extend(sorted(set(np.where(values == 0, 0.3, values).tolist())) + [np.nan])
        for side in ("true", "false"):
            if level + 1 == depth:
                t[f"nodes_{side}leafs"][i] = 1
                t[f"nodes_{side}nodeids"][i] = len(t["leaf_weights"])
                t["leaf_weights"].append(float(np.round(rng.standard_normal() * 10, 2)))
                t["leaf_targetids"].append(int(rng.integers(targets)))
            else:
                t[f"nodes_{side}nodeids"][i] = grow(level + 1)
        return i

    for _ in range(trees):
        t["tree_roots"].append(grow(0))
    attrs = dict(t)
    attrs["nodes_splits"] = numpy_helper.from_array(np.array(t["nodes_splits"], "float32"), "s")
    attrs["leaf_weights"] = numpy_helper.from_array(np.array(t["leaf_weights"], "float32"), "w")
    attrs["nodes_modes"] = numpy_helper.from_array(np.array(t["nodes_modes"], "uint8"), "m")
    if members:
        attrs["membership_values"] = numpy_helper.from_array(np.array(members, "float32"), "mv")
    return attrs


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble_random_forests_match_the_reference(aggregate):
    rng = np.random.default_rng(aggregate)
    attrs = _random_forest(rng, trees=5, depth=4, features=3, targets=3, modes=[0, 1, 2, 3, 4, 5, 6])
    node = _ml_node("TreeEnsemble", ["x"], ["y"], n_targets=3, aggregate_function=aggregate, **attrs)
    m = _model([node], [_vi("x", F, [16, 3])], [_vi("y", F, [16, 3])], ml=5)
    # values on the splits' grid (0.1 steps) hit EQ / MEMBER nodes; some NaN take the missing branch
    x = np.round(rng.standard_normal((16, 3)), 1).astype("float32")
    x[rng.random((16, 3)) < 0.1] = np.nan
    if aggregate in (0, 1):
        _check(m, {"x": x}, exact=False)
        return
    # MIN / MAX: a target no leaf of a row reaches is 0 (ONNX Runtime); onnx.reference leaves the float
    # type's extreme value there instead, so its sentinel is mapped to 0 before comparing.
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    ref = np.where(np.abs(ref) == np.finfo("float32").max, 0, ref)
    assert (ref == 0).any()  # the case is exercised
    got = ingot.run(ingot.compile(ingot.load(m), cache=False), {"x": x})["y"]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble_matches_onnxruntime(aggregate):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(10 + aggregate)
    # ONNX Runtime's MEMBER sets hold integers only: modes 0-5 here, NaN features included
    attrs = _random_forest(rng, trees=6, depth=4, features=3, targets=3, modes=[0, 1, 2, 3, 4, 5])
    node = _ml_node("TreeEnsemble", ["x"], ["y"], n_targets=3, aggregate_function=aggregate, **attrs)
    m = _model([node], [_vi("x", F, [32, 3])], [_vi("y", F, [32, 3])], opset=21, ml=5)
    x = np.round(rng.standard_normal((32, 3)), 1).astype("float32")
    x[rng.random((32, 3)) < 0.1] = np.nan
    expected = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ingot.run(ingot.compile(ingot.load(m), cache=False), {"x": x})["y"]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-5)


def test_tree_ensemble_is_compiled_and_checks_its_tables():
    attrs = _random_forest(np.random.default_rng(7), trees=3, depth=3, features=2, targets=1, modes=[0])
    node = _ml_node("TreeEnsemble", ["x"], ["y"], n_targets=1, **attrs)
    m = _model([node], [_vi("x", F, ["n", 2])], [_vi("y", F, ["n", 1])], ml=5)
    pkg = ingot.compile(ingot.load(m), cache=False)
    assert all(s["op"] == "call_tir" for s in pkg.executable.plans["main"]["steps"])
    for rows in (1, 9):  # one build serves every batch size
        x = np.random.default_rng(rows).standard_normal((rows, 2)).astype("float32")
        np.testing.assert_allclose(ingot.run(pkg, {"x": x})["y"], ReferenceEvaluator(m).run(None, {"x": x})[0],
                                   rtol=1e-6, atol=1e-6)
    attrs["nodes_truenodeids"] = [99] + list(attrs["nodes_truenodeids"][1:])
    attrs["nodes_trueleafs"] = [0] + list(attrs["nodes_trueleafs"][1:])
    bad = _model([_ml_node("TreeEnsemble", ["x"], ["y"], n_targets=1, **attrs)], [_vi("x", F, [2, 2])],
                 [_vi("y", F, [2, 1])], ml=5)
    with pytest.raises(Exception, match="true branch 99 is out of range"):
        ingot.load(bad)


@pytest.mark.parametrize("ml_opset", [2, 4])
def test_label_encoder_matches_onnxruntime(ml_opset):
    """ONNX Runtime is the reference for NaN keys: from ai.onnx.ml opset 4 keys compare bit-wise, so a NaN key
    matches a NaN input (onnx.reference does not implement that rule)."""
    ort = pytest.importorskip("onnxruntime")
    cases = [(_ml_node("LabelEncoder", ["x"], ["y"], keys_strings=["x", "y"], values_floats=[1.5, -2.0],
                       default_float=0.25), S, F, _strings("y", "q", "x", "x")),
             (_ml_node("LabelEncoder", ["x"], ["y"], keys_floats=[0.5, float("nan"), -2.0], values_strings=["h", "n", "m"]),
              F, S, np.array([0.5, np.nan, 3.0, -2.0, 0.25], "float32"))]
    for node, tin, tout, x in cases:
        m = _model([node], [_vi("x", tin, list(x.shape))], [_vi("y", tout, list(x.shape))], opset=17, ml=ml_opset)
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        expected = sess.run(None, {"x": x})[0]
        got = ingot.run(ingot.compile(ingot.load(m), cache=False), {"x": x})["y"]
        assert got.tolist() == expected.tolist()


def test_an_ml_op_without_converter_is_reported_by_domain():
    node = _ml_node("SVMRegressor", ["x"], ["y"])
    m = _model([node], [_vi("x", F, [1, 2])], [_vi("y", F, [1, 1])], ml=3)
    with pytest.raises(Exception, match="ai.onnx.ml.SVMRegressor"):
        ingot.load(m)
    assert onnx.defs.has("SVMRegressor", "ai.onnx.ml")


_MOVES = [  # (op, extra inputs: arrays become initializers, names are graph inputs; attrs; output shapes)
    ("Identity", [], {}, [[2, 3]]),
    ("Reshape", [np.array([3, 2], "int64")], {}, [[3, 2]]),
    ("Transpose", [], {"perm": [1, 0]}, [[3, 2]]),
    ("Gather", [np.array([2, 0], "int64")], {"axis": 1}, [[2, 2]]),
    ("Unsqueeze", [np.array([0], "int64")], {}, [[1, 2, 3]]),
    ("Slice", [np.array([1], "int64"), np.array([3], "int64"), np.array([1], "int64")], {}, [[2, 2]]),
    ("Concat", ["x"], {"axis": 0}, [[4, 3]]),
    ("Expand", [np.array([2, 2, 3], "int64")], {}, [[2, 2, 3]]),
    ("Split", [np.array([1, 2], "int64")], {"axis": 1}, [[2, 1], [2, 2]]),
    ("Where", [], {}, [[2, 3]]),
]


@pytest.mark.parametrize("op, extra, attrs, shapes", _MOVES, ids=[c[0] for c in _MOVES])
def test_data_movement_ops_on_strings(op, extra, attrs, shapes):
    """Ops that only move data run on string tensors as the executor's graph_op builtin (numpy reference)."""
    names, inits, inputs = ["x"], [], [_vi("x", S, [2, 3])]
    feeds = {"x": _strings("a", "b", "c", "d", "", "f", shape=(2, 3))}
    if op == "Where":
        names = ["c", "x", "y"]
        inputs = [_vi("c", TensorProto.BOOL, [2, 3]), _vi("x", S, [2, 3]), _vi("y", S, [3])]
        feeds.update(c=np.array([[1, 0, 1], [0, 0, 1]], bool), y=_strings("p", "q", "r"))
    for k, e in enumerate(extra):
        if isinstance(e, str):
            names.append(e)
        else:
            inits.append(numpy_helper.from_array(e, f"k{k}"))
            names.append(f"k{k}")
    outs = [f"y{k}" for k in range(len(shapes))]
    g = helper.make_graph([helper.make_node(op, names, outs, **attrs)], "g", inputs,
                          [_vi(o, S, s) for o, s in zip(outs, shapes)], inits)
    _check(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), feeds)


_LEGACY = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def _legacy_forest(rng, trees, depth, features, targets):
    """TreeEnsembleRegressor attributes of ``trees`` random full trees (node ids local to each tree, leaves
    as LEAF nodes with one or two target entries)."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
                         "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                         "target_treeids", "target_nodeids", "target_ids", "target_weights")}
    for tree in range(trees):
        counter = [0]

        def grow(level, tree=tree, counter=counter):
            nid, k = counter[0], len(a["nodes_nodeids"])
            counter[0] += 1
            leaf = level == depth
            for key, value in (("nodes_treeids", tree), ("nodes_nodeids", nid),
                               ("nodes_featureids", int(rng.integers(features))),
                               ("nodes_values", float(np.round(rng.standard_normal(), 1))),
                               ("nodes_modes", "LEAF" if leaf else str(rng.choice(_LEGACY))),
                               ("nodes_truenodeids", 0), ("nodes_falsenodeids", 0),
                               ("nodes_missing_value_tracks_true", int(rng.integers(2)))):
                a[key].append(value)
            if leaf:
                for target in rng.choice(targets, size=min(int(rng.integers(1, 3)), targets), replace=False).tolist():
                    a["target_treeids"].append(tree)
                    a["target_nodeids"].append(nid)
                    a["target_ids"].append(int(target))
                    a["target_weights"].append(float(np.round(rng.standard_normal() * 10, 2)))
            else:
                a["nodes_truenodeids"][k] = grow(level + 1)
                a["nodes_falsenodeids"][k] = grow(level + 1)
            return nid

        grow(0)
    return a


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_tree_ensemble_regressor_matches_onnxruntime(aggregate):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(len(aggregate))
    attrs = _legacy_forest(rng, trees=4, depth=3, features=3, targets=2)
    node = _ml_node("TreeEnsembleRegressor", ["x"], ["y"], n_targets=2, aggregate_function=aggregate,
                    base_values=[0.5, -1.0], **attrs)
    m = _model([node], [_vi("x", F, [24, 3])], [_vi("y", F, [24, 2])], opset=17, ml=3)
    x = np.round(rng.standard_normal((24, 3)), 1).astype("float32")
    x[rng.random((24, 3)) < 0.1] = np.nan
    expected = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    pkg = ingot.compile(ingot.load(m), cache=False)
    assert all(s["op"] == "call_tir" for s in pkg.executable.plans["main"]["steps"])
    np.testing.assert_allclose(ingot.run(pkg, {"x": x})["y"], expected, rtol=1e-6, atol=1e-5)
    if aggregate in ("SUM", "AVERAGE"):
        # onnx.reference agrees without NaN features (its TreeEnsembleRegressor ignores
        # nodes_missing_value_tracks_true) and with SUM/AVERAGE (its MIN/MAX start differs, see above)
        clean = np.nan_to_num(x, nan=0.25)
        np.testing.assert_allclose(ingot.run(pkg, {"x": clean})["y"], ReferenceEvaluator(m).run(None, {"x": clean})[0],
                                   rtol=1e-6, atol=1e-5)


def _ort_and_ingot(m, feeds):
    ort = pytest.importorskip("onnxruntime")
    expected = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = list(ingot.run(ingot.compile(ingot.load(m), cache=False), feeds).values())
    return expected, got


@pytest.mark.parametrize("op, attrs, tin", [
    ("Scaler", {"offset": [0.5, -1.0, 2.0], "scale": [2.0, 0.5, -1.0]}, TensorProto.INT64),
    ("Scaler", {"offset": [0.25], "scale": [3.0]}, F),
    ("Normalizer", {"norm": "MAX"}, F), ("Normalizer", {"norm": "L1"}, F), ("Normalizer", {"norm": "L2"}, D),
    ("Imputer", {"imputed_value_floats": [9.0, 8.0, 7.0], "replaced_value_float": float("nan")}, F),
    ("Imputer", {"imputed_value_int64s": [5], "replaced_value_int64": 2}, TensorProto.INT64),
    ("LinearRegressor", {"coefficients": [0.5, -1.0, 2.0, 1.0, 0.0, -0.25], "intercepts": [1.0, -2.0],
                         "targets": 2}, F),
])
def test_numeric_ml_ops_match_onnxruntime(op, attrs, tin):
    out_t = TensorProto.INT64 if op == "Imputer" and tin == TensorProto.INT64 else F
    out_shape = [4, 2] if op == "LinearRegressor" else [4, 3]
    m = _model([_ml_node(op, ["x"], ["y"], **attrs)], [_vi("x", tin, [4, 3])], [_vi("y", out_t, out_shape)],
               opset=17, ml=3)
    dtype = helper.tensor_dtype_to_np_dtype(tin)
    x = np.array([[-3, 1, 2], [0, 0, 0], [2, 2, 5], [4, -1, 2]]).astype(dtype)
    if dtype.kind == "f":
        x[0, 1] = np.nan if op == "Imputer" else x[0, 1]
        x = x + np.array([0.25, 0.5, 0.0], dtype)
    expected, got = _ort_and_ingot(m, {"x": x})
    assert got[0].dtype == expected[0].dtype
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6, atol=1e-6)
    steps = ingot.compile(ingot.load(m), cache=False).executable.plans["main"]["steps"]
    assert all(s["op"] == "call_tir" for s in steps)  # compiled, no builtin


def test_category_mapper_both_ways_matches_onnxruntime():
    cats = {"cats_strings": ["cat", "dog", "eel"], "cats_int64s": [7, 3, 5]}
    m = _model([_ml_node("CategoryMapper", ["x"], ["y"], default_int64=-9, **cats)], [_vi("x", S, [4])],
               [_vi("y", I64, [4])], opset=17, ml=3)
    expected, got = _ort_and_ingot(m, {"x": _strings("dog", "cow", "eel", "cat")})
    assert got[0].tolist() == expected[0].tolist()
    m = _model([_ml_node("CategoryMapper", ["x"], ["y"], default_string="?", **cats)], [_vi("x", I64, [2, 2])],
               [_vi("y", S, [2, 2])], opset=17, ml=3)
    expected, got = _ort_and_ingot(m, {"x": np.array([[3, 4], [7, 5]], "int64")})
    assert got[0].tolist() == expected[0].tolist()


@pytest.mark.parametrize("post, strings", [("NONE", False), ("SOFTMAX", True), ("LOGISTIC", False)])
def test_tree_ensemble_classifier_matches_onnxruntime(post, strings):
    rng = np.random.default_rng(len(post))
    a = _legacy_forest(rng, trees=4, depth=3, features=3, targets=3)
    attrs = {k.replace("target_", "class_"): v for k, v in a.items()}
    labels = {"classlabels_strings": ["ant", "bee", "cow"]} if strings else {"classlabels_int64s": [10, 20, 30]}
    node = _ml_node("TreeEnsembleClassifier", ["x"], ["label", "scores"], post_transform=post,
                    base_values=[0.1, -0.2, 0.3], **labels, **attrs)
    m = _model([node], [_vi("x", F, [24, 3])], [_vi("label", S if strings else I64, [24]), _vi("scores", F, [24, 3])],
               opset=17, ml=3)
    x = np.round(rng.standard_normal((24, 3)), 1).astype("float32")
    (label, scores), got = _ort_and_ingot(m, {"x": x})
    assert got[0].tolist() == label.tolist()
    np.testing.assert_allclose(got[1], scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], ReferenceEvaluator(m).run(None, {"x": x})[1], rtol=1e-5, atol=1e-6)


def test_binary_single_column_classifier_is_refused_with_the_reason():
    a = _legacy_forest(np.random.default_rng(0), trees=2, depth=2, features=2, targets=1)
    node = _ml_node("TreeEnsembleClassifier", ["x"], ["label", "scores"], classlabels_int64s=[0, 1],
                    **{k.replace("target_", "class_"): v for k, v in a.items()})
    m = _model([node], [_vi("x", F, [2, 2])], [_vi("label", I64, [2]), _vi("scores", F, [2, 2])], opset=17, ml=3)
    with pytest.raises(Exception, match="binary classifier with weights for one class"):
        ingot.load(m)


def test_string_module_prints_and_parses_back():
    from ingot.ir import structural_equal
    from ingot.script import from_source

    nodes = [helper.make_node("RegexFullMatch", ["x"], ["y"], pattern='"a\\d+\'é'),
             helper.make_node("StringConcat", ["x", "c"], ["z"])]
    g = helper.make_graph(nodes, "g", [_vi("x", S, [2])], [_vi("y", TensorProto.BOOL, [2]), _vi("z", S, [2])],
                          [helper.make_tensor("c", S, [2], [b'q"', b"\\n\n"])])
    mod = ingot.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)).mod
    assert structural_equal(from_source(mod.script()), mod)  # quotes, backslashes, newlines in attributes


def test_cli_compiles_and_runs_a_string_model(tmp_path):
    click_testing = pytest.importorskip("click.testing")
    from ingot.cli.main import main

    m = _model([helper.make_node("StringConcat", ["x", "x"], ["z"]), helper.make_node("Equal", ["z", "x"], ["e"])],
               [_vi("x", S, [3])], [_vi("z", S, [3]), _vi("e", TensorProto.BOOL, [3])])
    path, pkg = tmp_path / "s.onnx", tmp_path / "s.ingot"
    onnx.save(m, str(path))
    runner = click_testing.CliRunner()
    r = runner.invoke(main, ["compile", str(path), "-o", str(pkg)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["run", str(pkg)])  # example inputs: empty strings ("" + "" == "")
    assert r.exit_code == 0, r.output
    np.savez(tmp_path / "in.npz", x=np.array(["ab", "", "c"]))
    r = runner.invoke(main, ["run", str(pkg), "--inputs", str(tmp_path / "in.npz"), "--outputs",
                             str(tmp_path / "out.npz"), "--print-top", "2"])
    assert r.exit_code == 0, r.output
    assert "z: shape [3] string" in r.output
    with np.load(tmp_path / "out.npz", allow_pickle=False) as out:
        assert out["z"].tolist() == ["abab", "", "cc"] and out["e"].tolist() == [False, True, False]
