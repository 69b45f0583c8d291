"""TVMScript: parse → IR (against hand-built IR) and print → parse round trips."""

import ingot
from ingot import ir, tir
from ingot.ir import IterVar, Range, Var, assert_structural_equal, decl_buffer, structural_equal
from ingot.script import from_source, ir as I, tir as T
from ingot.tir import (
    Block, BlockRealize, BufferStore, For, ForKind, IfThenElse, LetStmt, PrimFunc,
)


def roundtrip(node):
    """print → parse → structurally equal, and printing is a fixed point."""
    text = ingot.script.script(node)
    again = from_source(text)
    assert_structural_equal(node, again)
    assert ingot.script.script(again) == text
    return text


@ingot.script.ir_module
class MatmulModule:
    @T.prim_func
    def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def _matmul_by_hand():
    A, B, C = (decl_buffer((128, 128), "float32", n) for n in "ABC")
    i, j, k = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    dom = Range.from_min_extent(0, 128)
    block = Block(
        [IterVar(dom, vi, "S"), IterVar(dom, vj, "S"), IterVar(dom, vk, "R")],
        reads=[C[vi, vj:vj + 1], A[vi, vk:vk + 1], B[vk, vj:vj + 1]],
        writes=[C[vi, vj:vj + 1]],
        name_hint="C",
        body=BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], [vi, vj]),
        init=BufferStore(C, 0.0, [vi, vj]),
    )
    # Point regions are (index, extent 1) ranges.
    block = block.replace(
        reads=[ir.BufferRegion.from_point(C, [vi, vj]), ir.BufferRegion.from_point(A, [vi, vk]),
               ir.BufferRegion.from_point(B, [vk, vj])],
        writes=[ir.BufferRegion.from_point(C, [vi, vj])],
    )
    loops = For(i, 0, 128, ForKind.SERIAL, For(j, 0, 128, ForKind.SERIAL, For(k, 0, 128, ForKind.SERIAL,
                BlockRealize([i, j, k], True, block))))
    root = BlockRealize([], True, Block([], [], [], "root", loops))
    return PrimFunc([A, B, C], root, {"global_symbol": "main", "tir.noalias": True})


def test_matmul_parses_to_hand_built_ir():
    assert isinstance(MatmulModule, ir.IRModule)
    assert_structural_equal(MatmulModule["main"], _matmul_by_hand())


def test_matmul_prints_tvm_style_and_round_trips():
    text = roundtrip(MatmulModule)
    assert text.splitlines()[:5] == [
        "# from ingot.script import ir as I", "# from ingot.script import tir as T", "", "@I.ir_module",
        "class Module:",
    ]
    assert "for i, j, k in T.grid(128, 128, 128):" in text
    assert 'vi, vj, vk = T.axis.remap("SSR", [i, j, k])' in text
    assert "T.reads(C[vi, vj], A[vi, vk], B[vk, vj])" in text
    assert str(MatmulModule) == text == repr(MatmulModule)


def test_prim_func_decorator_and_print():
    @T.prim_func
    def add(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi] + T.float32(1)

    assert isinstance(add, PrimFunc)
    text = roundtrip(add)
    assert text.startswith("# from ingot.script import tir as T\n\n@T.prim_func\ndef main(")
    assert str(add) == text


