"""Build pipeline, AOT entry, static memory planning, schedule hook and exported artifacts."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest


import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402
from ingot.graph.plan import place_buffers  # noqa: E402
from ingot.ir import Var as PVar  # noqa: E402

# The benchmark's 784-128-10 MLP graph (ingot.testing.mlp), one definition for both.
from ingot.testing.mlp import mlp_module as shared_mlp_module, mlp_params, mlp_reference  # noqa: E402

rng = np.random.default_rng(1)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


PARAMS = mlp_params(seed=1, scale=0.1)


def mlp_module(n=1, bind=True):
    return shared_mlp_module(n, PARAMS if bind else None)


def mlp_ref(data):
    return mlp_reference(data, PARAMS)


@pytest.fixture(scope="module")
def mlp_ex():
    return G.build(mlp_module(), "llvm -num-cores=2")


def test_place_buffers_reuses_memory_when_lifetimes_do_not_overlap():
    offsets, peak = place_buffers([1000, 1000, 1000, 500], [(0, 1), (1, 2), (2, 3), (3, 4)])
    # 0 and 2 may share, 1 and 3 may share; neighbours never do.
    assert offsets[0] == offsets[2] and offsets[1] == offsets[3] and offsets[0] != offsets[1]
    assert peak == 2048
    assert place_buffers([], []) == ([], 0)


def test_mlp_runs_as_one_aot_call_and_matches_numpy(mlp_ex):
    assert mlp_ex.aot == {"main": "graph.main"}
    assert set(mlp_ex.schedule_report.values()) <= {"default", "fallback"}
    assert "ingot_graph_main" in mlp_ex.lib.get_source()
    data = rng.standard_normal((1, 784)).astype("float32")
    for use_aot in (True, False):
        out = G.Executor(mlp_ex, ingot.cpu(), use_aot=use_aot)["main"](data)
        np.testing.assert_allclose(out.numpy(), mlp_ref(data), rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception, match="x"):
        G.Executor(mlp_ex)["main"](np.zeros((2, 784), "float32"))
    # The weights live in the blob, not in the C source.
    assert mlp_ex.weights.nbytes >= sum(a.nbytes for a in PARAMS.values())
    assert str(float(PARAMS["w0"][0, 0]))[:6] not in mlp_ex.lib.get_source()


def test_static_memory_plan_reuses_intermediates():
    x = G.Var("x", T((64, 64)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            v = x
            for _ in range(4):  # softmax is opaque: every result is a separate kernel output
                v = bb.emit(G.op.softmax(v))
            gv = bb.emit_output(G.op.add(v, x))
        bb.emit_func_output(gv)
    ex = G.build(bb.get(), "llvm")
    stats = ex.stats()["main"]
    assert stats["aot"] and stats["steps"] == 5
    # Four 16 KiB intermediates, at most two alive at once.
    assert stats["naive_bytes"] == 4 * 64 * 64 * 4 and stats["workspace_bytes"] == 2 * 64 * 64 * 4
    data = rng.standard_normal((64, 64)).astype("float32")
    ref = data
    for _ in range(4):
        e = np.exp(ref - ref.max(-1, keepdims=True))
        ref = e / e.sum(-1, keepdims=True)
    for use_aot in (True, False):
        got = G.Executor(ex, use_aot=use_aot)["main"](data).numpy()
        np.testing.assert_allclose(got, ref + data, rtol=1e-5, atol=1e-6)


def test_symbolic_batch_falls_back_to_the_plan_interpreter():
    ex = G.build(mlp_module(PVar("n", "int64")), "llvm")
    assert ex.aot == {} and ex.plans["main"]["memory"] is None
    vm = G.Executor(ex)
    for batch in (1, 3):
        data = rng.standard_normal((batch, 784)).astype("float32")
        np.testing.assert_allclose(vm["main"](data).numpy(), mlp_ref(data), rtol=1e-4, atol=1e-4)


def test_tuple_outputs_inputs_and_constants_are_copied_out():
    x = G.Var("x", T((4,)))
    c = G.const(np.arange(4, dtype="float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            e = bb.emit(G.op.exp(x))
            gv = bb.emit_output(G.Tuple([e, x, c, e]))
        bb.emit_func_output(gv)
    ex = G.build(bb.get(), "llvm")
    assert "main" in ex.aot
    data = rng.standard_normal(4).astype("float32")
    for use_aot in (True, False):
        out = G.Executor(ex, use_aot=use_aot)["main"](data)
        assert isinstance(out, tuple) and len(out) == 4
        for got, want in zip(out, [np.exp(data), data, np.arange(4), np.exp(data)]):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_apply_schedule_hook_and_report():
    seen = []

    def apply_schedule(func):
        seen.append(func.attrs["global_symbol"])
        if func.attrs["global_symbol"] == "fused_linear_relu":
            from ingot.graph.schedule_hook import fallback_schedule

            return fallback_schedule(func)
        return None

    ex = G.build(mlp_module(), "llvm", apply_schedule=apply_schedule)
    assert ex.schedule_report["fused_linear_relu"] == "tuned"
    assert ex.schedule_report["linear"] in ("default", "fallback")
    assert sorted(seen) == ["fused_linear_relu", "linear"]
    data = rng.standard_normal((1, 784)).astype("float32")
    np.testing.assert_allclose(G.Executor(ex)["main"](data).numpy(), mlp_ref(data), rtol=1e-4, atol=1e-4)


def test_fallback_schedule_parallelizes_and_inlines():
    from ingot import te
    from ingot.graph.schedule_hook import fallback_schedule

    A = te.placeholder((128, 256), name="A")
    B = te.compute((128, 256), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((128, 256), lambda i, j: B[i, j] * 2.0, name="C")
    text = str(fallback_schedule(te.create_prim_func([A, C])))
    assert "T.parallel(128)" in text and "T.vectorized(256)" in text and 'T.block("B")' not in text


def test_export_and_load_in_a_fresh_process(mlp_ex, tmp_path):
    path = mlp_ex.export_library(str(tmp_path / "model.so"))
    manifest = json.loads((tmp_path / "model.json").read_text())
    assert manifest["loader"] == "ingot.graph.load_executable" and manifest["aot"] == {"main": "graph.main"}
    assert os.path.getsize(tmp_path / "model.weights.bin") == manifest["weights_bytes"]
    data = rng.standard_normal((1, 784)).astype("float32")
    np.save(tmp_path / "data.npy", data)
    script = (
        "import sys, numpy as np, ingot\n"
        "from ingot.graph import load_executable, Executor\n"
        f"ex = load_executable({path!r})\n"
        f"x = np.load({str(tmp_path / 'data.npy')!r})\n"
        "out = Executor(ex, ingot.cpu())['main'](x).numpy()\n"
        "slow = Executor(ex, use_aot=False)['main'](x).numpy()\n"
        f"np.save({str(tmp_path / 'out.npy')!r}, np.stack([out, slow]))\n"
        "print(sorted(ingot.runtime.Module(sys.argv[1]).function_names))\n"
    )
    res = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert res.returncode == 0, res.stderr
    assert "graph.main" in res.stdout
    out = np.load(tmp_path / "out.npy")
    np.testing.assert_allclose(out[0], mlp_ref(data), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out[1], mlp_ref(data), rtol=1e-4, atol=1e-4)
    # A corrupted weights file is refused with a clear message.
    (tmp_path / "model.weights.bin").write_bytes(b"\0" * manifest["weights_bytes"])
    with pytest.raises(Exception, match="does not match the manifest"):
        G.load_executable(path)
    assert ingot.get_global_func("ingot.graph.load") is not None


def test_aot_runner_outlives_its_executor(mlp_ex):
    import gc

    run = G.Executor(mlp_ex)["main"]  # the Executor is dropped at once
    gc.collect()
    junk = [np.ones(4096, "float32") for _ in range(64)]  # reuse freed memory if it were freed
    data = rng.standard_normal((1, 784)).astype("float32")
    for _ in range(3):
        np.testing.assert_allclose(run(data).numpy(), mlp_ref(data), rtol=1e-4, atol=1e-4)
    del junk


def test_aot_fast_path_new_inputs_fresh_outputs_and_errors_after_fast_calls(mlp_ex):
    run = G.Executor(mlp_ex)["main"]
    results = []
    for _ in range(30):  # more calls than one output slab holds
        data = rng.standard_normal((1, 784)).astype("float32")
        results.append((data, run(data)))
    for data, out in results:  # earlier results are never overwritten by later calls
        np.testing.assert_allclose(out.numpy(), mlp_ref(data), rtol=1e-4, atol=1e-4)
        assert out.dtype == "float32" and out.shape == (1, 10)
    with pytest.raises(Exception, match="'x' expects dtype float32, got float64"):
        run(np.zeros((1, 784)))
    with pytest.raises(Exception, match="'x' dimension 1 expects 784, got 783"):
        run(np.zeros((1, 783), "float32"))
    with pytest.raises(Exception, match="expects 4 arguments, got 5"):
        run(data, data)
    nd = ingot.runtime.array(data)  # NDArray and read-only inputs work as well
    np.testing.assert_allclose(run(nd).numpy(), mlp_ref(data), rtol=1e-4, atol=1e-4)
    data.flags.writeable = False
    np.testing.assert_allclose(run(data).numpy(), mlp_ref(data), rtol=1e-4, atol=1e-4)
