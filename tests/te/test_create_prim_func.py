"""te.create_prim_func against TensorIR built by hand (structural equality)."""

from ingot import te
from ingot.ir import (
    BufferRegion, FloatImm, IterVar, Range, Var, assert_structural_equal, decl_buffer, max_identity, max_value,
)
from ingot.tir import Block, BlockRealize, BufferStore, For, ForKind, IfThenElse, LetStmt, PrimFunc, SeqStmt

ATTRS = {"global_symbol": "main", "tir.noalias": True}


# ------------------------------------------------------------------------------------------------
# helpers that build the expected IR the way a TVMScript author would write it
# ------------------------------------------------------------------------------------------------
def grid(loop_vars, extents, body):
    for v, e in reversed(list(zip(loop_vars, extents))):
        body = For(v, 0, e, ForKind.SERIAL, body)
    return body


def point(buf, *idx):
    return BufferRegion.from_point(buf, idx)


def block_nest(name, names, extents, kinds, make_body, reads, writes, init=None):
    """Loops named ``names`` around block ``name`` with vars v_<name> remapped with ``kinds``."""
    loops = [Var(n) for n in names]
    bvars = [Var(f"v_{n}") for n in names]
    ivs = [IterVar(Range.from_min_extent(0, e), v, k) for v, e, k in zip(bvars, extents, kinds)]
    body, init_stmt = make_body(*bvars)
    blk = Block(ivs, reads(*bvars), writes(*bvars), name, body, init=init_stmt)
    return grid(loops, extents, BlockRealize(loops, True, blk))


def func(params, stmts, alloc=()):
    root = Block([], [], [], "root", SeqStmt.flatten(stmts), alloc_buffers=alloc)
    return PrimFunc(params, BlockRealize([], True, root), ATTRS)


def leaf_block(f, index=0):
    """The index-th stage's innermost block of a create_prim_func result."""
    body = f.body.block.body
    stage = body.seq[index] if isinstance(body, SeqStmt) else body
    while not isinstance(stage, BlockRealize):
        stage = stage.body
    return stage.block


# ------------------------------------------------------------------------------------------------
def test_elementwise():
    A = te.placeholder((128, 64), name="A")
    B = te.placeholder((128, 64), name="B", dtype="float32")
    C = te.compute((128, 64), lambda i, j: A[i, j] * B[i, j], name="C")
    got = te.create_prim_func([A, B, C])

    a, b, c = (decl_buffer((128, 64), "float32", n) for n in "ABC")
    expected = func([a, b, c], [block_nest(
        "C", ["i", "j"], [128, 64], "SS",
        lambda vi, vj: (BufferStore(c, a[vi, vj] * b[vi, vj], [vi, vj]), None),
        lambda vi, vj: [point(a, vi, vj), point(b, vi, vj)],
        lambda vi, vj: [point(c, vi, vj)],
    )])
    assert_structural_equal(got, expected)


def test_matmul_mlc_course():
    A = te.placeholder((128, 128), name="A")
    B = te.placeholder((128, 128), name="B")
    k = te.reduce_axis((0, 128), name="k")
    C = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    got = te.create_prim_func([A, B, C])

    a, b, c = (decl_buffer((128, 128), "float32", n) for n in "ABC")
    expected = func([a, b, c], [block_nest(
        "C", ["i", "j", "k"], [128, 128, 128], "SSR",
        lambda vi, vj, vk: (BufferStore(c, c[vi, vj] + a[vi, vk] * b[vk, vj], [vi, vj]),
                            BufferStore(c, FloatImm("float32", 0.0), [vi, vj])),
        lambda vi, vj, vk: [point(a, vi, vk), point(b, vk, vj)],
        lambda vi, vj, vk: [point(c, vi, vj)],
    )])
    assert_structural_equal(got, expected)
    blk = leaf_block(got)
    assert [iv.var.name for iv in blk.iter_vars] == ["v_i", "v_j", "v_k"]
    assert [iv.kind for iv in blk.iter_vars] == ["S", "S", "R"]


