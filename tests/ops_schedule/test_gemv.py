"""Batch-1 dense (``linear``: weight [N, K]) gets the GEMV rule: row dot products vectorized over K."""
import numpy as np
import pytest

import ingot
from ingot import te
from ingot.ops import linalg, nn
from ingot.ops.schedule.default import schedule_blocks
from ingot.target import Target
from ingot.tir import Schedule

pytestmark = pytest.mark.compiler


def _schedule(tensors, out):
    log = []
    sch = schedule_blocks(Schedule(te.create_prim_func(tensors)), Target("llvm -num-cores=2"), log=log)
    rule = {name: r for name, r, _ in log}[out.op.name]
    return sch.mod["main"], rule


# 1000 / 40: groups of 4 rows; 6: groups of 2; 37 (prime): one row at a time (row_reduction_rule)
@pytest.mark.parametrize("m,k,n", [(1, 512, 1000), (3, 256, 40), (2, 64, 6), (1, 128, 37)])
def test_dense_small_batch_uses_gemv_rule_and_matches_numpy(m, k, n):
    X = te.placeholder((m, k), "float32", name="X")
    W = te.placeholder((n, k), "float32", name="W")
    Y = nn.dense(X, W)
    func, rule = _schedule([X, W, Y], Y)
    assert rule == "gemv_rule"
    lib = ingot.build(func, target="llvm -num-cores=2")
    src = lib.get_source()
    # W is read as whole vectors along its contiguous K axis (no per-lane gather)
    assert "(W + (" in src and "_u*)(W + " in src
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype("float32")
    w = rng.standard_normal((n, k)).astype("float32")
    y = np.zeros((m, n), "float32")
    lib["main"](x, w, y)
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-4)


def test_matmul_batch1_keeps_gemm_rule():
    # B[k, j] is contiguous along the output axis: the register-tiled rule stays the right one.
    X = te.placeholder((1, 256), "float32", name="X")
    B = te.placeholder((256, 64), "float32", name="B")
    Y = linalg.matmul(X, B)
    _, rule = _schedule([X, B, Y], Y)
    assert rule == "gemm_rule"


def test_policy_without_row_groups_computes_one_row_at_a_time():
    # GemvPolicy (pass config): row_groups=() drops the 4-row groups (another schedule), same numbers.
    from ingot.ir import structural_hash
    from ingot.ir.transform import PassContext
    from ingot.ops.schedule.reduction import GEMV_POLICY_CONFIG, GemvPolicy

    X = te.placeholder((1, 256), "float32", name="X")
    W = te.placeholder((40, 256), "float32", name="W")
    Y = nn.dense(X, W)
    grouped, _ = _schedule([X, W, Y], Y)
    with PassContext(config={GEMV_POLICY_CONFIG: GemvPolicy(row_groups=())}):
        single, rule = _schedule([X, W, Y], Y)
    assert rule == "gemv_rule" and structural_hash(single) != structural_hash(grouped)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 256)).astype("float32"), rng.standard_normal((40, 256)).astype("float32")
    for func in (grouped, single):
        y = np.zeros((1, 40), "float32")
        ingot.build(func, target="llvm -num-cores=2")["main"](x, w, y)
        np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-4)


def test_policy_without_row_layout_keeps_the_matmul_for_gemm_rule():
    # GemvPolicy.row_layout=False: PackWeights leaves a batch-1 matmul whose N fits no panel as it
    # is (how benchmarks/gemv.py builds its "matmul (gemm_rule)" variant), compiled right.
    from ingot import graph as G
    from ingot.graph.transform import PackWeights
    from ingot.ir.transform import PassContext
    from ingot.ops.schedule.reduction import GEMV_POLICY_CONFIG, GemvPolicy
    from ingot.testing.mlp import matmul_add_module

    K, N = 64, 40  # N: no 32- or 16-float panel
    rng = np.random.default_rng(2)
    wm, b, xs = (rng.standard_normal(s).astype("float32") for s in ((K, N), (N,), (1, K)))
    mod = matmul_add_module(wm, b)

    def ops(m):
        return [bd.value.op.name for blk in m["main"].body.blocks for bd in blk.bindings]

    assert "linear" in ops(PackWeights(32, 16)(mod))
    policy = {GEMV_POLICY_CONFIG: GemvPolicy(row_layout=False)}
    with PassContext(config=policy):
        assert ops(PackWeights(32, 16)(mod)) == ops(mod)
        ex = G.build(mod, "llvm -num-cores=2")
    out = G.Executor(ex)["main"](xs)
    np.testing.assert_allclose(out.numpy(), xs @ wm + b, rtol=1e-4, atol=1e-4)
