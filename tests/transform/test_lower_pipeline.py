"""ingot.lower: the whole pipeline on matmul, a non-divisible split, a register tile; phase hooks."""
import numpy as np
import pytest

from ingot.driver.lower import get_lowering_pipeline, lower
from ingot.ir import IRModule, post_order_visit
from ingot.ir.expr import Ramp
from ingot.ir.transform import PassConfigError, PassContext, PassTimingInstrument
from ingot.tir import Allocate, Block, BlockRealize, BufferStore, ForKind, IfThenElse
from ingot.tir.transform import prim_func_pass

from ir_builders import matmul, split_add_one, tiled_matmul_local
from tir_interp import run_prim_func


def _nodes(func, cls):
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, cls) else None)
    return found


def _check_lowered_form(func):
    assert not _nodes(func, (Block, BlockRealize))
    for store in _nodes(func, BufferStore):
        assert store.buffer.ndim == 1


def _run_matmul(func, M=16, N=16, K=16):
    rng = np.random.default_rng(0)
    A = rng.random((M, K), dtype=np.float32)
    B = rng.random((K, N), dtype=np.float32)
    C = np.full((M, N), np.nan, dtype=np.float32)
    run_prim_func(func, A, B, C)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5)


def test_lower_matmul_numerics_and_form():
    mod = lower(matmul())
    func = mod["main"]
    _check_lowered_form(func)
    assert func.attrs["global_symbol"] == "main" and func.attrs["tir.noalias"] is True
    assert [b.ndim for b in func.buffer_params] == [2, 2, 2]
    _run_matmul(func)


def test_lower_non_divisible_split():
    f, _ = split_add_one()
    func = lower(f)["main"]
    _check_lowered_form(func)
    assert len(_nodes(func, IfThenElse)) == 1
    A = np.arange(100, dtype=np.float32)
    B = np.zeros(100, dtype=np.float32)
    run_prim_func(func, A, B)
    np.testing.assert_array_equal(B, A + 1)


def test_lower_register_tile_is_small_and_vectorized():
    func = lower(tiled_matmul_local())["main"]
    _check_lowered_form(func)
    (alloc,) = _nodes(func, Allocate)
    assert [d.value for d in alloc.buffer.shape] == [32] and alloc.buffer.scope == "local"
    # the write-back loop (vectorized over 8) became a vector store
    vector_stores = [s for s in _nodes(func, BufferStore) if isinstance(s.indices[0], Ramp)]
    assert len(vector_stores) == 1 and vector_stores[0].indices[0].lanes == 8
    assert func.body.kind == ForKind.PARALLEL
    _run_matmul(func)


def test_lower_accepts_te_and_module():
    from ingot import te
    A = te.placeholder((8, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    for inp in (lower([A, B], name="rowsum"), lower(IRModule({"rowsum": te.create_prim_func([A, B])}))):
        func = inp["rowsum"]
        a = np.random.default_rng(1).random((8, 8), dtype=np.float32)
        b = np.zeros(8, dtype=np.float32)
        run_prim_func(func, a, b)
        np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("phase", [0, 1, 2, 3])
def test_user_pass_hook_at_each_phase(phase):
    seen = {}

    def record(func, mod, ctx):
        seen["blocks"] = bool(_nodes(func, (Block, BlockRealize)))
        seen["ndim"] = {s.buffer.ndim for s in _nodes(func, BufferStore)}
        seen["init"] = any(b.init is not None for b in _nodes(func, Block))
        return func.with_attr("hooked", phase)

    hook = prim_func_pass(record, name="Record")
    with PassContext(config={"tir.add_lower_pass": [(phase, hook)]}):
        names = [p.name for p in get_lowering_pipeline().passes]
        func = lower(matmul(4, 4, 4))["main"]
    assert func.attrs["hooked"] == phase
    expected_position = {0: 0, 1: 4, 2: 7, 3: len(names) - 1}[phase]
    assert names[expected_position] == "Record"
    assert seen["blocks"] == (phase == 0) and seen["init"] == (phase == 0)
    assert seen["ndim"] == ({2} if phase <= 1 else {1})


def test_add_lower_pass_validation():
    hook = prim_func_pass(lambda f, m, c: f, name="H")
    with PassContext(config={"tir.add_lower_pass": [(5, hook)]}):
        with pytest.raises(PassConfigError, match="phase must be 0, 1, 2 or 3"):
            lower(matmul(2, 2, 2))
    with PassContext(config={"tir.add_lower_pass": [(1, lambda f: f)]}):
        with pytest.raises(PassConfigError, match="not a Pass"):
            lower(matmul(2, 2, 2))


def test_lower_under_instruments_and_disable_vectorize():
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing], config={"tir.disable_vectorize": True, "tir.noalias": False}):
        func = lower(tiled_matmul_local())["main"]
    assert "tir.noalias" not in func.attrs
    assert not [s for s in _nodes(func, BufferStore) if isinstance(s.indices[0], Ramp)]
    table = timing.render()
    assert "tir.lower" in table and "FlattenBuffer" in table and "VectorizeLoop" in table


def test_lower_rejects_other_inputs():
    with pytest.raises(TypeError, match="IRModule, a PrimFunc"):
        lower(42)


def test_lower_symbolic_shape_intermediate():
    from ingot import te
    from ingot import tir

    n = tir.SizeVar("n")
    A = te.placeholder((n, 8), name="A")
    B = te.compute((n, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, 8), lambda i, j: B[i, j] + 1.0, name="C")
    func = lower(te.create_prim_func([A, C]))["main"]
    (alloc,) = _nodes(func, Allocate)
    assert as_const(alloc.buffer.shape[0]) is None  # stays n * 8, not a type-range bound
    a = np.random.default_rng(2).random((5, 8), dtype=np.float32)
    c = np.zeros((5, 8), dtype=np.float32)
    run_prim_func(func, a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def as_const(e):
    from ingot.ir import as_const_int

    return as_const_int(e)
