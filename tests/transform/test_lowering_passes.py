"""Before/after IR (structural equality) for each TensorIR lowering pass."""
import numpy as np
import pytest

from ingot.ir import IRModule, Var, assert_structural_equal, decl_buffer
from ingot.ir.expr import Broadcast, IntImm, IterVar, Ramp, Range, Select
from ingot.ir.transform import PassContext
from ingot.tir import (
    Allocate, Block, BlockRealize, BufferRegion, BufferStore, Evaluate, For, ForKind, IfThenElse, PrimFunc, SeqStmt,
)
from ingot.tir import transform as tt

from ir_builders import iv, matmul, root, split_add_one, tiled_matmul_local
from tir_interp import run_prim_func


def _apply(p, func):
    return p(IRModule({"main": func}))["main"]


def _serial(v, ext, body, kind=ForKind.SERIAL, **kw):
    return For(v, 0, ext, kind, body, **kw)


def test_lower_init_block():
    # The reduce loop k is innermost: the init is hoisted before it as its own block, so it
    # runs even when the reduce loop has zero trips.
    f = matmul(4, 4, 4)
    out = _apply(tt.LowerInitBlock(), f)
    loop_i = f.body.block.body
    loop_j = loop_i.body
    loop_k = loop_j.body
    realize = loop_k.body
    blk = realize.block
    spatial = [(x, v) for x, v in zip(blk.iter_vars, realize.iter_values) if x.kind != "R"]
    init = BlockRealize([v for _, v in spatial], realize.predicate,
                        Block([x for x, _ in spatial], [], blk.writes, "C_init", blk.init))
    nest = loop_i.replace(body=loop_j.replace(body=SeqStmt([
        init, loop_k.replace(body=realize.replace(block=blk.replace(init=None)))])))
    expected = f.with_body(f.body.replace(block=f.body.block.replace(body=nest)))
    assert_structural_equal(out, expected)


def test_lower_init_block_hoists_before_outer_reduce_loop():
    # k outside j (a column-reduction order): the init gets its own copy of the spatial loop j before
    # k, so it runs once per output element and also when k has zero trips (no `if vk == 0` guard).
    f = matmul(4, 4, 4)
    loop_i = f.body.block.body
    loop_j = loop_i.body
    loop_k = loop_j.body
    realize = loop_k.body
    swapped = loop_i.replace(body=loop_k.replace(body=loop_j.replace(body=realize)))
    f = f.with_body(f.body.replace(block=f.body.block.replace(body=swapped)))
    out = _apply(tt.LowerInitBlock(), f)
    blk = realize.block
    j_init = Var("j_init")
    spatial = [(x, v) for x, v in zip(blk.iter_vars, realize.iter_values) if x.kind != "R"]
    init = BlockRealize([loop_i.loop_var, j_init], realize.predicate,
                        Block([x for x, _ in spatial], [], blk.writes, "C_init", blk.init))
    expected = f.with_body(f.body.replace(block=f.body.block.replace(body=loop_i.replace(body=SeqStmt([
        loop_j.replace(loop_var=j_init, body=init),
        loop_k.replace(body=loop_j.replace(body=realize.replace(block=blk.replace(init=None))))])))))
    assert_structural_equal(out, expected)


def test_lower_init_block_guard_when_reduce_loop_is_thread_bound():
    # A copy of a thread-bound loop for the init would race with the reduction in other threads:
    # the `if vk == 0` guard fallback stays.
    f = matmul(4, 4, 4)
    loop_i = f.body.block.body
    loop_j = loop_i.body
    loop_k = loop_j.body.replace(kind=ForKind.THREAD_BINDING, thread_binding="threadIdx.x")
    realize = loop_k.body
    swapped = loop_i.replace(body=loop_k.replace(body=loop_j.replace(body=realize)))
    f = f.with_body(f.body.replace(block=f.body.block.replace(body=swapped)))
    out = _apply(tt.LowerInitBlock(), f)
    blk = realize.block
    vk = blk.iter_vars[2].var
    expected_block = blk.replace(init=None, body=SeqStmt([IfThenElse(vk == 0, blk.init), blk.body]))
    expected = f.with_body(f.body.replace(block=f.body.block.replace(body=loop_i.replace(
        body=loop_k.replace(body=loop_j.replace(body=realize.replace(block=expected_block)))))))
    assert_structural_equal(out, expected)


