"""Kernels as separate pieces: `assemble_source` equals `generate_c`, and a module split into
several translation units (compiled in parallel, linked) exports the same symbols and computes
the same numbers (numpy references) as the one-unit build."""
import subprocess

import numpy as np
import pytest

import ingot
import ingot.codegen.build as cbuild
from ingot import graph as G
from ingot import te, tir
from ingot.codegen import toolchain
from ingot.codegen.c import generate_c
from ingot.runtime.module import Module
from ingot.graph.op._ref import conv2d_nchw

pytestmark = pytest.mark.compiler
rng = np.random.default_rng(7)


def _lowered_module():
    A = te.placeholder((64, 32), name="A")
    B = te.placeholder((32, 48), name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((64, 48), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((64, 48), lambda i, j: tir.max(C[i, j], tir.const(0.0, "float32")), name="D")
    X = te.placeholder((64,), name="X")
    Y = te.compute((64,), lambda i: te.exp(X[i]) * 2.0, name="Y")
    Z = te.compute((64,), lambda i: te.exp(X[i]) + 1.0, name="Z")
    mod = ingot.IRModule({
        "mm": te.create_prim_func([A, B, D]).with_attr("global_symbol", "mm"),
        "e-w": te.create_prim_func([X, Y]).with_attr("global_symbol", "e-w"),
        "e_w": te.create_prim_func([X, Z]).with_attr("global_symbol", "e_w"),  # same C base name
    })
    with ingot.target.Target("llvm"):
        return ingot.lower(mod)


def _pieces(mod):
    from ingot.codegen.c import function_name

    items = [(k if isinstance(k, str) else k.name_hint, f) for k, f in mod.items()]
    names = [function_name(k, f) for k, f in items]
    syms = cbuild.kernel_symbols(names)
    assert [s for s, _ in syms] == ["ingot_mm", "ingot_e_w", "ingot_e_w_1"]
    return mod, [cbuild.emit_kernel_source(f, n, *s) for (_, f), n, s in zip(items, names, syms)]


def test_assembled_pieces_equal_generate_c():
    mod, pieces = _pieces(_lowered_module())
    for include_source in (False, True):
        assert cbuild.assemble_source(pieces, "llvm", include_source).code == \
            generate_c(mod, "llvm", include_source).code


def test_kernel_source_json_round_trip():
    _, pieces = _pieces(_lowered_module())
    for p in pieces:
        assert cbuild.KernelSource.from_json(p.to_json()) == p
    with pytest.raises(ValueError, match="metadata"):
        cbuild.KernelSource.from_json({**pieces[0].to_json(), "metadata": {"symbol": "other", "params": []}})


def _exports(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return sorted(line.split()[-2:] for line in out.splitlines() if line.strip())


def test_split_library_exports_and_numbers_match_one_unit(tmp_path):
    from ingot.codegen.prelude import emit_metadata_c

    _, pieces = _pieces(_lowered_module())
    options = cbuild.compile_options_for("llvm")
    tail = emit_metadata_c(cbuild.assemble_source(pieces, "llvm", include_source=False).metadata)
    one = cbuild.link_kernel_sources(pieces, tail, options, cache_dir=tmp_path / "one", jobs=1)
    units = cbuild.translation_units(pieces, tail, 2)
    assert len(units) == 2 and all(u.startswith("/* ===== Ingot C prelude") for u in units)
    split = toolchain.compile_shared_library_units(units, options, cache_dir=tmp_path / "split", jobs=2)
    assert split != one
    assert _exports(split) == _exports(one)
    # A second build of the same units is a cache hit: no compiler runs.
    before = toolchain.compile_count()
    assert toolchain.compile_shared_library_units(units, options, cache_dir=tmp_path / "split") == split
    assert toolchain.compile_count() == before
    a, b, x = rng.random((64, 32), "float32"), rng.random((32, 48), "float32"), rng.random(64, "float32")
    for path in (one, split):
        lib = Module(path)
        d, y, z = np.zeros((64, 48), "float32"), np.zeros(64, "float32"), np.zeros(64, "float32")
        lib["mm"](a, b, d)
        lib["e-w"](x, y)
        lib["e_w"](x, z)
        np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-5)
        np.testing.assert_allclose(y, np.exp(x) * 2, rtol=1e-5)
        np.testing.assert_allclose(z, np.exp(x) + 1, rtol=1e-5)


def test_single_kernel_module_is_one_compiler_call(tmp_path, monkeypatch):
    _, pieces = _pieces(_lowered_module())

    def no_units(*args, **kwargs):
        raise AssertionError("a one-kernel module must not go through the multi-unit path")

    monkeypatch.setattr(cbuild, "compile_shared_library_units", no_units)
    monkeypatch.setattr(cbuild, "SPLIT_MIN_CHARS", 0)
    before = toolchain.compile_count()
    cbuild.link_kernel_sources(pieces[:1], "", cbuild.compile_options_for("llvm"), cache_dir=tmp_path, jobs=4)
    assert toolchain.compile_count() == before + 1


def _conv_model():
    w1 = (rng.standard_normal((16, 8, 3, 3)) / 8).astype("float32")
    w2 = (rng.standard_normal((16, 16, 3, 3)) / 12).astype("float32")
    x = G.Var("x", G.TensorStructInfo((1, 8, 12, 12), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(G.op.relu(bb.emit(G.op.conv2d(x, G.const(w1), padding=1))))
            gv = bb.emit_output(G.op.relu(bb.emit(G.op.conv2d(h, G.const(w2), padding=1))))
        bb.emit_func_output(gv)
    return bb.get(), w1, w2


def test_graph_model_split_into_units_matches_numpy_and_one_unit(tmp_path, monkeypatch):
    mod, w1, w2 = _conv_model()
    x = rng.standard_normal((1, 8, 12, 12)).astype("float32")
    ref = np.maximum(conv2d_nchw(np.maximum(conv2d_nchw(x, w1, padding=(1, 1, 1, 1)), 0), w2, padding=(1, 1, 1, 1)), 0)
    monkeypatch.setenv("INGOT_CACHE_DIR", str(tmp_path / "one"))
    ex_one = G.build(mod, "llvm -num-cores=2")
    monkeypatch.setenv("INGOT_CACHE_DIR", str(tmp_path / "split"))
    monkeypatch.setattr(cbuild, "SPLIT_MIN_CHARS", 0)
    monkeypatch.setattr(cbuild, "compile_jobs", lambda: 2)
    calls = []
    real = cbuild.compile_shared_library_units
    monkeypatch.setattr(cbuild, "compile_shared_library_units",
                        lambda sources, *a, **k: calls.append(len(sources)) or real(sources, *a, **k))
    ex_split = G.build(mod, "llvm -num-cores=2")
    assert calls and calls[0] >= 2
    assert ex_split.lib.get_source() == ex_one.lib.get_source()
    assert _exports(ex_split.lib.lib_path) == _exports(ex_one.lib.lib_path)
    from ingot.graph.artifact import load_executable

    loaded = load_executable(ex_split.export_library(str(tmp_path / "model.so")))  # the split library, exported
    assert loaded.lib.get_source() == ex_one.lib.get_source()
    for ex in (ex_one, ex_split, loaded):
        np.testing.assert_allclose(G.Executor(ex)["main"](x).numpy(), ref, rtol=1e-4, atol=1e-5)
