"""`OverlappedLink`: gcc compiles translation units while the next kernels are lowered. The
library it links has the same source, exports and numbers (numpy references) as the serial build;
a gcc error in one kernel of a background unit raises naming that kernel, leaves no cache entry
for the failed unit and no compiler thread running."""
import dataclasses
import subprocess
import threading

import numpy as np
import pytest

import ingot
import ingot.codegen.build as cbuild
from ingot import graph as G
from ingot import te
from ingot.codegen import toolchain
from ingot.codegen.c import function_name
from ingot.codegen.prelude import emit_metadata_c
from ingot.graph.op._ref import conv2d_nchw
from ingot.runtime.module import Module

pytestmark = pytest.mark.compiler
rng = np.random.default_rng(17)


def _pieces():
    """Three lowered kernels (``add1``, ``mul2``, ``sub3``) as `KernelSource`s."""
    funcs = {}
    for name, fn in (("add1", lambda x: x + 1.0), ("mul2", lambda x: x * 2.0), ("sub3", lambda x: x - 3.0)):
        X = te.placeholder((64,), name="X")
        Y = te.compute((64,), lambda i, X=X, fn=fn: fn(X[i]), name="Y")
        funcs[name] = te.create_prim_func([X, Y]).with_attr("global_symbol", name)
    with ingot.target.Target("llvm"):
        mod = ingot.lower(ingot.IRModule(funcs))
    items = [(k if isinstance(k, str) else k.name_hint, f) for k, f in mod.items()]
    names = [function_name(k, f) for k, f in items]
    return [cbuild.emit_kernel_source(f, n, *s) for (_, f), n, s in zip(items, names, cbuild.kernel_symbols(names))]


def _cc_threads():
    return [t for t in threading.enumerate() if t.name.startswith("ingot-cc") and t.is_alive()]


