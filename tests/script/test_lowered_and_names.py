"""TVMScript printing of lowered (block-free) IR, naming rules, and standalone nodes."""
import ingot
from ingot import tir
from ingot.ir import Buffer, IterVar, Range, Var, assert_structural_equal, decl_buffer
from ingot.script import from_source, script
from ingot.tir import (
    Allocate, AssertStmt, Block, BlockRealize, BufferStore, Evaluate, For, ForKind, LetStmt, PrimFunc, SeqStmt,
)


def roundtrip(node):
    text = script(node)
    again = from_source(text)
    assert_structural_equal(node, again)
    assert script(again) == text
    return text


def _lowered_matmul_relu():
    """What ingot.lower produces: flat views sharing the parameters' data, a local Allocate."""
    A, B = decl_buffer((64, 64), "float32", "A"), decl_buffer((64, 64), "float32", "B")
    A1 = Buffer(A.data, "float32", (4096,), name="A_1")
    B1 = Buffer(B.data, "float32", (4096,), name="B_1")
    acc = decl_buffer((8,), "float32", "acc", scope="local")
    i, j, v, w = Var("i"), Var("j"), Var("v"), Var("v")
    body = SeqStmt([
        BufferStore(acc, tir.Broadcast(tir.const(0.0, "float32"), 8), [tir.Ramp(0, 1, 8)]),
        For(v, 0, 8, ForKind.VECTORIZED,
            BufferStore(acc, acc[v] + A1[i * 64 + j * 8 + v], [v])),
        For(w, 0, 8, ForKind.UNROLLED,
            BufferStore(B1, tir.max(acc[w], tir.const(0.0, "float32")), [i * 64 + j * 8 + w])),
    ])
    loop = For(i, 0, 64, ForKind.PARALLEL, For(j, 0, 8, ForKind.SERIAL, Allocate(acc, body)))
    return PrimFunc([A, B], loop, {"global_symbol": "relu", "tir.noalias": True})


def test_lowered_function_round_trips():
    f = _lowered_matmul_relu()
    text = roundtrip(f)
    assert 'A_1 = T.Buffer((4096,), "float32", data=A.data)' in text
    assert 'acc = T.decl_buffer((8,), "float32", scope="local")' in text
    assert "for i in T.parallel(64):" in text
    assert "for v in T.vectorized(8):" in text
    assert "T.Ramp(0, 1, 8)" in text and "T.Broadcast(0.0, 8)" in text
    assert "def relu(" in text


def test_lowered_source_parses_to_expected_ir():
    f = from_source('''
# from ingot.script import tir as T
@T.prim_func
def main(A: T.Buffer((4, 4), "float32")):
    A_1 = T.Buffer((16,), "float32", data=A.data)
    for i in range(16):
        tmp = T.decl_buffer((1,), "float32", scope="local")
        tmp[0] = A_1[i] * 2.0
        A_1[i] = tmp[0]
''')
    A = f.params[0]
    loop = f.body
    assert isinstance(loop.body, Allocate) and loop.body.buffer.scope == "local"
    store = loop.body.body.seq[1]
    assert store.buffer.data is A.data and store.buffer.shape[0].value == 16


def test_alloc_buffer_at_statement_level_without_blocks_is_an_allocate():
    f = from_source('''
@T.prim_func
def main(A: T.Buffer((16,), "float32")):
    A_local = T.alloc_buffer((16,), "float32", scope="local")
    for i in range(16):
        A_local[i] = A[i]
''')
    assert isinstance(f.body, Allocate) and f.body.buffer.name == "A_local"
    roundtrip(f)


def test_allocate_and_view_tvm_lowered_spelling():
    f = from_source('''
@T.prim_func
def main(A: T.Buffer((16,), "float32")):
    ptr = T.allocate([16], "float32", "local")
    buf = T.Buffer((16,), "float32", data=ptr, scope="local")
    for i in range(16):
        buf[i] = A[i]
''')
    assert isinstance(f.body, Allocate)
    assert f.body.body.body.buffer.data is f.body.buffer.data
    roundtrip(f)