def test_intermediate_stage_is_root_alloc_buffer():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((16,), lambda i: B[i] * 2.0, name="C")
    got = te.create_prim_func([A, C])

    a, b, c = (decl_buffer((16,), "float32", n) for n in "ABC")
    stage_b = block_nest("B", ["i"], [16], "S", lambda vi: (BufferStore(b, a[vi] + 1.0, [vi]), None),
                         lambda vi: [point(a, vi)], lambda vi: [point(b, vi)])
    stage_c = block_nest("C", ["i"], [16], "S", lambda vi: (BufferStore(c, b[vi] * 2.0, [vi]), None),
                         lambda vi: [point(b, vi)], lambda vi: [point(c, vi)])
    assert_structural_equal(got, func([a, c], [stage_b, stage_c], alloc=[b]))


def test_symbolic_shapes():
    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] * 2.0, name="B")
    got = te.create_prim_func([A, B])
    assert len(got.params) == 2  # m, n come from A's shape: no scalar parameters

    m2, n2 = Var("m"), Var("n")
    a, b = decl_buffer((m2, n2), "float32", "A"), decl_buffer((m2, n2), "float32", "B")
    expected = func([a, b], [block_nest(
        "B", ["i", "j"], [m2, n2], "SS",
        lambda vi, vj: (BufferStore(b, a[vi, vj] * 2.0, [vi, vj]), None),
        lambda vi, vj: [point(a, vi, vj)], lambda vi, vj: [point(b, vi, vj)],
    )])
    assert_structural_equal(got, expected)
    assert got.params[0].shape[0] is m  # the user's Var is the function's shape variable


def test_max_reduction_init_is_minus_infinity():
    # -inf, not the lowest finite float: the max of a row of -inf must be -inf (ONNX/numpy).
    A = te.placeholder((8, 32), name="A")
    k = te.reduce_axis((0, 32), name="k")
    M = te.compute((8,), lambda i: te.max(A[i, k], axis=k), name="M")
    got = te.create_prim_func([A, M])

    a, mm = decl_buffer((8, 32), "float32", "A"), decl_buffer((8,), "float32", "M")
    from ingot.tir import max as tmax
    expected = func([a, mm], [block_nest(
        "M", ["i", "k"], [8, 32], "SR",
        lambda vi, vk: (BufferStore(mm, tmax(mm[vi], a[vi, vk]), [vi]), BufferStore(mm, max_identity("float32"), [vi])),
        lambda vi, vk: [point(a, vi, vk)], lambda vi, vk: [point(mm, vi)],
    )])
    assert_structural_equal(got, expected)


def test_min_reduction_int_identity():
    A = te.placeholder((8, 32), name="A", dtype="int8")
    k = te.reduce_axis((0, 32), name="k")
    M = te.compute((8,), lambda i: te.min(A[i, k], axis=k), name="M")
    init = leaf_block(te.create_prim_func([A, M])).init
    assert_structural_equal(init.value, max_value("int8"))
    assert init.value.value == 127


def test_where_condition_guards_the_update():
    A = te.placeholder((16, 16), name="A")
    k = te.reduce_axis((0, 16), name="k")
    S = te.compute((16,), lambda i: te.sum(A[i, k], axis=k, where=k <= i), name="S")
    got = te.create_prim_func([A, S])

    a, s = decl_buffer((16, 16), "float32", "A"), decl_buffer((16,), "float32", "S")
    expected = func([a, s], [block_nest(
        "S", ["i", "k"], [16, 16], "SR",
        lambda vi, vk: (IfThenElse(vk <= vi, BufferStore(s, s[vi] + a[vi, vk], [vi])),
                        BufferStore(s, FloatImm("float32", 0.0), [vi])),
        lambda vi, vk: [point(a, vi, vk)], lambda vi, vk: [point(s, vi)],
    )])
    assert_structural_equal(got, expected)


def test_multiple_reduce_axes_and_symbolic_extent():
    n = te.var("n")
    A = te.placeholder((4, n, 3), name="A")
    k1, k2 = te.reduce_axis((0, n), name="k1"), te.reduce_axis((0, 3), name="k2")
    S = te.compute((4,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2]), name="S")
    blk = leaf_block(te.create_prim_func([A, S]))
    assert [iv.kind for iv in blk.iter_vars] == ["S", "R", "R"]
    assert blk.iter_vars[1].dom.extent is n


