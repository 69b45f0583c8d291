"""A second backend beside cblas, written from docs/byoc.md (`_numpy_backend`): Python regions
(no C entry) and BLAS regions in one model, exported and loaded in a fresh process."""
import os
import subprocess
import sys

import numpy as np

import ingot.byoc
from ingot import graph as G

sys.path.insert(0, os.path.dirname(__file__))
import _numpy_backend  # noqa: E402,F401 - registers the "npref" backend


def test_two_backends_in_one_model_and_a_fresh_process(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 16)).astype("float32")
    x = G.Var("x", G.TensorStructInfo((4, 16), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(G.op.exp(bb.emit(G.op.sigmoid(x))))
            out = bb.emit_output(G.op.relu(bb.emit(G.op.linear(h, G.const(w)))))
        bb.emit_func_output(out)
    mod = ingot.byoc.partition(bb.get(), ["cblas", "npref"])
    compilers = sorted(str(f.attrs["Compiler"]) for f in mod.functions.values()
                       if isinstance(f, G.Function) and f.attrs.get("Compiler"))
    assert compilers == ["cblas", "npref"]
    ex = G.build(mod, "llvm")
    assert "main" not in ex.aot  # the numpy regions have no C entry: the interpreter runs the plan
    data = rng.standard_normal((4, 16)).astype("float32")
    expect = np.maximum(np.exp(1 / (1 + np.exp(-data))) @ w.T, 0)
    got = G.Executor(ex)["main"](data).numpy()
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-4)

    path = ex.export_library(str(tmp_path / "m.so"))
    np.save(tmp_path / "in.npy", data)
    code = ("import sys, numpy as np; from ingot import graph as G; ex = G.load_executable(sys.argv[1]); "
            "np.save(sys.argv[3], G.Executor(ex)['main'](np.load(sys.argv[2])).numpy())")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", code, path, str(tmp_path / "in.npy"), str(tmp_path / "out.npy")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), got)
