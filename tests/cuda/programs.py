"""Programs shared by the CUDA tests: scheduled TE computations and a hand-lowered tiled matmul.

The shared-memory matmul is written directly in the lowered form (thread-bound loops, shared
and local `Allocate`s) because `compute_at` — which a schedule needs to place the shared copies
under the block's loops — is not in `ingot.tir.schedule` yet.
"""
from __future__ import annotations

import ingot  # noqa: F401  (registers the TVMScript printer)
from ingot import te, tir
from ingot.ir import Var, decl_buffer
from ingot.tir import Allocate, BufferStore, For, ForKind, PrimFunc, SeqStmt


def thread_loop(var, extent, tag, body):
    return For(var, 0, extent, ForKind.THREAD_BINDING, body, thread_binding=tag)


def elementwise(n=1000, factor=128):
    """B = exp(A) * 2 (a ragged split: the last block is guarded)."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]) * 2.0, name="B")
    sch = tir.Schedule(te.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, [None, factor])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch.mod


def symbolic_add():
    """C[i] = A[i] + B[i] for any n: grid = ceildiv(n, 64)."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    sch = tir.Schedule(te.create_prim_func([A, B, C]))
    (i,) = sch.get_loops(sch.get_block("C"))
    bx, tx = sch.split(i, [None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch.mod


def row_sum(rows=64, cols=100):
    """B[i] = sum_k A[i, k]: rows on threads, the reduction serial in each thread."""
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    B = te.compute((rows,), lambda i: te.sum(A[i, k], axis=k), name="B")
    sch = tir.Schedule(te.create_prim_func([A, B]))
    i, _ = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, [None, 32])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch.mod


def unbound_elementwise():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    return te.create_prim_func([A, B])


def tiled_matmul(n=64, tile=16, dtype="float32"):
    """C = A @ B with 16x16 shared tiles of A and B, one output element per thread, the
    accumulator in registers (lowered form, row-major flattened buffers)."""
    A = decl_buffer((n, n), dtype, "A")
    B = decl_buffer((n, n), dtype, "B")
    C = decl_buffer((n, n), dtype, "C")
    A1 = decl_buffer((n * n,), dtype, "A", data=A.data)
    B1 = decl_buffer((n * n,), dtype, "B", data=B.data)
    C1 = decl_buffer((n * n,), dtype, "C", data=C.data)
    A_sh = decl_buffer((tile * tile,), dtype, "A_shared", scope="shared")
    B_sh = decl_buffer((tile * tile,), dtype, "B_shared", scope="shared")
    acc = decl_buffer((1,), dtype, "acc", scope="local")
    by, bx, ko, ki = Var("by"), Var("bx"), Var("ko"), Var("ki")

    # Each thread keeps its accumulator across the ko loop, so the per-thread part is one
    # threadIdx nest around [init; ko loop {fill A; fill B; multiply}; store] — with the fills
    # done by all threads of the block inside the ko loop.
    ty, tx = Var("ty"), Var("tx")
    fill_a = BufferStore(A_sh, A1[(by * tile + ty) * n + ko * tile + tx], [ty * tile + tx])
    fill_b = BufferStore(B_sh, B1[(ko * tile + ty) * n + bx * tile + tx], [ty * tile + tx])
    mul = For(ki, 0, tile, ForKind.SERIAL,
              BufferStore(acc, acc[0] + A_sh[ty * tile + ki] * B_sh[ki * tile + tx], [0]))
    per_thread = Allocate(acc, SeqStmt([
        BufferStore(acc, 0.0, [0]),
        For(ko, 0, n // tile, ForKind.SERIAL, SeqStmt([fill_a, fill_b, mul])),
        BufferStore(C1, acc[0], [(by * tile + ty) * n + bx * tile + tx]),
    ]))
    body = thread_loop(by, n // tile, "blockIdx.y", thread_loop(bx, n // tile, "blockIdx.x", Allocate(
        A_sh, Allocate(B_sh, thread_loop(ty, tile, "threadIdx.y", thread_loop(tx, tile, "threadIdx.x", per_thread))))))
    return PrimFunc([A, B, C], body).with_attr("global_symbol", "main").with_attr("tir.noalias", True)


def bound_matmul(n=200, tile=16, dtype="float32"):
    """C = A @ B scheduled with primitives: (i, j) split by ``tile`` and bound to blocks and
    threads, k serial in each thread; ``n`` not a multiple of ``tile`` makes guarded blocks."""
    A = te.placeholder((n, n), dtype, name="A")
    B = te.placeholder((n, n), dtype, name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = tir.Schedule(te.create_prim_func([A, B, C]))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    by, ty = sch.split(i, [None, tile])
    bx, tx = sch.split(j, [None, tile])
    sch.reorder(by, bx, ty, tx)
    for loop, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        sch.bind(loop, tag)
    return sch.mod


def two_stage_workspace(n=4096):
    """B = exp(A) + 1 through a global intermediate T = exp(A): two kernels and a device
    workspace the launcher allocates per call."""
    A = te.placeholder((n,), name="A")
    T = te.compute((n,), lambda i: te.exp(A[i]), name="T")
    B = te.compute((n,), lambda i: T[i] + 1.0, name="B")
    sch = tir.Schedule(te.create_prim_func([A, B]))
    for name in ("T", "B"):
        (i,) = sch.get_loops(sch.get_block(name))
        bx, tx = sch.split(i, [None, 256])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return sch.mod
