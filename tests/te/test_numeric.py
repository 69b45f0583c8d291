"""TE programs built and run, compared with numpy."""
import numpy as np

import ingot
from ingot import te  # noqa: E402

RNG = np.random.default_rng(0)


def run(func, *arrays):
    """Build ``func`` for the CPU, call it on ``arrays`` (inputs and preallocated outputs), return numpy."""
    mod = ingot.build(func, target="llvm")
    args = [ingot.nd.array(a) for a in arrays]
    mod["main"](*args)
    return [a.numpy() for a in args]


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def test_elementwise():
    A = te.placeholder((31, 17), name="A")
    B = te.placeholder((31, 17), name="B")
    C = te.compute((31, 17), lambda i, j: A[i, j] * B[i, j] + 1.0, name="C")
    a, b = rand(31, 17), rand(31, 17)
    *_, c = run(te.create_prim_func([A, B, C]), a, b, np.zeros((31, 17), "float32"))
    np.testing.assert_allclose(c, a * b + 1.0, rtol=1e-5, atol=1e-6)  # FMA contraction


def test_matmul():
    A = te.placeholder((64, 48), name="A")
    B = te.placeholder((48, 32), name="B")
    k = te.reduce_axis((0, 48), name="k")
    C = te.compute((64, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    a, b = rand(64, 48), rand(48, 32)
    *_, c = run(te.create_prim_func([A, B, C]), a, b, np.zeros((64, 32), "float32"))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def softmax_te(m, n):
    A = te.placeholder((m, n), name="A")
    k1 = te.reduce_axis((0, n), name="k1")
    M = te.compute((m,), lambda i: te.max(A[i, k1], axis=k1), name="M")
    E = te.compute((m, n), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
    k2 = te.reduce_axis((0, n), name="k2")
    S = te.compute((m,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    O = te.compute((m, n), lambda i, j: E[i, j] / S[i], name="O")
    return A, O


def test_softmax():
    A, O = softmax_te(8, 33)
    a = rand(8, 33) * 4
    *_, o = run(te.create_prim_func([A, O]), a, np.zeros((8, 33), "float32"))
    ref = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(o, ref / ref.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_layernorm():
    m, n, eps = 6, 40, 1e-5
    A = te.placeholder((m, n), name="A")
    G = te.placeholder((n,), name="gamma")
    Bt = te.placeholder((n,), name="beta")
    k = te.reduce_axis((0, n), name="k")
    S = te.compute((m,), lambda i: te.sum(A[i, k], axis=k), name="S")
    Q = te.compute((m,), lambda i: te.sum(A[i, k] * A[i, k], axis=k), name="Q")
    mean = te.compute((m,), lambda i: S[i] / float(n), name="mean")
    var = te.compute((m,), lambda i: Q[i] / float(n) - mean[i] * mean[i], name="var")
    O = te.compute((m, n), lambda i, j: (A[i, j] - mean[i]) * te.rsqrt(var[i] + eps) * G[j] + Bt[j], name="O")
    a, g, b = rand(m, n), rand(n), rand(n)
    *_, o = run(te.create_prim_func([A, G, Bt, O]), a, g, b, np.zeros((m, n), "float32"))
    mu, sd = a.mean(axis=1, keepdims=True), np.sqrt(a.var(axis=1, keepdims=True) + eps)
    np.testing.assert_allclose(o, (a - mu) / sd * g + b, rtol=1e-4, atol=1e-4)


def test_conv2d_nchw_padding():
    N, C, H, W, K, R, pad = 1, 3, 9, 9, 4, 3, 1
    X = te.placeholder((N, C, H, W), name="X")
    Wt = te.placeholder((K, C, R, R), name="W")
    P = te.compute(
        (N, C, H + 2 * pad, W + 2 * pad),
        lambda n, c, h, w: te.if_then_else(
            te.all(h >= pad, h < H + pad, w >= pad, w < W + pad), X[n, c, h - pad, w - pad], 0.0),
        name="pad",
    )
    rc, rh, rw = te.reduce_axis((0, C), "rc"), te.reduce_axis((0, R), "rh"), te.reduce_axis((0, R), "rw")
    Y = te.compute((N, K, H, W), lambda n, k, h, w: te.sum(P[n, rc, h + rh, w + rw] * Wt[k, rc, rh, rw],
                                                           axis=[rc, rh, rw]), name="Y")
    x, wt = rand(N, C, H, W), rand(K, C, R, R)
    *_, y = run(te.create_prim_func([X, Wt, Y]), x, wt, np.zeros((N, K, H, W), "float32"))
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ref = np.zeros((N, K, H, W), "float32")
    for r in range(R):
        for s in range(R):
            ref += np.einsum("nchw,kc->nkhw", xp[:, :, r:r + H, s:s + W], wt[:, :, r, s])
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_symbolic_shapes_two_calls():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    mod = ingot.build(te.create_prim_func([A, B]), target="llvm")
    for size in (5, 17):
        a = rand(size)
        b = ingot.nd.array(np.zeros(size, "float32"))
        mod["main"](ingot.nd.array(a), b)
        np.testing.assert_allclose(b.numpy(), a * 2 + 1, rtol=1e-5, atol=1e-6)


def test_where_and_argmax():
    A = te.placeholder((5, 7), name="A")
    k = te.reduce_axis((0, 7), name="k")
    T = te.compute((5,), lambda i: te.sum(A[i, k], axis=k, where=k <= i), name="T")

    def fcombine(x, y):
        pick = x[1] >= y[1]
        return te.select(pick, x[0], y[0]), te.select(pick, x[1], y[1])

    argmax = te.comm_reducer(fcombine, lambda t0, t1: (te.const(-1, t0), te.min_value(t1)), name="argmax")
    k2 = te.reduce_axis((0, 7), name="k2")
    idx, _ = te.compute((5,), lambda i: argmax((k2, A[i, k2]), axis=k2), name="AM")
    a = rand(5, 7)
    *_, t, am = run(te.create_prim_func([A, T, idx]), a, np.zeros(5, "float32"), np.zeros(5, "int32"))
    np.testing.assert_allclose(t, np.tril(a).sum(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(am, a.argmax(axis=1))