def test_tuple_reducer_argmax():
    def fcombine(x, y):
        pick = x[1] >= y[1]
        return te.select(pick, x[0], y[0]), te.select(pick, x[1], y[1])

    def fidentity(t0, t1):
        return te.const(-1, t0), te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    A = te.placeholder((4, 10), name="A")
    k = te.reduce_axis((0, 10), name="k")
    idx, val = te.compute((4,), lambda i: argmax((k, A[i, k]), axis=k), name="T")
    assert (idx.name, val.name, idx.dtype, val.dtype) == ("T_v0", "T_v1", "int32", "float32")
    f = te.create_prim_func([A, idx, val])
    blk = leaf_block(f)
    assert blk.name_hint == "T"
    assert isinstance(blk.body, LetStmt) and isinstance(blk.body.body, LetStmt)
    assert [w.buffer.name for w in blk.writes] == ["T_v0", "T_v1"]
    assert [r.buffer.name for r in blk.reads] == ["A"]
    assert [s.value.value for s in blk.init.seq][0] == -1


def test_multi_output_elementwise_gets_one_block_per_output():
    A = te.placeholder((8,), name="A")
    P, Q = te.compute((8,), lambda i: (A[i] + 1.0, A[i] * 2.0), name="PQ")
    f = te.create_prim_func([A, P, Q])
    seq = f.body.block.body.body  # under the single loop
    assert [r.block.name_hint for r in seq.seq] == ["PQ_v0", "PQ_v1"]
    v0, v1 = (r.block.iter_vars[0].var for r in seq.seq)
    assert v0 is not v1  # each block defines its own iteration variables


def test_block_names_are_unique_and_attrs_become_annotations():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="compute", attrs={"layout_free_placeholders": [A], "x": 1})
    C = te.compute((4,), lambda i: B[i] + 1.0, name="compute")
    f = te.create_prim_func([A, C])
    b0, b1 = leaf_block(f, 0), leaf_block(f, 1)
    assert (b0.name_hint, b1.name_hint) == ("compute", "compute_1")
    assert b0.annotations["x"] == 1
    assert b0.annotations["layout_free_placeholders"][0] is f.params[0]


def test_zero_dim_output():
    A = te.placeholder((), name="A")
    B = te.compute((), lambda: A[()] * 2.0, name="B")
    f = te.create_prim_func([A, B])
    realize = f.body.block.body
    assert isinstance(realize, BlockRealize)  # no loops
    assert [iv.var.name for iv in realize.block.iter_vars] == ["vi"]
    assert realize.iter_values[0].value == 0
    assert realize.block.body.indices == ()


def test_scalar_params():
    n = te.var("n")
    alpha = te.var("alpha", "float32")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * alpha, name="B")
    f = te.create_prim_func([A, B])
    assert f.params[2] is alpha  # used but not a parameter's dimension: appended
    f2 = te.create_prim_func([alpha, A, B])
    assert f2.params[0] is alpha and len(f2.params) == 3
    # an output's shape binds its Vars like an input's does
    m = te.var("m")
    C = te.compute((m,), lambda i: A[0] + 1.0, name="C")
    assert len(te.create_prim_func([A, C]).params) == 2
    # a Var only in an intermediate compute's shape becomes a scalar parameter
    D = te.compute((n,), lambda i: A[i] + C[0], name="D")
    f3 = te.create_prim_func([A, D])
    assert len(f3.params) == 3 and f3.params[2] is m


def test_index_dtype_override():
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")
    B = te.compute((n, 4), lambda i, j: A[i, j] + 1.0, name="B")
    f = te.create_prim_func([A, B], index_dtype_override="int64")
    assert {str(d.dtype) for p in f.params for d in p.shape} == {"int64"}
    loop = f.body.block.body
    assert str(loop.loop_var.dtype) == "int64" and str(loop.body.loop_var.dtype) == "int64"
    blk = leaf_block(f)
    assert {str(i.dtype) for i in blk.body.indices} == {"int64"}


def _matmul():
    A = te.placeholder((128, 128), name="A")
    B = te.placeholder((128, 128), name="B")
    k = te.reduce_axis((0, 128), name="k")
    C = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def test_matmul_equals_tvmscript():
    from ingot.script import tir as T
    @T.prim_func
    def mm(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
           C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    assert_structural_equal(_matmul(), mm)


def test_matmul_prints_as_tvmscript():
    text = _matmul().script()
    assert 'T.axis.remap("SSR"' in text and "T.init()" in text and 'T.block("C")' in text
    assert "T.block(\"root\")" not in text  # the printer hides the root block