def test_reduction_over_runtime_empty_axis_gives_identity():
    import ingot
    from ingot import te

    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m, n), "float32", name="A")
    k = te.reduce_axis((0, n), name="k")
    S = te.compute((m,), lambda i: te.sum(A[i, k], axis=k), name="S")
    k2 = te.reduce_axis((0, n), name="k2")
    M = te.compute((m,), lambda i: te.max(A[i, k2], axis=k2), name="M")
    lib = ingot.build(te.create_prim_func([A, S, M]), target="llvm")
    for size in (0, 3):
        a = np.arange(5 * size, dtype="float32").reshape(5, size)
        s = ingot.nd.array(np.full(5, np.nan, "float32"))
        mx = ingot.nd.array(np.full(5, np.nan, "float32"))
        lib["main"](ingot.nd.array(a), s, mx)
        np.testing.assert_array_equal(s.numpy(), a.sum(axis=1))
        want_max = a.max(axis=1) if size else np.full(5, -np.inf, "float32")
        assert (mx.numpy() == want_max).all() or (size == 0 and (mx.numpy() <= -3.4e38).all())


def test_convert_blocks_to_loops_split_predicate():
    f, (A, B) = split_add_one()
    out = _apply(tt.ConvertBlocksToLoops(), f)
    i0, i1 = Var("i0"), Var("i1")
    idx = i0 * 16 + i1
    expected = f.with_body(_serial(i0, 7, _serial(i1, 16, IfThenElse(idx < 100, BufferStore(B, A[idx] + 1.0, [idx])))))
    assert_structural_equal(out, expected)


def test_convert_blocks_alloc_buffers_and_match_buffer():
    from ingot.ir import MatchBufferRegion

    A = decl_buffer((8, 8), "float32", "A")
    T_ = decl_buffer((8,), "float32", "T", scope="local")
    sub = decl_buffer((4,), "float32", "sub")
    i = Var("i")
    vi = iv("vi", 8)
    # sub is matched to A[vi, 4:8]; the block writes sub[0] and keeps a local allocation.
    blk = Block([vi], [], [BufferRegion(A, [A[0:1, 0:1].region[0], A[0:1, 0:1].region[1]])], "blk",
                BufferStore(sub, T_[0], [0]), alloc_buffers=[T_],
                match_buffers=[MatchBufferRegion(sub, A[vi.var, 4:8])])
    f = PrimFunc([A], root(_serial(i, 8, BlockRealize([i], True, blk))))
    out = _apply(tt.ConvertBlocksToLoops(), f)
    expected = f.with_body(_serial(i, 8, Allocate(T_, BufferStore(A, T_[0], [i, 4]))))
    assert_structural_equal(out, expected)


def test_flatten_buffer_keeps_params_and_shares_data():
    A = decl_buffer((4, 8), "float32", "A")
    S = decl_buffer((2, 3), "float32", "S", strides=(5, 1), elem_offset=7)
    L = decl_buffer((2, 2), "float32", "L", scope="local")
    i, j = Var("i"), Var("j")
    body = Allocate(L, _serial(i, 2, _serial(j, 2, BufferStore(L, A[i, j] + S[i, j], [i, j]))))
    out = _apply(tt.FlattenBuffer(), PrimFunc([A, S], body))
    assert out.params[0] is A and out.params[1] is S
    store = out.body.body.body.body
    Af, Sf, Lf = store.value.a.buffer, store.value.b.buffer, store.buffer
    assert Af.data is A.data and Sf.data is S.data and Lf.scope == "local"
    expected = Allocate(Lf, _serial(i, 2, _serial(j, 2, BufferStore(Lf, Af[i * 8 + j] + Sf[7 + (i * 5 + j)], [i * 2 + j]))))
    assert_structural_equal(out.body, expected)
    assert [d.value for d in Lf.shape] == [4] and [d.value for d in Af.shape] == [32]


