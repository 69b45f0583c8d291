"""The kernel source cache (`ingot.driver.kernel_cache`): a warm graph build skips lowering, the key
changes with the schedule and with names, corrupt entries are misses, and the code fingerprint
covers every package lowering and C printing use."""
import json
import subprocess
import sys

import numpy as np
import pytest

import ingot
import ingot.driver.build as driver_build
from ingot import graph as G
from ingot import te
from ingot.driver import kernel_cache as kc
from ingot.graph.op._ref import conv2d_nchw
from ingot.tir.schedule import Schedule

pytestmark = pytest.mark.compiler
rng = np.random.default_rng(3)


def _scale_func(split: int, names=("A", "B")):
    A = te.placeholder((256,), name=names[0])
    B = te.compute((256,), lambda i: A[i] * 2.0 + 1.0, name=names[1])
    sch = Schedule(te.create_prim_func([A, B]))
    i, = sch.get_loops(sch.get_block(names[1]))
    _, inner = sch.split(i, [None, split])
    sch.vectorize(inner)
    return sch.mod["main"]


def _counting_lower(monkeypatch):
    calls = []
    real = driver_build.lower

    def lower(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(driver_build, "lower", lower)
    return calls


def _source(func, tmp_path, **kwargs):
    return kc.kernel_source(func, "main", "main", "ingot_main", "ingot_kernel_main", "llvm",
                            cache_dir=tmp_path, **kwargs)


def test_hit_skips_lowering_and_gives_the_same_c(tmp_path, monkeypatch):
    calls = _counting_lower(monkeypatch)
    first = _source(_scale_func(8), tmp_path)
    assert len(calls) == 1
    second = _source(_scale_func(8), tmp_path)  # a structurally equal function, new objects
    assert len(calls) == 1 and second == first


def test_key_changes_with_schedule_names_target_and_symbols(tmp_path, monkeypatch):
    key = kc.kernel_cache_key(_scale_func(8), "main", "main", "ingot_main", "ingot_kernel_main", "llvm")
    others = [
        kc.kernel_cache_key(_scale_func(16), "main", "main", "ingot_main", "ingot_kernel_main", "llvm"),
        kc.kernel_cache_key(_scale_func(8, ("X", "B")), "main", "main", "ingot_main", "ingot_kernel_main", "llvm"),
        kc.kernel_cache_key(_scale_func(8), "main", "main", "ingot_main_1", "ingot_kernel_main_1", "llvm"),
        kc.kernel_cache_key(_scale_func(8), "main", "main", "ingot_main", "ingot_kernel_main", "llvm -opt-level=2"),
    ]
    assert len({key, *others}) == 5
    # a changed schedule is lowered again, not served the old C
    calls = _counting_lower(monkeypatch)
    a, b = _source(_scale_func(8), tmp_path), _source(_scale_func(16), tmp_path)
    assert len(calls) == 2 and a.text != b.text


def test_config_context_bypasses_the_cache(tmp_path):
    with ingot.transform.PassContext(config={"tir.noalias": False}):
        assert kc.kernel_cache_key(_scale_func(8), "main", "main", "ingot_main", "ingot_kernel_main", "llvm") is None
        _source(_scale_func(8), tmp_path)
    assert not (tmp_path / "kernel-c").exists()


@pytest.mark.parametrize("damage", ["truncate", "garbage", "wrong_key", "bad_payload", "empty"])
def test_corrupt_entry_is_a_miss_and_is_rewritten(tmp_path, monkeypatch, damage):
    good = _source(_scale_func(8), tmp_path)
    key = kc.kernel_cache_key(_scale_func(8), "main", "main", "ingot_main", "ingot_kernel_main", "llvm")
    path = kc.entry_path(key, tmp_path)
    text = path.read_text()
    entry = json.loads(text)
    if damage == "truncate":
        path.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\xff\xfe not json")
    elif damage == "wrong_key":
        path.write_text(json.dumps({**entry, "key": "0" * 64}))
    elif damage == "bad_payload":
        payload = entry["payload"].replace("ingot_kernel_main", "ingot_kernel_evil")  # checksum no longer fits
        path.write_text(json.dumps({**entry, "payload": payload}))
    else:
        path.write_text("")
    calls = _counting_lower(monkeypatch)
    before = kc.cache_stats()["corrupt"]
    assert _source(_scale_func(8), tmp_path) == good
    assert len(calls) == 1 and kc.cache_stats()["corrupt"] == before + 1
    assert json.loads(path.read_text())["key"] == key  # rewritten


def _model(w):
    x = G.Var("x", G.TensorStructInfo((1, 4, 10, 10), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            c = bb.emit(G.op.conv2d(x, G.const(w), padding=1))
            gv = bb.emit_output(G.op.relu(bb.emit(G.op.add(c, c))))
        bb.emit_func_output(gv)
    return bb.get()


def test_warm_graph_build_lowers_nothing_and_matches_numpy(tmp_path, monkeypatch):
    monkeypatch.setenv("INGOT_CACHE_DIR", str(tmp_path))
    w = (rng.standard_normal((8, 4, 3, 3)) / 6).astype("float32")
    mod = _model(w)
    x = rng.standard_normal((1, 4, 10, 10)).astype("float32")
    ref = np.maximum(2 * conv2d_nchw(x, w, padding=(1, 1, 1, 1)), 0)
    calls = _counting_lower(monkeypatch)
    cold = G.build(mod, "llvm -num-cores=2")
    assert calls, "the cold build lowers its kernels"
    calls.clear()
    warm = G.build(_model(w), "llvm -num-cores=2")  # an equal model, new objects
    assert not calls, "a warm build must take every kernel's C from the cache"
    assert warm.lib.get_source() == cold.lib.get_source() and warm.lib.lib_path == cold.lib.lib_path
    for ex in (cold, warm):
        np.testing.assert_allclose(G.Executor(ex)["main"](x).numpy(), ref, rtol=1e-4, atol=1e-5)


def test_fingerprint_covers_what_lowering_imports():
    # A fresh process: build a scheduled kernel, then see which ingot modules lowering + printing load.
    code = (
        "import sys\n"
        "from ingot import te\n"
        "from ingot.tir.schedule import Schedule\n"
        "from ingot.driver import kernel_cache as kc\n"
        "A = te.placeholder((64, 64), name='A')\n"
        "k = te.reduce_axis((0, 64), name='k')\n"
        "B = te.compute((64,), lambda i: te.sum(te.exp(A[i, k]), axis=k), name='B')\n"
        "sch = Schedule(te.create_prim_func([A, B]))\n"
        "i, _ = sch.get_loops(sch.get_block('B'))\n"
        "sch.parallel(i)\n"
        "f = sch.mod['main']\n"
        "before = set(sys.modules)\n"
        "kc.kernel_source(f, 'main', 'main', 'ingot_main', 'ingot_kernel_main', 'llvm', use_cache=False)\n"
        "print(' '.join(sorted(m for m in set(sys.modules) - before if m.startswith('ingot.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    roots = {p.removesuffix(".py") for p in kc.FINGERPRINTED}
    outside = [m for m in out if m.split(".")[1] not in roots]
    assert not outside, f"add these packages to kernel_cache.FINGERPRINTED: {outside}"