def test_module_with_two_functions_and_attrs():
    @I.ir_module
    class Two:
        I.module_attrs({"target": "llvm"})

        @T.prim_func
        def add(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            for i in T.parallel(8):
                B[i] = A[i] + 1.0

        @T.prim_func(private=True)
        def mul(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            for i in T.vectorized(8):
                B[i] = A[i] * 2.0

    assert Two.function_names == ["add", "mul"]
    assert Two.attrs["target"] == "llvm"
    assert Two["mul"].body.kind == ForKind.VECTORIZED
    roundtrip(Two)


N = 64


def test_closure_and_global_constants_in_shapes():
    m = 32

    @T.prim_func
    def f(A: T.Buffer((N, m), "float32")):
        for i, j in T.grid(N, m // 2):
            A[i, j * 2] = 0.0

    assert [d.value for d in f.params[0].shape] == [64, 32]
    assert f.body.body.extent.value == 16
    roundtrip(f)


def test_symbolic_shapes_with_match_buffer():
    @T.prim_func
    def f(a: T.handle, b: T.handle):
        m = T.int32()
        n = T.int32()
        A = T.match_buffer(a, (m, n), "float32")
        B = T.match_buffer(b, (m, n), "float32")
        for i, j in T.grid(m, n):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * 2.0

    A, B = f.params
    assert isinstance(A, ir.Buffer) and isinstance(A.shape[0], Var)
    assert A.shape[0] is B.shape[0] and A.shape[1] is B.shape[1]
    text = roundtrip(f)
    assert "m = T.int32()" in text and "A = T.match_buffer(var_A, (m, n), \"float32\")" in text


def test_symbolic_var_and_scalar_param():
    @T.prim_func
    def f(a: T.handle, n: T.int32):
        A = T.match_buffer(a, (n,), "float32")
        for i in range(n):
            if i < n - 1:
                A[i] = T.Cast("float32", i)

    A, n = f.params
    assert A.shape[0] is n
    roundtrip(f)


def test_var_decl_by_t_var():
    @T.prim_func
    def f(a: T.handle):
        k = T.var("int64")
        A = T.match_buffer(a, (k,), "int8")
        for i in range(k):
            A[i] = T.int8(1)

    assert str(f.params[0].shape[0].dtype) == "int64"
    assert str(f.body.loop_var.dtype) == "int64"
    roundtrip(f)


def test_alloc_buffer_reads_writes_where_block_attr():
    @T.prim_func
    def f(A: T.Buffer((100,), "float32"), B: T.Buffer((100,), "float32")):
        X = T.alloc_buffer((100,), "float32", scope="local")
        for io, ii in T.grid(4, 32):
            with T.block("X"):
                vi = T.axis.spatial(100, io * 32 + ii)
                T.where(io * 32 + ii < 100)
                T.reads(A[vi])
                T.writes(X[vi])
                T.block_attr({"meta_schedule.tiling_structure": "SSRSRS", "k": 1})
                X[vi] = A[vi] * 3.0
        for i in range(100):
            with T.block("B"):
                vi = T.axis.spatial(100, i)
                B[vi] = X[vi]

    root = f.body.block
    assert root.name_hint == "root" and root.alloc_buffers[0].scope == "local"
    x_block = root.body.seq[0].body.body.block
    assert x_block.annotations["k"] == 1
    assert not structural_equal(f.body.block.body.seq[0].body.body.predicate, tir.const(True))
    text = roundtrip(f)
    assert 'X = T.alloc_buffer((100,), "float32", scope="local")' in text
    assert "T.where(io * 32 + ii < 100)" in text


def test_inferred_regions_relax_inner_loops():
    @T.prim_func
    def f(A: T.Buffer((16, 64), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = 0.0
                for k in range(64):
                    B[vi] = B[vi] + A[vi, k]

    block = f.body.block.body.body.block
    assert [str(r) for r in block.reads] == ["B[vi]", "A[vi, 0:64]"]
    assert [str(r) for r in block.writes] == ["B[vi]"]
    roundtrip(f)


def test_loop_kinds_annotations_thread_binding():
    @T.prim_func
    def f(A: T.Buffer((64, 32), "float32")):
        for bx in T.thread_binding(0, 64, thread="blockIdx.x"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                A[bx, tx] = 1.0
        for i in T.serial(2, 10, annotations={"pragma_auto_unroll_max_step": 16, "s": "x"}):
            for j in T.unroll(4):
                A[i, j] = 2.0
        for i in T.parallel(64):
            for j in T.vectorized(32):
                A[i, j] = 3.0

    loops = f.body.seq
    assert loops[0].kind == ForKind.THREAD_BINDING and loops[0].thread_binding == "blockIdx.x"
    assert loops[1].min.value == 2 and loops[1].extent.value == 8
    assert loops[1].annotations["pragma_auto_unroll_max_step"] == 16
    assert loops[1].body.kind == ForKind.UNROLLED
    text = roundtrip(f)
    assert 'T.thread_binding(64, thread="blockIdx.x")' in text


def test_symbolic_loop_bounds_cancel():
    @T.prim_func
    def f(a: T.handle, n: T.int32):
        A = T.match_buffer(a, (n,), "float32")
        for i in T.serial(1, n):
            A[i] = A[i - 1]
        for i in T.serial(n - 4, n):
            A[i] = 0.0

    assert_structural_equal(f.body.seq[0].extent, f.params[1] - 1)
    assert f.body.seq[1].extent.value == 4
    roundtrip(f)


def test_expressions_and_intrinsics():
    @T.prim_func
    def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), C: T.Buffer((8,), "int32"),
          D: T.Buffer((8,), "float16"), E: T.Buffer((8,), "bool")):
        for i in range(8):
            B[i] = T.exp(A[i]) + T.sqrt(A[i]) * T.tanh(A[i]) - T.log(A[i]) / T.sigmoid(A[i])
            B[i] = T.max(A[i], T.float32(0)) + T.min(A[i], T.float32("inf")) + T.pow(A[i], 2.0)
            B[i] = T.if_then_else(i < 4, A[i], T.Select(i > 6, A[i - 1], -1.5))
            C[i] = T.truncmod(i, 3) + T.floordiv(i, 2) + T.floormod(i, 5) + T.truncdiv(i, 3)
            C[i] = (i // 2) % 3 + T.bitwise_and(i, 7) + T.shift_left(i, 1) + T.abs(i - 4)
            D[i] = T.Cast("float16", A[i]) * T.float16(0.5)
            E[i] = (i < 3 and i != 1) or not (i >= 6) or 0 <= i < 2
            B[i] = T.call_extern("float32", "my_fn", A[i], 1)
            T.evaluate(T.call_extern("int32", "side_effect", i))
            B[i] = T.Let(x * x + 1.0, where={x: A[i]})
            C[i] = T.call_intrin("int32", "popcount", i)
            B[i] = T.float32("-inf") if False else T.float32(1e-05)
            B[i] = T.reinterpret("float32", C[i])
            B[i] = T.round(A[i]) + T.floor(A[i]) + T.ceil(A[i]) + T.erf(A[i]) + T.rsqrt(A[i])

    roundtrip(f)
    body = f.body.body.seq
    assert isinstance(body[2].value, tir.Call) and body[2].value.op == "if_then_else"
    assert isinstance(body[8], tir.Evaluate)
    assert isinstance(body[9].value, tir.Let)


def test_dtype_constructors():
    @T.prim_func
    def f(A: T.Buffer((4,), "int64"), B: T.Buffer((4,), "bfloat16"), C: T.Buffer((4,), "float64"),
          D: T.Buffer((4,), "uint8")):
        for i in range(T.int64(4)):
            A[i] = T.int64(3) + i
            B[i] = T.bfloat16(1.5)
            C[i] = T.float64("nan")
            D[i] = T.uint8(255)

    assert str(f.body.loop_var.dtype) == "int64"
    assert f.body.body.seq[0].value.a.value == 3
    roundtrip(f)


def test_vector_ramp_broadcast():
    @T.prim_func
    def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(16):
            B[T.Ramp(i * 4, 1, 4)] = A[T.Ramp(i * 4, 1, 4)] + T.Broadcast(T.float32(1), 4)

    store = f.body.body
    assert str(store.value.dtype) == "float32x4"
    roundtrip(f)


def test_let_statements_inside_blocks():
    @T.prim_func
    def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                x = A[vi] * 2.0
                y: T.float32 = x + 1.0
                B[vi] = x * y

    block = f.body.block.body.body.block
    assert isinstance(block.body, LetStmt) and isinstance(block.body.body, LetStmt)
    assert [str(r) for r in block.reads] == ["A[vi]"]
    roundtrip(f)


def test_if_else_assert_and_python_meta_conditions():
    use_bias = False

    @T.prim_func
    def f(A: T.Buffer((8,), "float32"), n: T.int32):
        assert n > 0, "n must be positive"
        for i in range(8):
            if i < n:
                A[i] = 1.0
            elif i == n:
                A[i] = 2.0
            else:
                A[i] = 3.0
            if use_bias:
                A[i] = A[i] + 1.0

    assert isinstance(f.body, tir.AssertStmt) and f.body.message == "n must be positive"
    loop = f.body.body
    assert isinstance(loop.body, IfThenElse) and isinstance(loop.body.else_case, IfThenElse)
    roundtrip(f)


def test_init_block_and_reduce_axis_explicit():
    @T.prim_func
    def f(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4,), "float32")):
        for i, k in T.grid(4, 16):
            with T.block("sum"):
                vi = T.axis.S(4, i)
                vk = T.axis.R(16, k)
                T.reads(A[vi, vk])
                T.writes(B[vi])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] += A[vi, vk]

    block = f.body.block.body.body.body.block
    assert [iv.kind for iv in block.iter_vars] == ["S", "R"]
    assert block.init is not None
    text = roundtrip(f)
    assert 'T.axis.remap("SR", [i, k])' in text


def test_axis_with_offset_domain_and_opaque_block():
    @T.prim_func
    def f(A: T.Buffer((16, 16), "float32")):
        for i in range(8):
            with T.block("shifted"):
                vi = T.axis.spatial((8, 16), i + 8)
                A[vi, 1] = 0.0 if False else A[vi, 0]
        with T.block("opaque"):
            T.reads(A[0:16, 0:16])
            T.writes(A[0:4, 0:16])
            for j in range(4):
                A[j, 0] = 1.0

    realize = f.body.block.body.seq[0].body
    assert realize.block.iter_vars[0].dom.min.value == 8
    assert realize.block.iter_vars[0].dom.extent.value == 8
    roundtrip(f)


def test_match_buffer_region_in_block():
    @T.prim_func
    def f(A: T.Buffer((16, 16), "float32")):
        for i in range(4):
            with T.block("tile"):
                vi = T.axis.spatial(4, i)
                sub = T.match_buffer(A[vi * 4:vi * 4 + 4, 0:16], (4, 16), "float32")
                for x, y in T.grid(4, 16):
                    sub[x, y] = 0.0

    block = f.body.block.body.body.block
    assert len(block.match_buffers) == 1
    assert block.match_buffers[0].source.region[0].extent.value == 4
    assert str(block.writes[0]) == "A[vi * 4:vi * 4 + 4, 0:16]"
    roundtrip(f)


def test_old_buffer_subscript_syntax():
    @T.prim_func
    def f(A: T.Buffer[(4,), "int32"]):
        for i in range(4):
            A[i] = i

    assert f.params[0].shape[0].value == 4
    roundtrip(f)


def test_size_vars_from_te_style_shapes_round_trip():
    n = ir.SizeVar("n")
    A = decl_buffer((n, 4), "float32", "A")
    i, j = Var("i"), Var("j")
    f = PrimFunc([A], For(i, 0, n, ForKind.SERIAL, For(j, 0, 4, ForKind.SERIAL, BufferStore(A, 0.0, [i, j]))))
    text = roundtrip(f)
    assert "n = T.int32(is_size_var=True)" in text
    assert isinstance(from_source(text).params[0].shape[0], ir.SizeVar)


def test_te_created_function_round_trips():
    from ingot import te
    A = te.placeholder((32, 32), name="A")
    B = te.placeholder((32, 32), name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((32, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((32, 32), lambda i, j: te.max(C[i, j], 0.0), name="D")
    roundtrip(te.create_prim_func([A, B, D]))