def _exports(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return sorted(line.split()[-2:] for line in out.splitlines() if line.strip())


def test_overlapped_units_link_the_same_functions(tmp_path, monkeypatch):
    monkeypatch.setattr(cbuild, "OVERLAP_UNIT_CHARS", 1)  # every kernel its own unit
    pieces = _pieces()
    options = cbuild.compile_options_for("llvm")
    tail = emit_metadata_c(cbuild.assemble_source(pieces, "llvm", include_source=False).metadata)
    compiled_ahead = []
    real = cbuild.compile_object
    monkeypatch.setattr(cbuild, "compile_object", lambda src, *a, **k: compiled_ahead.append(src) or real(src, *a, **k))
    with cbuild.OverlappedLink(options, cache_dir=tmp_path / "o", jobs=2) as overlap:
        for p in pieces:
            overlap.add_kernel(p)
        units = overlap.units(pieces, tail, options)
        path = cbuild.link_kernel_sources(pieces, tail, options, overlap=overlap)
    assert len(units) == 4 and set(units) == set(compiled_ahead)  # a unit per kernel + one of the tail
    serial = cbuild.link_kernel_sources(pieces, tail, options, cache_dir=tmp_path / "s", jobs=1)
    assert _exports(path) == _exports(serial)
    x = rng.random(64, "float32")
    for lib in (Module(path), Module(serial)):
        for name, ref in (("add1", x + 1), ("mul2", x * 2), ("sub3", x - 3)):
            y = np.zeros(64, "float32")
            lib[name](x, y)
            np.testing.assert_allclose(y, ref, rtol=1e-6)
    assert not _cc_threads()


def test_gcc_error_in_a_background_unit_names_the_kernel(tmp_path, monkeypatch):
    monkeypatch.setattr(cbuild, "OVERLAP_UNIT_CHARS", 1)
    pieces = _pieces()
    broken = dataclasses.replace(pieces[1], text=pieces[1].text.replace("{", "{ int broken = ;", 1))
    pieces = [pieces[0], broken, pieces[2]]
    options = cbuild.compile_options_for("llvm")
    with pytest.raises(toolchain.CompileError, match="kernel 'mul2'") as info:
        with cbuild.OverlappedLink(options, cache_dir=tmp_path, jobs=2) as overlap:
            for p in pieces:
                overlap.add_kernel(p)
            cbuild.link_kernel_sources(pieces, "", options, overlap=overlap)
    assert "expected expression" in str(info.value)  # the compiler's output is in the message
    assert not _cc_threads()
    # The failed unit left its source (named in the error) but no object and no temp file.
    assert not list(tmp_path.rglob("*.tmp"))
    failed = [c for c in tmp_path.rglob("*.c") if "int broken" in c.read_text()]
    assert len(failed) == 1 and not failed[0].with_suffix(".o").exists()
    assert not list(tmp_path.rglob("*.so"))


def test_error_while_lowering_stops_background_compiles(tmp_path, monkeypatch):
    monkeypatch.setattr(cbuild, "OVERLAP_UNIT_CHARS", 1)
    pieces = _pieces()
    with pytest.raises(RuntimeError, match="lowering failed"):
        with cbuild.OverlappedLink(cbuild.compile_options_for("llvm"), cache_dir=tmp_path, jobs=2) as overlap:
            for p in pieces:
                overlap.add_kernel(p)
            raise RuntimeError("lowering failed")
    assert not _cc_threads()
    assert not list(tmp_path.rglob("*.tmp"))


def _conv_model():
    w1 = (rng.standard_normal((16, 8, 3, 3)) / 8).astype("float32")
    w2 = (rng.standard_normal((16, 16, 3, 3)) / 12).astype("float32")
    x = G.Var("x", G.TensorStructInfo((1, 8, 12, 12), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(G.op.relu(bb.emit(G.op.conv2d(x, G.const(w1), padding=1))))
            h = bb.emit(G.op.relu(bb.emit(G.op.conv2d(h, G.const(w2), padding=1))))
            gv = bb.emit_output(G.op.sigmoid(bb.emit(G.op.add(h, h))))
        bb.emit_func_output(gv)
    return bb.get(), w1, w2


def test_graph_build_with_overlap_equals_serial_build(tmp_path, monkeypatch):
    mod, w1, w2 = _conv_model()
    x = rng.standard_normal((1, 8, 12, 12)).astype("float32")
    h = np.maximum(conv2d_nchw(np.maximum(conv2d_nchw(x, w1, padding=(1, 1, 1, 1)), 0), w2, padding=(1, 1, 1, 1)), 0)
    ref = 1 / (1 + np.exp(-2 * h))
    monkeypatch.setenv("INGOT_CACHE_DIR", str(tmp_path / "serial"))
    monkeypatch.setattr(cbuild, "compile_jobs", lambda: 1)
    ex_serial = G.build(mod, "llvm -num-cores=2")
    monkeypatch.setenv("INGOT_CACHE_DIR", str(tmp_path / "overlap"))
    monkeypatch.setattr(cbuild, "compile_jobs", lambda: 2)
    monkeypatch.setattr(cbuild, "OVERLAP_UNIT_CHARS", 1)
    monkeypatch.setattr(cbuild, "OVERLAP_AOT_MIN_WEIGHT", 0)  # the AOT entries their own unit, compiled first
    ahead = []
    real = cbuild.compile_object
    monkeypatch.setattr(cbuild, "compile_object",
                        lambda src, *a, **k: ahead.append(threading.current_thread().name) or real(src, *a, **k))
    ex_overlap = G.build(mod, "llvm -num-cores=2")
    assert len(ahead) >= 3 and all(n.startswith("ingot-cc") for n in ahead)
    assert ex_overlap.lib.get_source() == ex_serial.lib.get_source()
    assert _exports(ex_overlap.lib.lib_path) == _exports(ex_serial.lib.lib_path)
    for ex in (ex_serial, ex_overlap):
        np.testing.assert_allclose(G.Executor(ex)["main"](x).numpy(), ref, rtol=1e-4, atol=1e-5)
    assert not _cc_threads()
