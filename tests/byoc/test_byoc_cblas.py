"""The cblas backend end to end: partitioned modules built and run against numpy, export → load in
a fresh process, errors of a missing backend. Needs a C compiler and a BLAS (numpy's bundled one)."""
import json
import subprocess
import sys

import numpy as np
import pytest

import ingot
import ingot.byoc
from ingot import graph as G
from ingot.byoc import cblas
from ingot.ir.error import IRError

rng = np.random.default_rng(0)


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


def run_both(mod, *args):
    """(partitioned result, native result) of ``mod``'s main."""
    part = ingot.byoc.partition(mod, ["cblas"])
    assert any(isinstance(f, G.Function) and f.attrs.get("Compiler") for f in part.functions.values())
    ex = G.build(part, "llvm")
    assert ex.external
    out = G.Executor(ex)["main"](*args)
    ref = G.Executor(G.build(mod, "llvm"))["main"](*args)
    unwrap = lambda o: tuple(x.numpy() for x in o) if isinstance(o, tuple) else o.numpy()  # noqa: E731
    return unwrap(out), unwrap(ref), ex


def test_dense_bias_relu_chain_vs_numpy():
    x = G.Var("x", T((5, 16)))
    w1, b1, w2 = rand(32, 16), rand(32), rand(8, 32)
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(G.op.relu(bb.emit(G.op.add(bb.emit(G.op.linear(x, G.const(w1))), G.const(b1)))))
            out = bb.emit_output(G.op.linear(h, G.const(w2)))
        bb.emit_func_output(out)
    data = rand(5, 16)
    out, ref, ex = run_both(bb.get(), data)
    expect = np.maximum(data @ w1.T + b1, 0) @ w2.T
    np.testing.assert_allclose(out, expect, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert list(ex.external) == ["cblas_main_0"]
    assert ex.plans["main"]["steps"][0]["op"] == "call_dps_packed"
    # dense + bias accumulate in one buffer, relu updates it in place: one temporary for the region
    assert ex.external["cblas_main_0"].source.count("aligned_alloc") == 1


def test_static_model_calls_regions_from_the_aot_entry():
    mod = _mlp()
    ex = G.build(ingot.byoc.partition(mod, ["cblas"]), "llvm")
    assert "main" in ex.aot  # one C call: kernels and BLAS regions, no Python between them
    assert [s.get("extern") for s in ex.plans["main"]["steps"] if s["op"] == "call_dps_packed"] == [0, 1]
    data = rand(3, 16)
    aot = G.Executor(ex)["main"](data).numpy()
    interpreted = G.Executor(ex, use_aot=False)["main"](data).numpy()
    np.testing.assert_array_equal(aot, interpreted)
    native = G.Executor(G.build(mod, "llvm"))["main"](data).numpy()
    np.testing.assert_allclose(aot, native, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sa,sb", [((6, 16), (16, 12)), ((1, 16), (16, 12)), ((2, 3, 6, 16), (16, 12)), ((4, 6, 16), (4, 16, 12))])
def test_matmul_and_batch_matmul_vs_numpy(sa, sb):
    a, b = G.Var("a", T(sa)), G.Var("b", T(sb))
    bb = G.BlockBuilder()
    with bb.function("main", [a, b]):
        bb.emit_func_output(bb.emit(G.op.matmul(a, b)))
    da, db = rand(*sa), rand(*sb)
    out, _, _ = run_both(bb.get(), da, db)
    np.testing.assert_allclose(out, da @ db, rtol=1e-4, atol=1e-4)


def test_linear_with_bias_argument_3d_input_and_scalar_add():
    x, w, b = G.Var("x", T((2, 3, 16))), G.Var("w", T((8, 16))), G.Var("b", T((8,)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w, b]):
        y = bb.emit(G.op.linear(x, w, b))
        bb.emit_func_output(bb.emit(G.op.add(y, G.const(np.array(0.5, "float32")))))
    dx, dw, db = rand(2, 3, 16), rand(8, 16), rand(8)
    out, _, _ = run_both(bb.get(), dx, dw, db)
    np.testing.assert_allclose(out, dx @ dw.T + db + 0.5, rtol=1e-4, atol=1e-4)


def test_single_row_dense_takes_the_gemv_path():
    x, w = G.Var("x", T((1, 24))), G.Var("w", T((10, 24)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w]):
        bb.emit_func_output(bb.emit(G.op.linear(x, w, G.const(rand(10)))))
    mod = bb.get()
    dx, dw = rand(1, 24), rand(10, 24)
    out, ref, _ = run_both(mod, dx, dw)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_diamond_and_several_outputs_vs_numpy():
    x, w = G.Var("x", T((4, 16))), G.Var("w", T((16, 16)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(G.op.linear(x, w))
            r = bb.emit(G.op.relu(a))
            c = bb.emit(G.op.exp(a))
            d = bb.emit_output(G.op.add(r, c))
        bb.emit_func_output(G.Tuple([d, r]))
    dx, dw = rand(4, 16), rand(16, 16) * 0.1
    (d_out, r_out), _, ex = run_both(bb.get(), dx, dw)
    a_ref = dx @ dw.T
    np.testing.assert_allclose(r_out, np.maximum(a_ref, 0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(d_out, np.maximum(a_ref, 0) + np.exp(a_ref), rtol=1e-4, atol=1e-5)
    assert sorted(ex.external) == ["cblas_main_0", "cblas_main_1"]


def _mlp():
    x = G.Var("x", T((3, 16)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(G.op.relu(bb.emit(G.op.linear(x, G.const(rand(32, 16)), G.const(rand(32))))))
            s = bb.emit(G.op.sigmoid(h))
            out = bb.emit_output(G.op.linear(s, G.const(rand(4, 32))))
        bb.emit_func_output(out)
    return bb.get()


def test_export_load_in_a_fresh_process(tmp_path):
    mod = _mlp()
    ex = G.build(ingot.byoc.partition(mod, ["cblas"]), "llvm")
    data = rand(3, 16)
    expect = G.Executor(ex)["main"](data).numpy()
    path = ex.export_library(str(tmp_path / "m.so"))
    np.save(tmp_path / "in.npy", data)
    code = ("import sys, numpy as np; from ingot import graph as G; "
            "ex = G.load_executable(sys.argv[1]); "
            "np.save(sys.argv[3], G.Executor(ex)['main'](np.load(sys.argv[2])).numpy()); "
            "print(sorted(ex.external))")
    res = subprocess.run([sys.executable, "-c", code, path, str(tmp_path / "in.npy"), str(tmp_path / "out.npy")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "cblas_main_0" in res.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expect)
    # the weights are stored once: in the blob, not in the external module
    manifest = json.loads(open(tmp_path / "m.json").read())
    assert manifest["weights_bytes"] >= (32 * 16 + 32 + 4 * 32) * 4
    assert all(len(e["data"]) < 200_000 for e in manifest["external"].values())


def test_fully_offloaded_module_exports_without_a_kernel_library(tmp_path):
    x = G.Var("x", T((2, 8)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(G.op.linear(x, G.const(rand(4, 8)))))
    ex = G.build(ingot.byoc.partition(bb.get(), "cblas"), "llvm", aot=False)
    data = rand(2, 8)
    expect = G.Executor(ex)["main"](data).numpy()
    path = ex.export_library(str(tmp_path / "m.so"))
    again = G.load_executable(path)
    assert again.lib is None
    np.testing.assert_array_equal(G.Executor(again)["main"](data).numpy(), expect)


def test_loading_an_artifact_whose_backend_is_missing_names_it(tmp_path):
    x = G.Var("x", T((2, 8)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(G.op.linear(x, G.const(rand(4, 8)))))
    path = G.build(ingot.byoc.partition(bb.get(), "cblas"), "llvm").export_library(str(tmp_path / "m.so"))
    manifest = json.loads(open(tmp_path / "m.json").read())
    manifest["external"]["cblas_main_0"]["loader"] = "ingot_npu_plugin.runtime:NpuModule"
    open(tmp_path / "m.json", "w").write(json.dumps(manifest))
    with pytest.raises(IRError, match="ingot_npu_plugin.runtime:NpuModule.*install"):
        G.load_executable(path)


def test_missing_blas_error_names_the_package(monkeypatch):
    monkeypatch.setattr(cblas, "_FOUND", [None])
    with pytest.raises(IRError, match="scipy-openblas32"):
        cblas.find_blas()


def test_runtime_module_checks_its_arguments():
    m = cblas.CblasModule("f", cblas.region_source_example(), 2, 1)
    with pytest.raises(IRError, match="argument 0 must be a C-contiguous float32"):
        m.run(np.ones((2, 8), "float64"), np.ones((4, 8), "float32"), np.empty((2, 4), "float32"))
    with pytest.raises(IRError, match="takes 2 inputs and 1 outputs"):
        m.run(np.ones((2, 8), "float32"))


def test_region_reading_a_native_value_computed_between_vs_numpy():
    x, w = G.Var("x", T((4, 16))), G.Var("w", T((16, 16)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(G.op.linear(x, w))
            c = bb.emit(G.op.exp(x))
            d = bb.emit_output(G.op.add(a, c))
        bb.emit_func_output(d)
    dx, dw = rand(4, 16), rand(16, 16)
    out, _, _ = run_both(bb.get(), dx, dw)
    np.testing.assert_allclose(out, dx @ dw.T + np.exp(dx), rtol=1e-4, atol=1e-4)


def test_regions_that_would_wait_for_each_other_vs_numpy(two_regions_graph):
    dx, dw = rand(4, 16), rand(16, 16) * 0.3
    out, _, _ = run_both(two_regions_graph, dx, dw)
    a1 = dx @ dw.T
    b2 = dx @ dw.T
    b3 = (1 / (1 + np.exp(-a1))) @ dw.T + b2
    np.testing.assert_allclose(out, (a1 + b2) * b3, rtol=1e-4, atol=1e-4)


def test_bias_add_after_a_gemm_accumulates_in_the_output():
    x = G.Var("x", T((4, 16)))
    w, b = rand(16, 8), rand(8)
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(G.op.add(bb.emit(G.op.matmul(x, G.const(w))), G.const(b))))
    data = rand(4, 16)
    out, _, ex = run_both(bb.get(), data)
    np.testing.assert_allclose(out, data @ w + b, rtol=1e-4, atol=1e-4)
    source = ex.external["cblas_main_0"].source
    assert "aligned_alloc" not in source and "1.0f, out0, 8);" in source  # no temporary, beta = 1


def test_region_of_a_function_whose_name_is_not_a_c_identifier():
    x = G.Var("x", T((2, 8)))
    w = rand(4, 8)
    bb = G.BlockBuilder()
    with bb.function("my-net.v2", [x]):
        bb.emit_func_output(bb.emit(G.op.linear(x, G.const(w))))
    mod = ingot.byoc.partition(bb.get(), "cblas")
    assert "cblas_my-net.v2_0" in mod.function_names
    ex = G.build(mod, "llvm")
    data = rand(2, 8)
    np.testing.assert_allclose(G.Executor(ex)["my-net.v2"](data).numpy(), data @ w.T, rtol=1e-4, atol=1e-4)


def test_a_gpu_target_with_external_regions_is_refused():
    x = G.Var("x", T((2, 8)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(G.op.linear(x, G.const(rand(4, 8)))))
    with pytest.raises(IRError, match="run on the host CPU"):
        G.build(ingot.byoc.partition(bb.get(), "cblas"), "cuda")
