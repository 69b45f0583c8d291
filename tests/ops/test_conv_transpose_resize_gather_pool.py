"""conv2d_transpose, resize2d, split, gather_elements, argmax/argmin, pooling with ceil_mode:
compiled TE computes vs numpy (and each op's registered numpy reference vs an independent one),
with symbolic batch sizes. Several ops share one build to keep the file fast."""
import numpy as np
import pytest


from ingot import graph as G  # noqa: E402
from ingot.graph.op_registry import get_op_def  # noqa: E402
from ingot.ir import Var as SymVar  # noqa: E402
from ingot.ir.error import IRError  # noqa: E402

rng = np.random.default_rng(21)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


def build(make, sinfos, pipeline="legalize"):
    """``main(*params) = make(bb, *params)`` (a value or a tuple of values), built; returns the runner."""
    params = [G.Var(f"p{i}", s) for i, s in enumerate(sinfos)]
    bb = G.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = make(bb, *params)
            gv = bb.emit_output(G.Tuple(list(out)) if isinstance(out, (list, tuple)) else out)
        bb.emit_func_output(gv)
    ex = G.build(bb.get(), "llvm", pipeline=G.transform.LegalizeOps() if pipeline == "legalize" else "default")
    run = G.Executor(ex)["main"]

    def call(*args):
        out = run(*args)
        return tuple(o.numpy() for o in out) if isinstance(out, tuple) else out.numpy()

    return call


