"""Small workloads shared by the tuning tests."""


def matmul_func(n=64, m=64, k=64, dtype="float32"):
    from ingot import te

    A = te.placeholder((n, k), dtype, name="A")
    B = te.placeholder((k, m), dtype, name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def add_func(n=128):
    from ingot import te

    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    return te.create_prim_func([A, B])
