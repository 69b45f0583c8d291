"""Hand-built scheduled TensorIR used by the lowering tests (what TE/TVMScript/schedules produce)."""
from __future__ import annotations

from ingot.ir import IterVar, Range, Var, decl_buffer
from ingot.tir import Block, BlockRealize, BufferRegion, BufferStore, For, ForKind, PrimFunc, SeqStmt


def iv(name: str, extent: int, kind: str = "S") -> IterVar:
    return IterVar(Range.from_min_extent(0, extent), Var(name), kind)


def root(body, alloc_buffers=()):
    """The root block convention: a BlockRealize of block "root" without iteration variables."""
    return BlockRealize([], True, Block([], [], [], "root", body, alloc_buffers=alloc_buffers))


def loops(names_extents, body, kinds=None):
    vars_ = [Var(n) for n, _ in names_extents]
    stmt = body(*vars_)
    kinds = kinds or [ForKind.SERIAL] * len(vars_)
    for v, (_, ext), kind in reversed(list(zip(vars_, names_extents, kinds))):
        stmt = For(v, 0, ext, kind, stmt)
    return stmt


def matmul_block(A, B, C, bindings, predicate=True, name="C"):
    """The reduction block C[vi, vj] += A[vi, vk] * B[vk, vj] bound to ``bindings``."""
    M, K = (d.value for d in A.shape)
    N = C.shape[1].value
    vi, vj, vk = iv("vi", M), iv("vj", N), iv("vk", K, "R")
    block = Block(
        [vi, vj, vk],
        reads=[BufferRegion.from_point(A, [vi.var, vk.var]), BufferRegion.from_point(B, [vk.var, vj.var])],
        writes=[BufferRegion.from_point(C, [vi.var, vj.var])],
        name_hint=name,
        body=BufferStore(C, C[vi.var, vj.var] + A[vi.var, vk.var] * B[vk.var, vj.var], [vi.var, vj.var]),
        init=BufferStore(C, 0.0, [vi.var, vj.var]),
    )
    return BlockRealize(bindings, predicate, block)


def matmul(M=16, N=16, K=16) -> PrimFunc:
    A = decl_buffer((M, K), "float32", "A")
    B = decl_buffer((K, N), "float32", "B")
    C = decl_buffer((M, N), "float32", "C")
    body = loops([("i", M), ("j", N), ("k", K)], lambda i, j, k: matmul_block(A, B, C, [i, j, k]))
    return PrimFunc([A, B, C], root(body))


def tiled_matmul_local(M=16, N=16, K=16, ti=4, tj=8) -> PrimFunc:
    """Matmul after cache_write(C, "local") + reverse_compute_at: a (ti, tj) register tile per (i0, j0)."""
    A = decl_buffer((M, K), "float32", "A")
    B = decl_buffer((K, N), "float32", "B")
    C = decl_buffer((M, N), "float32", "C")
    CL = decl_buffer((M, N), "float32", "C_local", scope="local")

    def tile(i0, j0):
        update = loops([("k", K)], lambda k: loops(
            [("i1", ti), ("j1", tj)], lambda i1, j1: matmul_block(A, B, CL, [i0 * ti + i1, j0 * tj + j1, k])))

        def writeback(i1, j1):
            vi, vj = iv("vi", M), iv("vj", N)
            blk = Block([vi, vj], [BufferRegion.from_point(CL, [vi.var, vj.var])],
                        [BufferRegion.from_point(C, [vi.var, vj.var])], "C_local_wb",
                        BufferStore(C, CL[vi.var, vj.var], [vi.var, vj.var]))
            return BlockRealize([i0 * ti + i1, j0 * tj + j1], True, blk)

        wb = loops([("i1", ti), ("j1", tj)], writeback, kinds=[ForKind.SERIAL, ForKind.VECTORIZED])
        return SeqStmt([update, wb])

    body = loops([("i0", M // ti), ("j0", N // tj)], tile, kinds=[ForKind.PARALLEL, ForKind.SERIAL])
    return PrimFunc([A, B, C], root(body, alloc_buffers=[CL]))


def split_add_one(n=100, factor=16):
    """B[vi] = A[vi] + 1 with vi = i0 * factor + i1 under the predicate vi < n (non-divisible split)."""
    A = decl_buffer((n,), "float32", "A")
    B = decl_buffer((n,), "float32", "B")
    outer = (n + factor - 1) // factor

    def body(i0, i1):
        vi = iv("vi", n)
        blk = Block([vi], [BufferRegion.from_point(A, [vi.var])], [BufferRegion.from_point(B, [vi.var])], "B",
                    BufferStore(B, A[vi.var] + 1.0, [vi.var]))
        return BlockRealize([i0 * factor + i1], i0 * factor + i1 < n, blk)

    return PrimFunc([A, B], root(loops([("i0", outer), ("i1", factor)], body))), (A, B)
