"""The compiled-package cache (`ingot.workflow.package_cache`): a warm ``ingot.load`` →
``ingot.compile`` loads the stored package without importing the model; every change of what
decides the result misses; broken entries are rebuilt with a warning; concurrent compiles are safe.

Every test compares outputs with the ONNX reference evaluator (``onnx.reference``)."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import ingot  # noqa: E402
from ingot.codegen import disk_cache  # noqa: E402
from ingot.workflow import package_cache  # noqa: E402
from ingot.workflow.package_cache import PackageCacheWarning  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _model(path, seed=0, batch="n"):
    """MatMul + Add + Relu with a symbolic batch (``shape_dict`` fixes it) and seeded weights."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((8, 4)).astype("float32")
    b = rng.standard_normal((4,)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Add", ["y", "B"], ["s"]),
         helper.make_node("Relu", ["s"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, 4])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return str(path)


def _check(package, path, batch=2):
    x = np.random.default_rng(7).standard_normal((batch, 8)).astype("float32")
    got = ingot.run(package, {"x": x})["z"]
    want = ReferenceEvaluator(path).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return got


def _compile(path, cache_dir, shape=(2, 8), **kwargs):
    model = ingot.load(path, shape_dict={"x": list(shape)}, cache_dir=cache_dir)
    return model, ingot.compile(model, target="llvm -num-cores=1", cache_dir=cache_dir, **kwargs)


def _entries(cache_dir, suffix=".package.json"):
    return sorted((disk_cache.cache_dir(cache_dir) / disk_cache.PACKAGE).rglob(f"*{suffix}"))


def test_hit_skips_import_and_matches_cold(tmp_path):
    path = _model(tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    model, cold = _compile(path, cache)
    assert not cold.from_cache and model._importer is None  # first load: imported eagerly
    before = package_cache.cache_stats()
    model, warm = _compile(path, cache)
    assert warm.from_cache and package_cache.cache_stats()["hits"] == before["hits"] + 1
    assert model._importer is not None, "a hit must not import the model"
    assert [i.to_json() for i in warm.inputs] == [i.to_json() for i in cold.inputs]
    assert warm.source == path
    np.testing.assert_array_equal(_check(warm, path), _check(cold, path))
    # The lazy model still imports on demand (a compile with other options needs the graph).
    assert "main" in model.mod.functions and model.content_key is None


@pytest.mark.parametrize("change", ["weights", "shape", "target", "layout", "opt_level"])
def test_any_change_misses(tmp_path, change):
    path = _model(tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    _, first = _compile(path, cache)
    kwargs, shape = {}, (2, 8)
    if change == "weights":
        _model(path, seed=1)  # same file name, other weights
    elif change == "shape":
        shape = (3, 8)
    elif change == "layout":
        kwargs["layout"] = "NCHW"
    elif change == "opt_level":
        kwargs["opt_level"] = 0
    model = ingot.load(path, shape_dict={"x": list(shape)}, cache_dir=cache)
    target = "llvm -num-cores=2" if change == "target" else "llvm -num-cores=1"
    package = ingot.compile(model, target=target, cache_dir=cache, **kwargs)
    assert not package.from_cache
    assert len(_entries(cache)) == 2
    _check(package, path, batch=shape[0])
    if change == "target":
        assert package.target == "llvm -num-cores=2"


def test_bypass_reads_and_writes_nothing(tmp_path):
    path = _model(tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    model = ingot.load(path, shape_dict={"x": [2, 8]}, cache=False, cache_dir=cache)
    assert model.content_key is None
    package = ingot.compile(model, target="llvm -num-cores=1", cache=False, cache_dir=cache)
    assert not package.from_cache and _entries(cache) == [] and _entries(cache, ".model.json") == []
    _check(package, path)


@pytest.mark.parametrize("damage", ["truncate_library", "truncate_weights", "flip_weight_byte", "garbage_commit",
                                    "delete_manifest"])
def test_corrupt_entry_is_rebuilt_with_a_warning(tmp_path, damage):
    path = _model(tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    _compile(path, cache)
    [commit] = _entries(cache)
    stem = str(commit)[:-len(".package.json")]
    if damage == "truncate_library":
        with open(stem + ".so", "r+b") as f:
            f.truncate(100)
    elif damage == "truncate_weights":
        with open(stem + ".weights.bin", "r+b") as f:
            f.truncate(10)
    elif damage == "flip_weight_byte":  # same size: only the weights' SHA-256 tells
        with open(stem + ".weights.bin", "r+b") as f:
            first = f.read(1)
            f.seek(0)
            f.write(bytes([first[0] ^ 0xFF]))
    elif damage == "garbage_commit":
        commit.write_bytes(b"{not json")
    else:
        os.unlink(stem + ".json")
    with pytest.warns(PackageCacheWarning, match="unreadable"):
        _, package = _compile(path, cache)
    assert not package.from_cache
    _check(package, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PackageCacheWarning)
        _, again = _compile(path, cache)  # rebuilt entry: a clean hit
    assert again.from_cache
    _check(again, path)


def test_in_memory_model_is_keyed_by_graph_and_params(tmp_path):
    from ingot import graph as G

    cache = tmp_path / "cache"

    def module():
        bb = G.BlockBuilder()
        x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
        w = G.Var("w", G.TensorStructInfo((2, 3), "float32"))
        with bb.function("main", [x, w]):
            bb.emit_func_output(bb.emit(G.op.relu(bb.emit(G.op.add(x, w)))))
        return bb.get()

    def build(weight):
        model = ingot.workflow.from_module(module(), params={"w": weight})
        return ingot.compile(model, target="llvm -num-cores=1", cache_dir=cache)

    x = np.arange(6, dtype="float32").reshape(2, 3) - 3
    w1, w2 = np.ones((2, 3), "float32"), np.full((2, 3), -2.0, "float32")
    first, second, other = build(w1), build(w1), build(w2)
    assert (first.from_cache, second.from_cache, other.from_cache) == (False, True, False)
    for package, w in ((second, w1), (other, w2)):
        np.testing.assert_array_equal(ingot.run(package, {"x": x})[package.outputs[0].name], np.maximum(x + w, 0))


_WORKER = """
import sys
sys.path.insert(0, {root!r})
import numpy as np, ingot
model = ingot.load({path!r}, shape_dict={{"x": [2, 8]}}, cache_dir={cache!r})
package = ingot.compile(model, target="llvm -num-cores=1", cache_dir={cache!r})
x = np.random.default_rng(7).standard_normal((2, 8)).astype("float32")
np.save({out!r}, ingot.run(package, {{"x": x}})["z"])
"""


def test_concurrent_compiles_do_not_corrupt(tmp_path):
    path = _model(tmp_path / "m.onnx")
    cache = str(tmp_path / "cache")
    procs = []
    for i in range(2):
        code = _WORKER.format(root=ROOT, path=path, cache=cache, out=str(tmp_path / f"out{i}.npy"))
        procs.append(subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    assert len(_entries(cache)) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", PackageCacheWarning)
        _, package = _compile(path, cache)
    assert package.from_cache
    got = _check(package, path)
    for i in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / f"out{i}.npy"), got)


def test_cache_cli_lists_and_clears_packages(tmp_path):
    from click.testing import CliRunner

    from ingot.cli.main import main

    path = _model(tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    _compile(path, cache)
    result = CliRunner().invoke(main, ["cache", "--dir", str(cache)])
    assert result.exit_code == 0 and "package" in result.output
    result = CliRunner().invoke(main, ["cache", "--dir", str(cache), "--clear"])
    assert result.exit_code == 0 and _entries(cache) == []
    _, package = _compile(path, cache)
    assert not package.from_cache
    _check(package, path)
