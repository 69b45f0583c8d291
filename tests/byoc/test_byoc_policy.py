"""The cost policy (`ingot.byoc.policy.keep_faster`): a region slower than Ingot's kernels goes back
into its caller; numbers are unchanged either way. The timing is injected (tests never time)."""
import numpy as np

import ingot.byoc
from ingot import graph as G
from ingot.byoc.policy import keep_faster


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


def model():
    rng = np.random.default_rng(0)
    x = G.Var("x", T((4, 16)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(G.op.linear(x, G.const(rng.standard_normal((16, 16)).astype("float32"))))
            r = bb.emit(G.op.relu(a))
            e = bb.emit(G.op.exp(a))                        # dense's value is used natively too
            s = bb.emit(G.op.sigmoid(bb.emit(G.op.add(r, e))))
            out = bb.emit_output(G.op.matmul(s, G.const(rng.standard_normal((16, 8)).astype("float32"))))
        bb.emit_func_output(out)
    return bb.get()


def test_slower_regions_go_back_and_results_do_not_change():
    mod = model()
    part = ingot.byoc.partition(mod, ["cblas"])
    assert sorted(n for n in part.function_names if n != "main") == ["cblas_main_0", "cblas_main_1", "cblas_main_2"]
    # cblas_main_0 (dense + relu, two outputs) and cblas_main_2 (matmul) measure slower; cblas_main_1 faster
    times = iter([(1.0, 2.0), (2.0, 1.0), (1.0, 2.0)])
    kept_mod, decisions = keep_faster(part, measure=lambda a, b, args: next(times))
    assert {n: d["kept"] for n, d in decisions.items()} == {"cblas_main_0": False, "cblas_main_1": True,
                                                            "cblas_main_2": False}
    assert sorted(kept_mod.function_names) == ["cblas_main_1", "main"]
    data = np.random.default_rng(1).standard_normal((4, 16)).astype("float32")
    ex = G.build(kept_mod, "llvm")
    assert list(ex.external) == ["cblas_main_1"]
    ref = G.Executor(G.build(mod, "llvm"))["main"](data).numpy()
    np.testing.assert_allclose(G.Executor(ex)["main"](data).numpy(), ref, rtol=1e-4, atol=1e-5)


def test_real_measurement_runs():
    _, decisions = keep_faster(ingot.byoc.partition(model(), ["cblas"]), rounds=2)
    assert all(d["native_s"] > 0 and d["external_s"] > 0 for d in decisions.values())


def test_partition_with_the_cost_policy():
    import pytest

    mod = ingot.byoc.partition(model(), ["cblas"], policy="cost")
    assert "main" in mod.function_names  # whatever measured faster stays external
    with pytest.raises(ValueError, match="policy='fast'"):
        ingot.byoc.partition(model(), ["cblas"], policy="fast")