def _conv_transpose_loop(x, w, s, p, op, d, groups):
    """Independent reference: scatter every input pixel through the kernel (PyTorch's definition)."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    oh = (h - 1) * s - 2 * p + d * (kh - 1) + op + 1
    ow = (wd - 1) * s - 2 * p + d * (kw - 1) + op + 1
    out = np.zeros((n, og * groups, oh, ow))
    cpg = c // groups
    for ci in range(c):
        g = ci // cpg
        for y in range(h):
            for xx in range(wd):
                for ky in range(kh):
                    for kx in range(kw):
                        oy, ox = y * s - p + ky * d, xx * s - p + kx * d
                        if 0 <= oy < oh and 0 <= ox < ow:
                            out[:, g * og:(g + 1) * og, oy, ox] += x[:, ci, y, xx, None] * w[ci, :, ky, kx]
    return out.astype("float32")


@pytest.mark.parametrize("s, p, op, d, groups", [(2, 1, 1, 1, 1), (1, 0, 0, 2, 2), (3, 2, 2, 1, 1)])
def test_conv2d_transpose(s, p, op, d, groups):
    x = rng.standard_normal((2, 4, 5, 5)).astype("float32")
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    want = _conv_transpose_loop(x, w, s, p, op, d, groups)
    attrs = dict(strides=s, padding=p, output_padding=op, dilation=d, groups=groups)
    call = G.op.conv2d_transpose(G.Var("x", T(x.shape)), G.Var("w", T(w.shape)), **attrs)
    assert call.struct_info.shape == want.shape
    np.testing.assert_allclose(get_op_def("conv2d_transpose").numpy([x, w], call.attrs), want, rtol=1e-5, atol=1e-5)
    if (s, groups) == (3, 1):
        return  # numeric reference only: keep the number of builds down
    n = SymVar("n", "int64")
    run = build(lambda bb, a, b: G.op.conv2d_transpose(a, b, **attrs), [T((n, 4, 5, 5)), T(w.shape)])
    np.testing.assert_allclose(run(x, w), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run(x[:1], w), want[:1], rtol=1e-5, atol=1e-5)


def test_conv2d_transpose_errors():
    x = G.Var("x", T((1, 4, 5, 5)))
    with pytest.raises(IRError, match="weight dim 0"):
        G.op.conv2d_transpose(x, G.Var("w", T((3, 4, 3, 3))))
    with pytest.raises(IRError, match="output_padding"):
        G.op.conv2d_transpose(x, G.Var("w", T((4, 4, 3, 3))), strides=1, output_padding=1)


_RESIZE_CASES = [
    dict(method="nearest_neighbor", coordinate_transformation_mode="asymmetric"),
    dict(method="nearest_neighbor", coordinate_transformation_mode="half_pixel", rounding_method="round_prefer_ceil"),
    dict(method="linear", coordinate_transformation_mode="half_pixel"),
    dict(method="linear", coordinate_transformation_mode="align_corners"),
]


def _resize_independent(x, size, method, coordinate_transformation_mode, rounding_method=""):
    """Per-pixel reference written from the ONNX Resize definition (NCHW)."""
    n, c, h, w = x.shape
    out = np.zeros((n, c) + tuple(size), "float64")
    mode = coordinate_transformation_mode

    def src(o, n_in, n_out):
        if mode == "asymmetric":
            return o * n_in / n_out
        if mode == "align_corners":
            return 0.0 if n_out == 1 else o * (n_in - 1) / (n_out - 1)
        return (o + 0.5) * n_in / n_out - 0.5

    for oy in range(size[0]):
        for ox in range(size[1]):
            cy, cx = src(oy, h, size[0]), src(ox, w, size[1])
            if method == "nearest_neighbor":
                r = np.floor if rounding_method in ("", "floor") else (lambda v: np.floor(v + 0.5))
                out[:, :, oy, ox] = x[:, :, min(max(int(r(cy)), 0), h - 1), min(max(int(r(cx)), 0), w - 1)]
            else:
                y0, x0 = int(np.floor(cy)), int(np.floor(cx))
                fy, fx = cy - y0, cx - x0
                cl = lambda i, m: min(max(i, 0), m - 1)  # noqa: E731
                v = lambda yy, xx, cl=cl: x[:, :, cl(yy, h), cl(xx, w)]  # noqa: E731
                out[:, :, oy, ox] = ((v(y0, x0) * (1 - fx) + v(y0, x0 + 1) * fx) * (1 - fy)
                                     + (v(y0 + 1, x0) * (1 - fx) + v(y0 + 1, x0 + 1) * fx) * fy)
    return out.astype("float32")


def test_resize2d_modes_one_build():
    x = rng.standard_normal((2, 3, 4, 5)).astype("float32")
    size = (7, 10)
    wants = [_resize_independent(x, size, **case) for case in _RESIZE_CASES]
    for case, want in zip(_RESIZE_CASES, wants):
        call = G.op.resize2d(G.Var("x", T(x.shape)), size, **case)
        np.testing.assert_allclose(get_op_def("resize2d").numpy([x], call.attrs), want, rtol=1e-5, atol=1e-6)
    n = SymVar("n", "int64")
    run = build(lambda bb, a: [bb.emit(G.op.resize2d(a, size, **case)) for case in _RESIZE_CASES],
                [T((n, 3, 4, 5))])
    for got, want in zip(run(x), wants):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # NHWC with the PyTorch aliases, checked through the registered reference.
    call = G.op.resize2d(G.Var("x", T((1, 4, 5, 3))), (8, 10), layout="NHWC", method="bilinear")
    assert call.attrs["method"] == "linear" and call.struct_info.shape == (1, 8, 10, 3)
    xh = x[:1].transpose(0, 2, 3, 1)
    np.testing.assert_allclose(get_op_def("resize2d").numpy([xh], call.attrs),
                               _resize_independent(x[:1], (8, 10), "linear", "half_pixel").transpose(0, 2, 3, 1),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(IRError, match="coordinate_transformation_mode"):
        G.op.resize2d(G.Var("x", T(x.shape)), size, coordinate_transformation_mode="tf_crop_and_resize")


def test_split_gather_elements_argmax_one_build():
    x = rng.standard_normal((3, 10)).astype("float32")
    x[1, 2] = x[1, 7] = 9.0  # a tie: the first index wins, the last with select_last_index
    idx = rng.integers(-10, 10, (3, 4)).astype("int64")
    n = SymVar("n", "int64")

    def make(bb, a, i):
        parts = bb.emit(G.op.split(a, [3, 7], axis=1))
        halves = bb.emit(G.op.split(a, 2, axis=-1))
        return [bb.emit(G.TupleGetItem(parts, 0)), bb.emit(G.TupleGetItem(parts, 2)),
                bb.emit(G.TupleGetItem(halves, 1)),
                bb.emit(G.op.gather_elements(a, i, axis=1)),
                bb.emit(G.op.argmax(a, axis=1)), bb.emit(G.op.argmin(a, axis=0, keepdims=True)),
                bb.emit(G.op.argmax(a, axis=1, select_last_index=True)), bb.emit(G.op.argmax(a))]

    run = build(make, [T((n, 10)), T((n, 4), "int64")])
    got = run(x, idx)
    want = [x[:, :3], x[:, 7:], x[:, 5:], np.take_along_axis(x, np.where(idx < 0, idx + 10, idx), 1),
            x.argmax(1), x.argmin(0)[None], 9 - np.flip(x, 1).argmax(1), np.asarray(x.argmax())]
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, k
        np.testing.assert_array_equal(g, w.astype(g.dtype), err_msg=f"output {k}")
    assert got[4].dtype == np.int64 and got[6][1] == 7 and got[4][1] == 2
    # The registered numpy references agree.
    a = G.Var("a", T(x.shape))
    for call, w in [(G.op.argmax(a, axis=1, select_last_index=True), want[6]), (G.op.argmin(a, 0, True), want[5]),
                    (G.op.gather_elements(a, G.Var("i", T(idx.shape, "int64")), 1), want[3])]:
        args = [x] if len(call.args) == 1 else [x, idx]
        np.testing.assert_array_equal(get_op_def(call.op.name).numpy(args, call.attrs), w)
    with pytest.raises(IRError, match="equal sections"):
        G.op.split(a, 3, axis=1)


def test_argmax_fused_after_elementwise():
    # Default pipeline: negative (elementwise) fuses into the tuple reduction of argmax.
    x = rng.standard_normal((4, 6)).astype("float32")
    run = build(lambda bb, a: G.op.argmax(bb.emit(G.op.negative(a)), axis=-1, keepdims=True), [T(x.shape)], "default")
    np.testing.assert_array_equal(run(x), (-x).argmax(-1)[:, None])


def _torch_pool(x, kind, k, s, p, count_include_pad):
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x)
    if kind == "max":
        return torch.nn.functional.max_pool2d(t, k, s, p, ceil_mode=True).numpy()
    return torch.nn.functional.avg_pool2d(t, k, s, p, ceil_mode=True, count_include_pad=count_include_pad).numpy()


def test_pool_ceil_mode():
    x = rng.standard_normal((1, 2, 7, 8)).astype("float32")
    cases = [("max", 3, 2, 0, False), ("max", 2, 2, 1, False), ("avg", 3, 2, 1, False), ("avg", 3, 2, 1, True),
             ("avg", 2, 3, 0, True)]

    def call_of(a, kind, k, s, p, cip):
        if kind == "max":
            return G.op.max_pool2d(a, k, s, p, ceil_mode=True)
        return G.op.avg_pool2d(a, k, s, p, count_include_pad=cip, ceil_mode=True)

    calls = [call_of(G.Var("x", T(x.shape)), *c) for c in cases]
    refs = [get_op_def(c.op.name).numpy([x], c.attrs) for c in calls]
    try:
        for case, ref in zip(cases, refs):
            np.testing.assert_allclose(ref, _torch_pool(x, *case), rtol=1e-5, atol=1e-6, err_msg=str(case))
    except pytest.skip.Exception:
        pass
    run = build(lambda bb, a: [bb.emit(call_of(a, *c)) for c in cases], [T(x.shape)])
    for case, got, ref in zip(cases, run(x), refs):
        assert got.shape == ref.shape, case
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6, err_msg=str(case))
    with pytest.raises(IRError, match="static H and W"):
        G.op.max_pool2d(G.Var("y", T((1, 2, SymVar("h", "int64"), 8))), 2, ceil_mode=True)
