"""Before/after tests written in TVMScript (STYLE §9)."""
from ingot.ir import IRModule, assert_structural_equal
from ingot.script import tir as T
from ingot.tir import BlockRealize
from ingot.tir import transform as tt


def _parse(make):
    return make()


def _body(func):
    # A block-free function may or may not be wrapped by the parser in an empty root block.
    body = func.body
    if isinstance(body, BlockRealize) and body.block.name_hint == "root" and not body.block.alloc_buffers:
        return body.block.body
    return body


def test_split_predicate_to_loops_tvmscript():
    def make():
        @T.prim_func
        def before(A: T.Buffer((100,), "float32"), B: T.Buffer((100,), "float32")):
            for i0, i1 in T.grid(7, 16):
                with T.block("B"):
                    vi = T.axis.spatial(100, i0 * 16 + i1)
                    T.where(i0 * 16 + i1 < 100)
                    B[vi] = A[vi] + T.float32(1)

        @T.prim_func
        def after(A: T.Buffer((100,), "float32"), B: T.Buffer((100,), "float32")):
            for i0, i1 in T.grid(7, 16):
                if i0 * 16 + i1 < 100:
                    B[i0 * 16 + i1] = A[i0 * 16 + i1] + T.float32(1)

        return before, after

    before, after = _parse(make)
    out = tt.ConvertBlocksToLoops()(IRModule({"main": before}))["main"]
    # params are defined on both sides: compare whole functions after unwrapping the root block
    assert_structural_equal(out.replace(body=_body(out)), after.replace(body=_body(after)))


def test_lower_init_block_tvmscript():
    def make():
        @T.prim_func
        def before(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
            for i, k in T.grid(8, 8):
                with T.block("B"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + A[vi, vk]

        @T.prim_func
        def after(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
            for i in range(8):
                B[i] = T.float32(0)  # hoisted out of the (innermost) reduce loop
                for k in range(8):
                    B[i] = B[i] + A[i, k]

        return before, after

    before, after = _parse(make)
    mod = IRModule({"main": before})
    out = tt.Sequential([tt.LowerInitBlock(), tt.ConvertBlocksToLoops()])(mod)["main"]
    assert_structural_equal(out.replace(body=_body(out)), after.replace(body=_body(after)))
