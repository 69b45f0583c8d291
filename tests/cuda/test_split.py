"""GPU lowering without a compiler: kernels, launch extents, guards, barriers, errors."""
from __future__ import annotations

import pytest

import ingot
from ingot.codegen.cuda.split import (
    GPULoweringError, insert_syncs, is_storage_sync, split_host_device, storage_sync,
)
from ingot.ir import EQ, LT, IntImm, Var, decl_buffer, structural_equal
from ingot.runtime.cuda import eval_launch_expr
from ingot.tir import Allocate, BufferStore, For, IfThenElse, PrimFunc, SeqStmt

import programs
from programs import thread_loop


def _one_kernel(mod):
    func = ingot.lower(mod)["main"] if not isinstance(mod, PrimFunc) else mod
    dev = split_host_device(func)
    assert len(dev.kernels) == 1
    return func, dev.kernels[0]


def test_elementwise_kernel_body_and_launch():
    func, k = _one_kernel(programs.elementwise(n=1000, factor=128))
    assert {t: e.value for t, e in k.launch.items()} == {"blockIdx.x": 8, "threadIdx.x": 128}
    bx, tx = k.thread_vars["blockIdx.x"], k.thread_vars["threadIdx.x"]
    A, B = func.params
    idx = bx * 128 + tx
    expected = IfThenElse(LT(idx, 1000), BufferStore(B, ingot.tir.exp(A[idx]) * 2.0, [idx]))
    assert structural_equal(k.body, expected)
    assert [b.name for b in k.buffers] == ["A", "B"] and k.scalars == ()


def test_symbolic_launch_extent_is_a_host_expression():
    func, k = _one_kernel(programs.symbolic_add())
    (n,) = k.scalars
    assert n.name == "n"
    grid = k.launch["blockIdx.x"]
    from ingot.codegen.cuda.codegen import launch_expr

    j = launch_expr(grid, {id(n): "n"})
    assert [eval_launch_expr(j, {"n": v}) for v in (1, 64, 65, 1000)] == [1, 1, 2, 16]


def test_unbound_loop_is_an_error():
    with pytest.raises(GPULoweringError, match="unbound loop in a GPU function; bind it with sch.bind"):
        split_host_device(ingot.lower(programs.unbound_elementwise())["main"])


def test_store_outside_kernels_is_an_error():
    A = decl_buffer((4,), "float32", "A")
    with pytest.raises(GPULoweringError, match="store to buffer 'A' is outside every thread-bound loop"):
        split_host_device(PrimFunc([A], BufferStore(A, 1.0, [0])))


def test_shared_allocation_outside_kernel_is_an_error():
    A = decl_buffer((4,), "float32", "A")
    S = decl_buffer((4,), "float32", "S", scope="shared")
    tx = Var("tx")
    body = Allocate(S, thread_loop(tx, 4, "threadIdx.x", BufferStore(A, S[tx], [tx])))
    with pytest.raises(GPULoweringError, match="'S' with scope 'shared' is allocated outside the kernels"):
        split_host_device(PrimFunc([A], body))


def test_too_many_threads_is_an_error():
    A = decl_buffer((2048,), "float32", "A")
    tx = Var("tx")
    body = thread_loop(tx, 2048, "threadIdx.x", BufferStore(A, 0.0, [tx]))
    with pytest.raises(GPULoweringError, match="2048 threads per block"):
        split_host_device(PrimFunc([A], body))


def test_nested_same_axis_is_an_error():
    A = decl_buffer((16,), "float32", "A")
    a, b = Var("a"), Var("b")
    body = thread_loop(a, 4, "threadIdx.x", thread_loop(b, 4, "threadIdx.x", BufferStore(A, 0.0, [a * 4 + b])))
    with pytest.raises(GPULoweringError, match="inside another loop bound to threadIdx.x"):
        split_host_device(PrimFunc([A], body))


def test_launch_extent_from_kernel_variable_is_an_error():
    A = decl_buffer((64,), "float32", "A")
    bx, tx = Var("bx"), Var("tx")
    body = thread_loop(bx, 4, "blockIdx.x", thread_loop(tx, bx + 1, "threadIdx.x", BufferStore(A, 0.0, [tx])))
    with pytest.raises(GPULoweringError, match="uses variables the host does not know"):
        split_host_device(PrimFunc([A], body))


def test_smaller_thread_loop_is_guarded_and_launch_takes_the_max():
    A = decl_buffer((32,), "float32", "A")
    a, b = Var("a"), Var("b")
    body = thread_loop(Var("bx"), 1, "blockIdx.x", SeqStmt([
        thread_loop(a, 32, "threadIdx.x", BufferStore(A, 0.0, [a])),
        thread_loop(b, 16, "threadIdx.x", BufferStore(A, 1.0, [b]))]))
    _, k = _one_kernel(PrimFunc([A], body))
    tx = k.thread_vars["threadIdx.x"]
    assert k.launch["threadIdx.x"].value == 32
    expected = SeqStmt([BufferStore(A, 0.0, [tx]), IfThenElse(LT(tx, 16), BufferStore(A, 1.0, [tx]))])
    assert structural_equal(k.body, expected)