def test_non_tail_let_assert_allocate_print_as_with():
    A = decl_buffer((8,), "float32", "A")
    x, i = Var("x", "float32"), Var("i")
    tmp = decl_buffer((8,), "float32", "tmp", scope="local")
    stmts = SeqStmt([
        LetStmt(x, A[0], BufferStore(A, x + 1.0, [1])),
        AssertStmt(A[0] > 0.0, "positive", BufferStore(A, 1.0, [2])),
        Allocate(tmp, For(i, 0, 8, ForKind.SERIAL, BufferStore(tmp, A[i], [i]))),
        BufferStore(A, 3.0, [3]),
        LetStmt(Var("y"), 5, Evaluate(0)),
    ])
    f = PrimFunc([A], stmts)
    text = roundtrip(f)
    assert "with T.LetStmt(A[0], type_annotation=T.float32) as x:" in text
    assert 'with T.Assert(A[0] > 0.0, "positive"):' in text
    assert 'with T.decl_buffer((8,), "float32", scope="local") as tmp:' in text
    assert "y: T.int32 = 5" in text


def test_names_are_unique_valid_identifiers():
    A = decl_buffer((8,), "float32", "conv2d-out.0")
    T_buf = decl_buffer((8,), "float32", "T")
    i, i2 = Var("i"), Var("i")
    inner = For(i2, 0, 8, ForKind.SERIAL, BufferStore(A, T_buf[i] + T_buf[i2], [i2]))
    f = PrimFunc([A, T_buf], For(i, 0, 8, ForKind.SERIAL, inner))
    text = roundtrip(f)
    assert 'def main(conv2d_out_0: T.Buffer((8,), "float32"), T_: T.Buffer((8,), "float32")):' in text
    assert "for i, i_1 in T.grid(8, 8):" in text
    # Sibling scopes may reuse a name (as TVM does).
    j1, j2 = Var("j"), Var("j")
    g = PrimFunc([A], SeqStmt([For(j1, 0, 8, ForKind.SERIAL, BufferStore(A, 0.0, [j1])),
                               For(j2, 0, 8, ForKind.SERIAL, BufferStore(A, 1.0, [j2]))]))
    assert script(g).count("for j in range(8):") == 2
    roundtrip(g)


def test_printing_is_deterministic_and_free_vars_declared():
    n = Var("n")
    A = decl_buffer((16,), "float32", "A")
    f = PrimFunc([A], For(Var("i"), 0, 16, ForKind.SERIAL, BufferStore(A, tir.Cast("float32", n), [0])))
    text = script(f)
    assert "n = T.int32()" in text
    assert script(f) == text
    again = from_source(text)
    assert ingot.ir.structural_equal(f, again, map_free_vars=True)


def test_explicit_non_empty_root_block_is_printed():
    A = decl_buffer((4,), "float32", "A")
    vi, i = Var("vi"), Var("i")
    inner = Block([IterVar(Range.from_min_extent(0, 4), vi, "S")], [], [ingot.ir.BufferRegion.from_point(A, [vi])],
                  "A", BufferStore(A, 0.0, [vi]))
    loops = For(i, 0, 4, ForKind.SERIAL, BlockRealize([i], True, inner))
    root = Block([], [], [ingot.ir.BufferRegion.full(A)], "root", loops)
    f = PrimFunc([A], BlockRealize([], True, root))
    text = roundtrip(f)
    assert 'with T.block("root"):' in text


def test_standalone_nodes_print_tvmscript():
    A = decl_buffer((4, 4), "float16", "W")
    i = Var("i")
    loop = For(i, 0, 4, ForKind.SERIAL, BufferStore(A, A[i, 0], [i, 1]))
    assert str(loop) == "for i in range(4):\n    W[i, 1] = W[i, 0]"
    assert repr(A) == 'W = T.Buffer((4, 4), "float16")'
    assert str(A[0:2, i]) == "W[0:2, i]"


def test_output_of_ingot_lower_round_trips():
    from ingot import te
    from ingot.driver.build import lower

    A = te.placeholder((16, 16), name="A")
    k = te.reduce_axis((0, 16), name="k")
    B = te.compute((16,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((16,), lambda i: B[i] * 2.0, name="C")
    roundtrip(lower(te.create_prim_func([A, C])))
