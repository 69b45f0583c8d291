"""Core IR: data types, expression construction, structural equality and hashing, visitors."""
import pickle

import pytest

from ingot import tir
from ingot.ir import (
    Add, DataType, FloatImm, IntImm, Mutator, StructuralMismatch, Var, assert_structural_equal, collect_vars,
    const, convert, decl_buffer, structural_equal, structural_hash, substitute,
)


def test_dtype_parse_and_print():
    assert str(DataType("float32x16")) == "float32x16"
    assert DataType("bool").bits == 1 and DataType("bool").bytes == 1
    assert DataType("bfloat16").is_float
    assert DataType("int8") == "int8"
    with pytest.raises(ValueError, match="unknown data type"):
        DataType("floaty")
    with pytest.raises(ValueError, match="bit width"):
        DataType("int")


def test_dtype_is_picklable_and_hashable():
    t = DataType("uint8x4")
    assert pickle.loads(pickle.dumps(t)) == t
    assert len({DataType("float32"), DataType("float32")}) == 1


def test_operator_overloads_build_nodes_and_fold_constants():
    i = Var("i")
    e = i * 4 + 2
    assert isinstance(e, Add)
    assert str(e) == "i * 4 + 2"
    assert (const(3) + 4).value == 7
    assert (const(7) // 2).value == 3 and (const(-7) // 2).value == -4 and (const(-7) % 2).value == 1
    assert str((i + 1) * 2) == "(i + 1) * 2"
    assert str(i - (i - 1)) == "i - (i - 1)"


def test_type_promotion():
    i = Var("i", "int32")
    x = Var("x", "float32")
    assert str((i * 0.5).dtype) == "float32"
    assert str((i + Var("n", "int64")).dtype) == "int64"
    assert str((x + 1).dtype) == "float32"
    assert str((Var("h", "float16") * 2.0).dtype) == "float16"


def test_eq_is_identity_in_if_and_node_in_expr():
    i, j = Var("i"), Var("j")
    assert bool(i == i) and not bool(i == j)
    cond = convert(i == j)
    assert str(cond) == "i == j" and str(cond.dtype) == "bool"
    with pytest.raises(ValueError, match="Python bool"):
        bool(i < j)


def test_nodes_are_immutable():
    i = Var("i")
    with pytest.raises(AttributeError, match="immutable"):
        i.name = "j"  # type: ignore[misc]
    e = i + 1
    assert e.replace(b=IntImm("int32", 2)).b.value == 2
    assert e.replace(b=e.b) is e


def test_structural_equal_alpha_equivalence_in_functions():
    def make():
        n = Var("n")
        A = decl_buffer((n, 4), "float32", "A")
        B = decl_buffer((n, 4), "float32", "B")
        i, j = Var("i"), Var("j")
        body = tir.For(i, 0, n, "serial", tir.For(j, 0, 4, "serial", tir.BufferStore(B, A[i, j] * 2.0, [i, j])))
        return tir.PrimFunc([A, B], body, {"global_symbol": "main"})

    f, g = make(), make()
    assert structural_equal(f, g)
    assert structural_hash(f) == structural_hash(g)
    # A different constant breaks equality and the hash.
    h = g.replace(body=g.body.replace(extent=g.body.extent))
    assert structural_equal(f, h)


def test_structural_mismatch_reports_path():
    i, j = Var("i"), Var("j")
    with pytest.raises(StructuralMismatch, match="lhs"):
        assert_structural_equal(i + 1, j + 2, map_free_vars=True)


def test_free_vars_must_match_unless_mapped():
    i, j = Var("i"), Var("j")
    assert not structural_equal(i + 1, j + 1)
    assert structural_equal(i + 1, j + 1, map_free_vars=True)
    assert not structural_equal(i + j, i + i, map_free_vars=True)


def test_structural_hash_is_stable_and_distinguishes():
    x = Var("x", "float32")
    assert structural_hash(x * 2.0, True) != structural_hash(x * 3.0, True)
    assert structural_hash(FloatImm("float32", 1.0)) != structural_hash(FloatImm("float64", 1.0))
    assert len(structural_hash(x, True)) == 64


def test_mutator_rebuilds_only_changed():
    i, j = Var("i"), Var("j")
    e = i * 2 + 1

    class Rename(Mutator):
        def visit_Var(self, node):
            return j if node is i else node

    out = Rename().visit(tir.Cast("float32", e))
    assert str(out) == 'T.Cast("float32", j * 2 + 1)'
    assert Mutator().visit(e) is e


def test_substitute_and_collect_vars():
    i, j = Var("i"), Var("j")
    assert str(substitute(i * 2 + j, {i: j + 1})) == "(j + 1) * 2 + j"
    assert [v.name for v in collect_vars(i * j + i)] == ["i", "j"]


def test_buffer_indexing_and_regions():
    n = Var("n")
    A = decl_buffer((n, 8), "float32", "A")
    assert str(A[1, 2]) == "A[1, 2]"
    region = A[0:4, 3]
    assert [r.extent.value for r in region.region] == [4, 1]
    with pytest.raises(IndexError, match="2 dimensions"):
        A[1]
    assert [str(s) for s in A.compact_strides()] == ["8", "1"]


def test_store_checks_dtype():
    A = decl_buffer((4,), "float32", "A")
    with pytest.raises(Exception, match="cast it"):
        tir.BufferStore(A, Var("i"), [0])


def test_intrinsics_check_argument_types():
    with pytest.raises(TypeError, match="floating-point"):
        tir.exp(Var("i"))
    x = Var("x", "float32")
    assert str(tir.isnan(x).dtype) == "bool"
    assert str(tir.pow(x, 2)) == "T.pow(x, 2.0)"


def test_nodes_pickle():
    n = Var("n")
    A = decl_buffer((n,), "float32", "A")
    e = A[n - 1] + 1.0
    e2 = pickle.loads(pickle.dumps(e))
    assert structural_equal(e, e2, map_free_vars=True)


def test_schedule_error_prints_tvmscript_with_marked_loop():
    import ingot
    from ingot import te

    A = te.placeholder((64, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    B = te.compute((64,), lambda i: te.sum(A[i, k], axis=k), name="B")
    sch = ingot.tir.Schedule(te.create_prim_func([A, B]))
    _, reduce_loop = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ingot.tir.ScheduleError) as info:
        sch.parallel(reduce_loop)
    lines = str(info.value).splitlines()
    loop_line = next(i for i, line in enumerate(lines) if line.strip() == "for k in range(64):")
    assert set(lines[loop_line + 1].strip()) == {"^"}
    assert "@T.prim_func" in str(info.value)