def test_statement_outside_thread_loop_runs_on_thread_zero():
    A = decl_buffer((8,), "float32", "A")
    bx, tx = Var("bx"), Var("tx")
    body = thread_loop(bx, 2, "blockIdx.x", SeqStmt([
        BufferStore(A, A[bx * 4] + 1.0, [bx * 4]),  # not under threadIdx.x: one thread must do it
        thread_loop(tx, 4, "threadIdx.x", BufferStore(A, 0.0, [bx * 4 + tx])),
    ]))
    _, k = _one_kernel(PrimFunc([A], body))
    b, t = k.thread_vars["blockIdx.x"], k.thread_vars["threadIdx.x"]
    expected = SeqStmt([IfThenElse(EQ(t, 0), BufferStore(A, A[b * 4] + 1.0, [b * 4])),
                        BufferStore(A, 0.0, [b * 4 + t])])
    assert structural_equal(k.body, expected)


def test_statement_outside_block_axis_is_an_error():
    A = decl_buffer((8,), "float32", "A")
    tx, bx = Var("tx"), Var("bx")
    body = thread_loop(tx, 4, "threadIdx.x", SeqStmt([
        BufferStore(A, 0.0, [tx]),
        thread_loop(bx, 2, "blockIdx.x", BufferStore(A, 1.0, [bx * 4 + tx])),
    ]))
    with pytest.raises(GPULoweringError, match="not under any loop bound to blockIdx.x"):
        split_host_device(PrimFunc([A], body))


def test_two_stages_are_two_kernels_with_a_workspace():
    A = decl_buffer((64,), "float32", "A")
    T = decl_buffer((64,), "float32", "T")
    B = decl_buffer((64,), "float32", "B")
    a, b = Var("a"), Var("b")
    body = Allocate(T, SeqStmt([
        thread_loop(a, 64, "threadIdx.x", BufferStore(T, A[a] * 2.0, [a])),
        thread_loop(b, 64, "threadIdx.x", BufferStore(B, T[63 - b], [b])),
    ]))
    dev = split_host_device(PrimFunc([A, B], body))
    assert [w.name for w in dev.workspaces] == ["T"]
    assert [[x.name for x in k.buffers] for k in dev.kernels] == [["A", "T"], ["B", "T"]]


def test_sync_between_shared_fill_and_use():
    S = decl_buffer((4,), "float32", "S", scope="shared")
    O = decl_buffer((4,), "float32", "O")
    a, b = Var("a"), Var("b")
    fill = thread_loop(a, 4, "threadIdx.x", BufferStore(S, 1.0, [a]))
    use = thread_loop(b, 4, "threadIdx.x", BufferStore(O, S[3 - b], [b]))
    out = insert_syncs(SeqStmt([fill, use]), {"threadIdx.x": IntImm("int32", 4)})
    assert structural_equal(out, SeqStmt([fill, storage_sync(), use]))
    # One thread per block: program order suffices.
    assert structural_equal(insert_syncs(SeqStmt([fill, use]), {"threadIdx.x": IntImm("int32", 1)}),
                            SeqStmt([fill, use]))


def test_loop_carried_sync_in_tiled_matmul():
    _, k = _one_kernel(programs.tiled_matmul())
    syncs = []

    def find(stmt):
        if isinstance(stmt, For) and stmt.loop_var.name == "ko":
            syncs.append([is_storage_sync(s) for s in stmt.body.seq])
        for name in getattr(stmt, "_fields", ()):
            v = getattr(stmt, name)
            for c in (v if isinstance(v, tuple) else (v,)):
                if hasattr(c, "_fields") and not hasattr(c, "dtype"):
                    find(c)

    find(k.body)
    # sync (previous iteration's reads) ; fill A ; fill B ; sync ; multiply
    assert syncs == [[True, False, False, True, False]]


def test_no_sync_inside_guarded_thread_loop():
    S = decl_buffer((32,), "float32", "S", scope="shared")
    O = decl_buffer((32,), "float32", "O")
    a, b = Var("a"), Var("b")
    inner = SeqStmt([BufferStore(S, 1.0, [b]), BufferStore(O, S[b], [b])])
    body = SeqStmt([thread_loop(a, 32, "threadIdx.x", BufferStore(O, 0.0, [a])),
                    thread_loop(b, 16, "threadIdx.x", inner)])  # partial: guarded, no barrier inside
    out = insert_syncs(body, {"threadIdx.x": IntImm("int32", 32)})
    assert structural_equal(out, body)