def test_flatten_buffer_rejects_blocks():
    with pytest.raises(Exception, match="ConvertBlocksToLoops"):
        _apply(tt.FlattenBuffer(), matmul(2, 2, 2))


def test_simplify_indices_ifs_and_unit_loops():
    B = decl_buffer((4, 16), "float32", "B")
    i0, i1, u = Var("i0"), Var("i1"), Var("u")
    fused = i0 * 16 + i1
    body = _serial(i0, 4, _serial(i1, 16, _serial(u, 1, IfThenElse(
        i1 < 16, BufferStore(B, 0.0, [fused // 16 + u, fused % 16]), Evaluate(1)))))
    out = _apply(tt.Simplify(), PrimFunc([B], body))
    expected = _serial(i0, 4, _serial(i1, 16, BufferStore(B, 0.0, [i0, i1])))
    assert_structural_equal(out.body, expected)


def test_simplify_keeps_unprovable_if():
    f, _ = split_add_one()
    lowered = _apply(tt.ConvertBlocksToLoops(), f)
    assert_structural_equal(_apply(tt.Simplify(), lowered), lowered)


def test_compact_buffer_allocation_register_tile():
    f = _apply(tt.ConvertBlocksToLoops(), _apply(tt.LowerInitBlock(), tiled_matmul_local()))
    out = _apply(tt.CompactBufferAllocation(), f)
    i0_loop = out.body
    alloc = i0_loop.body.body  # for i0: for j0: Allocate
    assert isinstance(alloc, Allocate)
    assert [d.value for d in alloc.buffer.shape] == [4, 8] and alloc.buffer.scope == "local"
    # accesses are shifted into the tile: after Simplify the write-back reads C_local[i1, j1]
    simplified = _apply(tt.Simplify(), out).body.body.body
    wb = simplified.body.seq[1]
    i0, j0 = out.body.loop_var, out.body.body.loop_var
    i1, j1 = wb.loop_var, wb.body.loop_var
    C = out.params[2]
    expected_wb = _serial(i1, 4, _serial(j1, 8, BufferStore(C, simplified.buffer[i1, j1], [i0 * 4 + i1, j0 * 8 + j1]),
                                         ForKind.VECTORIZED))
    assert_structural_equal(wb, expected_wb)
    A_ = np.random.rand(16, 16).astype("float32")
    B_ = np.random.rand(16, 16).astype("float32")
    C_ = np.zeros((16, 16), "float32")
    run_prim_func(out, A_, B_, C_)
    np.testing.assert_allclose(C_, A_ @ B_, rtol=1e-5)


def test_compact_keeps_accumulator_outside_reduce_loop():
    # acc[0] is read and written by every k: the allocation must not move into the k loop.
    A = decl_buffer((8,), "float32", "A")
    B = decl_buffer((1,), "float32", "B")
    acc = decl_buffer((4,), "float32", "acc", scope="local")
    k = Var("k")
    body = Allocate(acc, SeqStmt([
        BufferStore(acc, 0.0, [0]),
        _serial(k, 8, BufferStore(acc, acc[0] + A[k], [0])),
        BufferStore(B, acc[0], [0]),
    ]))
    out = _apply(tt.CompactBufferAllocation(), PrimFunc([A, B], body))
    assert isinstance(out.body, Allocate) and [d.value for d in out.body.buffer.shape] == [1]
    a, b = np.arange(8, dtype="float32"), np.zeros(1, "float32")
    run_prim_func(out, a, b)
    assert b[0] == 28


def _window_sum(overlap_read_offset: int = 0):
    """for t in 0..4: tile[0..4] = A[2t + j]; B[t] = tile[0] + tile[3 + offset]: windows overlap by 2."""
    A = decl_buffer((12,), "float32", "A")
    B = decl_buffer((4,), "float32", "B")
    tile = decl_buffer((12,), "float32", "tile")
    t, j = Var("t"), Var("j")
    body = _serial(t, 4, SeqStmt([
        _serial(j, 4, BufferStore(tile, A[t * 2 + j], [t * 2 + j])),
        BufferStore(B, tile[t * 2] + tile[t * 2 + 3 + overlap_read_offset], [t]),
    ]))
    return PrimFunc([A, B], Allocate(tile, body))


def test_compact_sinks_an_overlapping_producer_written_before_read():
    # Neighbouring iterations write overlapping parts of `tile` (a conv halo), but each iteration
    # writes its whole window before reading it: one 4-element buffer per iteration is correct.
    out = _apply(tt.CompactBufferAllocation(), _window_sum())
    alloc = out.body.body.seq[0] if isinstance(out.body.body, SeqStmt) else out.body.body
    assert isinstance(out.body, For) and isinstance(alloc, Allocate)
    assert [d.value for d in alloc.buffer.shape] == [4]
    a, b = np.arange(12, dtype="float32"), np.zeros(4, "float32")
    run_prim_func(out, a, b)
    np.testing.assert_array_equal(b, [a[2 * k] + a[2 * k + 3] for k in range(4)])
    # A read outside the written window (it would see the previous iteration's value) keeps the
    # allocation outside the loop.
    kept = _apply(tt.CompactBufferAllocation(), _window_sum(overlap_read_offset=1))
    assert isinstance(kept.body, Allocate)


def test_access_region_of_a_nonlinear_tile_origin_is_exact():
    from ingot.tir.analysis.access_regions import infer_block_access_regions

    A = decl_buffer((10,), "float32", "A")
    B = decl_buffer((4, 6), "float32", "B")
    vt, vk = Var("vt"), Var("vk")
    origin = vt // 2 % 2 * 4
    value = A[origin] + A[origin + 5]  # the window [origin, origin + 5] of a tile indexed by div/mod
    blk = Block([IterVar(Range(0, 4), vt, "S"), IterVar(Range(0, 6), vk, "S")], [], [], "B",
                BufferStore(B, value, [vt, vk]))
    reads, _ = infer_block_access_regions(blk)
    assert [r.extent.value for r in reads[0].region] == [6]


def test_simplify_folds_a_float_select_with_a_constant_condition():
    A = decl_buffer((4,), "float32", "A")
    i = Var("i")
    body = _serial(i, 4, BufferStore(A, Select(IntImm("int32", 2) == 2, A[i] * 2.0, A[i] * 3.0), [i]))
    out = _apply(tt.Simplify(), PrimFunc([A], body))
    assert not isinstance(out.body.body.value, Select)
    a = np.ones(4, "float32")
    run_prim_func(out, a)
    np.testing.assert_array_equal(a, 2.0)


def test_vectorize_loop_before_after():
    A = decl_buffer((64,), "float32", "A")
    B = decl_buffer((64,), "float32", "B")
    C = decl_buffer((1,), "float32", "C")
    o, i = Var("o"), Var("i")
    body = _serial(o, 8, _serial(i, 8, BufferStore(B, A[o * 8 + i] * 2.0 + C[0], [o * 8 + i]), ForKind.VECTORIZED))
    out = _apply(tt.VectorizeLoop(), PrimFunc([A, B, C], body))
    expected = _serial(o, 8, BufferStore(
        B, A[Ramp(o * 8, 1, 8)] * Broadcast(2.0, 8) + Broadcast(C[0], 8), [Ramp(o * 8, 1, 8)]))
    assert_structural_equal(out.body, expected)
    with PassContext(config={"tir.disable_vectorize": True}):
        serial = _apply(tt.VectorizeLoop(), PrimFunc([A, B, C], body))
    assert serial.body.body.kind == ForKind.SERIAL


def test_vectorize_hoists_a_loop_invariant_guard():
    # the predicate of a non-divisible split on an outer loop must not block vectorization
    A = decl_buffer((64,), "float32", "A")
    B = decl_buffer((64,), "float32", "B")
    o, i = Var("o"), Var("i")
    guarded = SeqStmt([IfThenElse(o < 5, BufferStore(B, A[o * 8 + i], [o * 8 + i])),
                       BufferStore(A, A[o * 8 + i] + 1.0, [o * 8 + i])])
    body = _serial(o, 8, _serial(i, 8, guarded, ForKind.VECTORIZED))
    out = _apply(tt.VectorizeLoop(), PrimFunc([A, B], body))
    r = Ramp(o * 8, 1, 8)
    expected = _serial(o, 8, SeqStmt([IfThenElse(o < 5, BufferStore(B, A[r], [r])),
                                      BufferStore(A, A[r] + Broadcast(1.0, 8), [r])]))
    assert_structural_equal(out.body, expected)


@pytest.mark.parametrize("case", ["strided_store", "inner_if", "reduction", "too_long", "call"])
def test_vectorize_falls_back_to_vectorized_loop(case):
    from ingot.tir import exp

    A = decl_buffer((256,), "float32", "A")
    B = decl_buffer((256,), "float32", "B")
    i = Var("i")
    ext = 128 if case == "too_long" else 8
    store = {
        "strided_store": BufferStore(B, A[i], [i * 2]),
        "inner_if": IfThenElse(i < 4, BufferStore(B, A[i], [i])),
        "reduction": BufferStore(B, B[0] + A[i], [0]),
        "too_long": BufferStore(B, A[i], [i]),
        "call": BufferStore(B, exp(A[i]), [i]),
    }[case]
    f = PrimFunc([A, B], _serial(i, ext, store, ForKind.VECTORIZED))
    out = _apply(tt.VectorizeLoop(), f)
    assert_structural_equal(out, f)


def test_unroll_explicit_and_auto():
    A = decl_buffer((64,), "float32", "A")
    i, j, k = Var("i"), Var("j"), Var("k")
    f = PrimFunc([A], _serial(i, 2, BufferStore(A, 1.0, [i]), ForKind.UNROLLED))
    out = _apply(tt.UnrollLoop(), f)
    assert_structural_equal(out.body, SeqStmt([BufferStore(A, 1.0, [0]), BufferStore(A, 1.0, [1])]))
    # auto unroll: the inner loop (4 steps) fits in 8, the whole nest (32 steps) does not.
    nest = _serial(j, 8, _serial(k, 4, BufferStore(A, 1.0, [j * 4 + k])),
                   annotations={"pragma_auto_unroll_max_step": 8})
    out = _apply(tt.UnrollLoop(), PrimFunc([A], nest))
    expected = _serial(j, 8, SeqStmt([BufferStore(A, 1.0, [j * 4 + c]) for c in range(4)]))
    assert_structural_equal(out.body, expected)
    # not explicit: marked unrolled instead of expanded
    nest2 = nest.replace(annotations={"pragma_auto_unroll_max_step": 8, "pragma_unroll_explicit": 0})
    out = _apply(tt.UnrollLoop(), PrimFunc([A], nest2))
    assert out.body.body.kind == ForKind.UNROLLED and not out.body.annotations


def test_remove_no_op():
    A = decl_buffer((4,), "float32", "A")
    L = decl_buffer((4,), "float32", "L", scope="local")
    i = Var("i")
    body = SeqStmt([
        _serial(i, 4, Evaluate(0)),
        BufferStore(A, A[1], [1]),
        Allocate(L, BufferStore(A, 2.0, [0])),
        IfThenElse(A[0] > 1.0, Evaluate(0)),
        BufferStore(A, 1.0, [2]),
    ])
    out = _apply(tt.RemoveNoOp(), PrimFunc([A], body))
    assert_structural_equal(out.body, SeqStmt([BufferStore(A, 2.0, [0]), BufferStore(A, 1.0, [2])]))
