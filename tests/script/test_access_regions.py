"""infer_block_access_regions: regions in terms of the block's own iteration variables."""
from ingot.ir import BufferRegion, IterVar, Range, Var, assert_structural_equal, decl_buffer
from ingot.script import from_source
from ingot.tir import Block, BlockRealize, BufferStore, For, ForKind, SeqStmt
from ingot.tir.analysis import infer_block_access_regions


def _block(iter_vars, body, **kw):
    return Block(iter_vars, [], [], "b", body, **kw)


def test_point_accesses_kept_as_written():
    A, B = decl_buffer((8, 8), "float32", "A"), decl_buffer((8, 8), "float32", "B")
    vi, vj = Var("vi"), Var("vj")
    ivs = [IterVar(Range(0, 8), vi, "S"), IterVar(Range(0, 8), vj, "S")]
    reads, writes = infer_block_access_regions(_block(ivs, BufferStore(B, A[vj, vi * 2 - 1], [vi, vj])))
    assert_structural_equal(reads[0], BufferRegion.from_point(A, [vj, vi * 2 - 1]))
    assert_structural_equal(writes[0], BufferRegion.from_point(B, [vi, vj]))


def test_constant_offsets_give_exact_hull():
    A, B = decl_buffer((10,), "float32", "A"), decl_buffer((8,), "float32", "B")
    vi = Var("vi")
    body = BufferStore(B, A[vi] + A[vi + 2] + A[vi + 1], [vi])
    reads, _ = infer_block_access_regions(_block([IterVar(Range(0, 8), vi, "S")], body))
    assert str(reads[0]) == "A[vi:vi + 3]"


def test_inner_loops_and_nested_blocks_are_relaxed_and_local_buffers_skipped():
    A, B = decl_buffer((64, 64), "float32", "A"), decl_buffer((4,), "float32", "B")
    tmp = decl_buffer((16,), "float32", "tmp", scope="local")
    vo, k, vk = Var("vo"), Var("k"), Var("vk")
    inner = Block([IterVar(Range(0, 16), vk, "S")], [], [], "inner",
                  BufferStore(tmp, A[vo * 16 + vk, vk % 4], [vk]))
    body = SeqStmt([
        For(k, 0, 16, ForKind.SERIAL, BlockRealize([k], True, inner)),
        BufferStore(B, tmp[0], [vo]),
    ])
    reads, writes = infer_block_access_regions(
        _block([IterVar(Range(0, 4), vo, "S")], body, alloc_buffers=[tmp]))
    assert [str(r) for r in reads] == ["A[vo * 16:vo * 16 + 16, 0:4]"]
    assert [str(r) for r in writes] == ["B[vo]"]


def test_non_linear_index_covers_whole_dimension():
    A, B = decl_buffer((16,), "float32", "A"), decl_buffer((4,), "float32", "B")
    vi = Var("vi")
    body = BufferStore(B, A[vi * vi] + A[vi], [vi])
    reads, _ = infer_block_access_regions(_block([IterVar(Range(0, 4), vi, "S")], body))
    assert str(reads[0]) == "A[0:16]"


def test_parser_uses_inference_for_omitted_regions_only():
    f = from_source('''
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi, 0:8])
            for j in range(4):
                B[vi] = A[vi, j * 2]
''')
    block = f.body.block.body.body.block
    assert [str(r) for r in block.reads] == ["A[vi, 0:8]"]
    assert [str(r) for r in block.writes] == ["B[vi]"]


def test_future_annotations_with_body_declared_shape_vars():
    f = from_source('''
from __future__ import annotations

@T.prim_func
def main(A: T.Buffer((m, n), "float32")):
    m = T.int32()
    n = T.int32()
    for i, j in T.grid(m, n):
        A[i, j] = 0.0
''')
    A = f.params[0]
    assert f.body.extent is A.shape[0] and f.body.body.extent is A.shape[1]
