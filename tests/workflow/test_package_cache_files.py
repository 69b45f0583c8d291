"""What the package cache trusts without reading (`ingot.workflow.package_cache`): the memo of a model
file's SHA-256 (`file_digest`, keyed by the file's stat) and the stamp of each stored entry file
(a hit maps the weights instead of hashing them). Every change of a file must still miss or be
detected; results are compared with the ONNX reference evaluator (``onnx.reference``)."""
from __future__ import annotations

import hashlib
import mmap
import os
import shutil
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
from ingot.workflow.model import ModelInputError  # noqa: E402
from ingot.workflow.package_cache import PackageCacheWarning  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_OLD = 1_600_000_000 * 10**9  # an mtime long past


@pytest.fixture
def settled_now(monkeypatch):
    """Memoize files however recently they changed (the tests change them within milliseconds)."""
    monkeypatch.setattr(package_cache, "_SETTLED_NS", -10**18)


def _model(path, seed=0, external=False):
    """MatMul + Add + Relu, [2, 8] -> [2, 4], seeded weights (the seed changes bytes, not the size)."""
    rng = np.random.default_rng(seed)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Add", ["y", "B"], ["s"]),
         helper.make_node("Relu", ["s"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(rng.standard_normal((8, 4)).astype("float32"), "W"),
         numpy_helper.from_array(rng.standard_normal((4,)).astype("float32"), "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if external:
        onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                  location=os.path.basename(path) + ".data", size_threshold=0)
    else:
        onnx.save(model, str(path))
    return str(path)


def _check(package, path):
    x = np.random.default_rng(7).standard_normal((2, 8)).astype("float32")
    got = ingot.run(package, {"x": x})["z"]
    np.testing.assert_allclose(got, ReferenceEvaluator(path).run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
    return got


def _compile(path, cache):
    model = ingot.load(path, cache_dir=cache)
    return model, ingot.compile(model, target="llvm -num-cores=1", cache_dir=cache)


def _mapped(weights):
    """Whether the weights array views an mmap (the test's weights are far below huge_empty's
    minimum, so a read-in blob is ordinary memory)."""
    base = weights.base
    while isinstance(base, (np.ndarray, memoryview)):
        base = base.obj if isinstance(base, memoryview) else base.base
    return isinstance(base, mmap.mmap)


def _stem(cache):
    [commit] = sorted((disk_cache.cache_dir(cache) / disk_cache.PACKAGE).rglob("*.package.json"))
    return str(commit)[:-len(".package.json")]


def test_file_digest_memo_skips_the_read_until_the_file_changes(tmp_path, settled_now):
    path = _model(tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    want = hashlib.sha256(open(path, "rb").read()).hexdigest()
    first = package_cache.file_digest(path, cache)
    assert first == (want, open(path, "rb").read())  # read (and memoized)
    assert package_cache.file_digest(path, cache) == (want, None)  # not read
    # Same size, other content, the old mtime put back: the ctime (no program sets it) still tells.
    st = os.stat(path)
    _model(path, seed=1)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size
    digest, data = package_cache.file_digest(path, cache)
    assert data is not None and digest == hashlib.sha256(data).hexdigest() != want


def test_recently_changed_file_is_not_memoized(tmp_path):
    path = _model(tmp_path / "m.onnx")  # written just now: a write in the same clock tick would keep its stat
    cache = tmp_path / "cache"
    assert package_cache.file_digest(path, cache)[1] is not None
    assert package_cache.file_digest(path, cache)[1] is not None


def test_memo_survives_across_processes(tmp_path):
    path = _model(tmp_path / "m.onnx")
    cache = str(tmp_path / "cache")
    code = (f"import sys; sys.path.insert(0, {ROOT!r})\n"
            "from ingot.workflow import package_cache as pc\n"
            "pc._SETTLED_NS = -10**18\n"
            f"digest, data = pc.file_digest({path!r}, {cache!r})\n"
            "print(digest, data is None)\n")

    def run():
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.split()

    want = hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert run() == [want, "False"]
    assert run() == [want, "True"]  # the second process does not read the file
    _model(path, seed=1)  # same size, new content and mtime
    digest, read = run()
    assert read == "False" and digest == hashlib.sha256(open(path, "rb").read()).hexdigest() != want


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_changed_model_file_misses(tmp_path, settled_now, keep_mtime):
    path = _model(tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    _, cold = _compile(path, cache)
    model, warm = _compile(path, cache)
    assert warm.from_cache and model._importer is not None
    before = _check(warm, path)
    st = os.stat(path)
    _model(path, seed=1)  # same size, other weights
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    _, changed = _compile(path, cache)
    assert not changed.from_cache
    assert not np.array_equal(_check(changed, path), before)


def test_lazy_model_refuses_a_file_changed_after_load(tmp_path, settled_now):
    path = _model(tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    _compile(path, cache)
    model = ingot.load(path, cache_dir=cache)
    assert model._importer is not None  # deferred: the memo gave the digest, the file was not read
    _model(path, seed=1)
    with pytest.raises(ModelInputError, match="changed after ingot.load"):
        model.mod  # noqa: B018 - importing now would compile other weights than the key names


def test_hit_maps_the_weights_and_a_copied_entry_is_hashed_then_restamped(tmp_path):
    path = _model(tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    _compile(path, cache)
    _, hit = _compile(path, cache)
    assert hit.from_cache and _mapped(hit.executable.weights)
    _check(hit, path)
    stem = _stem(cache)
    for suffix in (".so", ".weights.bin", ".json"):  # a copy: same bytes and mtime, another inode
        shutil.copy2(stem + suffix, stem + suffix + ".copy")
        os.replace(stem + suffix + ".copy", stem + suffix)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PackageCacheWarning)
        _, copied = _compile(path, cache)
        assert copied.from_cache and not _mapped(copied.executable.weights)  # read + hashed
        _check(copied, path)
        _, again = _compile(path, cache)
    assert again.from_cache and _mapped(again.executable.weights)  # stamped again


@pytest.mark.parametrize("damage", ["truncate", "overwrite_middle", "replace_same_size", "extend"])
def test_damaged_weights_are_detected_and_rebuilt(tmp_path, damage):
    path = _model(tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    _compile(path, cache)
    weights = _stem(cache) + ".weights.bin"
    size = os.path.getsize(weights)
    if damage == "truncate":  # a full disk, a partial copy
        os.truncate(weights, size // 2)
    elif damage == "overwrite_middle":  # a stray in-place write, right after the store
        with open(weights, "r+b") as f:
            f.seek(size // 2)
            f.write(b"\xff\xff\xff\x7f")
    elif damage == "replace_same_size":  # another file renamed over it
        with open(weights + ".tmp", "wb") as f:
            f.write(np.full(size, 0x7f, np.uint8).tobytes())
        os.replace(weights + ".tmp", weights)
    else:
        with open(weights, "ab") as f:
            f.write(b"\0" * 64)
    with pytest.warns(PackageCacheWarning, match="unreadable"):
        _, rebuilt = _compile(path, cache)
    assert not rebuilt.from_cache
    _check(rebuilt, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PackageCacheWarning)
        _, hit = _compile(path, cache)
    assert hit.from_cache
    _check(hit, path)


def test_external_data_model_imports_from_beside_the_file_and_is_not_keyed(tmp_path):
    path = _model(tmp_path / "m.onnx", external=True)
    assert os.path.isfile(path + ".data")
    cache = tmp_path / "cache"
    model, package = _compile(path, cache)
    assert model.content_key is None  # the .onnx bytes do not hold the weights
    _check(package, path)


def test_cache_verify_finds_what_a_hit_trusts(tmp_path):
    from click.testing import CliRunner

    from ingot.cli.main import main

    path = _model(tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    _compile(path, cache)
    weights = _stem(cache) + ".weights.bin"
    st = os.stat(weights)
    with open(weights, "r+b") as f:  # a flipped byte with the mtime put back: the stamp still matches
        f.write(bytes([f.read(1)[0] ^ 0xFF]))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    result = CliRunner().invoke(main, ["cache", "--dir", str(cache), "--verify"])
    assert result.exit_code == 0 and "1 packages, 1 corrupt deleted" in result.output
    _, package = _compile(path, cache)
    assert not package.from_cache
    _check(package, path)
    result = CliRunner().invoke(main, ["cache", "--dir", str(cache), "--verify"])
    assert "1 packages, 0 corrupt deleted" in result.output


def test_initializers_are_views_of_the_file_bytes(tmp_path):
    """`ingot.load` of a file imports each initializer as a view of the bytes it hashed (no copy);
    the compiled result matches the reference and a copy-based import bit for bit."""
    from ingot.frontend.onnx import from_onnx
    from ingot.frontend.onnx.raw_tensors import initializer_view, raw_data_spans

    path = _model(tmp_path / "m.onnx")
    data = open(path, "rb").read()
    proto = onnx.load_from_string(data)
    spans = raw_data_spans(data)
    for init, span in zip(proto.graph.initializer, spans):
        view = initializer_view(init, span, data)
        assert view is not None and view.base is not None and not view.flags.writeable
        np.testing.assert_array_equal(view, numpy_helper.to_array(init))
    model = ingot.load(path, cache_dir=tmp_path / "first")  # a first load imports the bytes it hashed
    assert model._importer is None
    copied = from_onnx(proto)[0]
    assert ingot.ir.structural_equal(model.mod, copied)
    _, package = _compile(path, tmp_path / "cache")
    _check(package, path)
    # A tensor the walk cannot match (name changed in the proto only) is copied, not viewed wrongly.
    proto.graph.initializer[0].name = "other"
    assert initializer_view(proto.graph.initializer[0], spans[0], data) is None
