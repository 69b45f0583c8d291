"""te API: tensors, computes, reducers, intrinsics, and the errors users meet."""
import pytest

from ingot import te
from ingot.ir import BufferLoad, Call, Cast, Max, Select, SizeVar, structural_equal


def test_placeholder_properties():
    n = te.var("n")
    A = te.placeholder((n, 4), name="A", dtype="float16")
    assert A.shape[0] is n and A.shape[1].value == 4
    assert (A.dtype, A.name, A.ndim, A.op.name) == ("float16", "A", 2, "A")
    assert A.op.output(0) is A and A.op.num_outputs == 1
    assert isinstance(te.size_var("m"), SizeVar)


def test_indexing_forms():
    A = te.placeholder((3, 4), name="A")
    assert isinstance(A[1, 2], BufferLoad)
    assert structural_equal(A[1][2], A[1, 2])
    assert structural_equal(A(1, 2), A[1, 2])
    with pytest.raises(IndexError, match="'A' has 2 dimensions"):
        A[1, 2, 3]
    with pytest.raises(TypeError, match="indices must be scalar integers"):
        A[1, te.const(0.5)]
    with pytest.raises(TypeError, match="'A' has 2 dimensions but is indexed with 1"):
        A[1] + 1.0


def test_compute_axes_named_after_lambda_args():
    A = te.placeholder((2, 3, 4), name="A")
    B = te.compute(A.shape, lambda n, c, h: A[n, c, h] + 1.0, name="B", tag="elemwise")
    assert [iv.var.name for iv in B.op.axis] == ["n", "c", "h"]
    assert B.op.tag == "elemwise" and B.op.input_tensors == [A]
    C = te.compute(A.shape, lambda *idx: A[idx] * 2.0)
    assert [iv.var.name for iv in C.op.axis] == ["i0", "i1", "i2"] and C.name == "compute"


def test_compute_output_dtype_follows_body_and_astype():
    A = te.placeholder((4,), name="A", dtype="int8")
    B = te.compute((4,), lambda i: A[i].astype("float16") * 2.0, name="B")
    assert B.dtype == "float16"
    assert isinstance(B.op.body[0].a, Cast)
    C = te.compute((4,), lambda i: A[i] > 0, name="C")
    assert C.dtype == "bool"


def test_intrinsics_reexported():
    A = te.placeholder((4,), name="A")
    for fn in (te.exp, te.log, te.sqrt, te.rsqrt, te.tanh, te.erf, te.sigmoid, te.abs, te.floor, te.ceil, te.round):
        assert isinstance(fn(A[0]), Call)
    assert isinstance(te.power(A[0], 2.0), Call) and isinstance(te.pow(A[0], 2.0), Call)
    assert isinstance(te.select(A[0] > 0, A[0], 0.0), Select)
    assert te.if_then_else(A[0] > 0, A[0], 0.0).op == "if_then_else"
    assert str(te.max_value("int8").value) == "127" and te.min_value("uint8").value == 0
    assert isinstance(te.max(A[0], A[1]), Max)  # a reducer called on values combines them
    i = te.var("i")
    assert str(te.floordiv(i, 2)) == "i // 2" and str(te.floormod(i, 2)) == "i % 2"
    assert str(te.all(i > 0, i < 4)) == "i > 0 and i < 4"


def test_wrong_number_of_lambda_args():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(TypeError, match="'B': the shape has 2 dimension.* takes 1 index argument"):
        te.compute((4, 4), lambda i: A[i, 0], name="B")


def test_reduce_axis_outside_reducer():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    with pytest.raises(ValueError, match="reduce axis 'k' is used outside a reduction"):
        te.compute((4,), lambda i: A[i, k], name="B")


def test_reduce_axis_not_listed():
    A = te.placeholder((4, 8, 8), name="A")
    k1, k2 = te.reduce_axis((0, 8), name="k1"), te.reduce_axis((0, 8), name="k2")
    with pytest.raises(ValueError, match="'k2' is used in te.sum but not listed"):
        te.compute((4,), lambda i: te.sum(A[i, k1, k2], axis=k1), name="B")


def test_reduction_must_be_whole_body():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    with pytest.raises(ValueError, match="nested inside a larger expression"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) / 8.0, name="mean")


def test_reduce_over_spatial_axis_rejected():
    A = te.placeholder((4, 8), name="A")
    with pytest.raises(ValueError, match="reduce over axes made with te.reduce_axis"):
        te.compute((4,), lambda i: te.sum(A[i, 0], axis=te.compute((4,), lambda j: A[j, 0]).op.axis[0]))


def test_reducer_dtype_mismatch_needs_cast():
    bad = te.comm_reducer(lambda x, y: x + y, lambda t: te.const(0.0, "float32"), name="bad")
    A = te.placeholder((4, 8), name="A", dtype="int32")
    k = te.reduce_axis((0, 8), name="k")
    with pytest.raises(TypeError, match="identity element .* float32 .* int32; mixing dtypes needs an explicit cast"):
        te.compute((4,), lambda i: bad(A[i, k], axis=k))
    # with the cast, it is fine
    B = te.compute((4,), lambda i: bad(A[i, k].astype("float32"), axis=k))
    assert B.dtype == "float32"


def test_placeholder_missing_from_args():
    A = te.placeholder((4,), name="A")
    W = te.placeholder((4,), name="W")
    B = te.compute((4,), lambda i: A[i] * W[i], name="B")
    with pytest.raises(ValueError, match="placeholder 'W' \\(read by te.compute 'B'\\) is not in args"):
        te.create_prim_func([A, B])


def test_bad_args():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="argument 1 is a str"):
        te.create_prim_func([A, "B"])
    with pytest.raises(ValueError, match="listed twice"):
        te.create_prim_func([A, A])


def test_triangular_reduce_axis_not_supported_yet():
    A = te.placeholder((8, 8), name="A")
    # the domain of k depends on the spatial axis i: TVM nests blocks; Ingot says so clearly
    def f(i):
        k = te.reduce_axis((0, i + 1), name="k")
        return te.sum(A[i, k], axis=k)
    C = te.compute((8,), f, name="C")
    with pytest.raises(NotImplementedError, match="Use a rectangular axis with a where= condition"):
        te.create_prim_func([A, C])
