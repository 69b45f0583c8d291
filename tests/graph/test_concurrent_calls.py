"""Concurrent callers: several Python threads calling one compiled model get the outputs of
single-threaded calls, bit for bit (issue 18). Covers the AOT entry, the step-by-step interpreter,
`ingot.run` on one `Package`, and two packages called at once (the C entry releases the GIL)."""
import threading

import numpy as np
import pytest


import ingot  # noqa: E402
from ingot import graph as G  # noqa: E402

from ingot.testing.mlp import mlp_module, mlp_params  # noqa: E402

THREADS, CALLS = 4, 12
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def conv_module():
    """conv3x3 → relu → conv1x1 + residual → mean: a small conv net with a workspace."""
    rng = np.random.default_rng(3)
    x = G.Var("x", G.TensorStructInfo((1, 8, 12, 12), "float32"))
    w1 = G.const(rng.standard_normal((16, 8, 3, 3)).astype("float32") * 0.2)
    w2 = G.const(rng.standard_normal((16, 16, 1, 1)).astype("float32") * 0.2)
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(G.op.relu(bb.emit(G.op.conv2d(x, w1, padding=1))))
            b = bb.emit(G.op.add(bb.emit(G.op.conv2d(a, w2)), a))
            gv = bb.emit_output(G.op.mean(bb.emit(G.op.relu(b)), axis=(2, 3)))
        bb.emit_func_output(gv)
    return bb.get()


@pytest.fixture(scope="module")
def mlp_ex():
    return G.build(mlp_module(1, mlp_params(seed=2, scale=0.1)), "llvm -num-cores=2")


@pytest.fixture(scope="module")
def conv_ex():
    return G.build(conv_module(), "llvm -num-cores=2")


def _inputs(shape, n, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype("float32") for _ in range(n)]


def _hammer(call, inputs, expected):
    """THREADS threads, each calling ``call`` on every input (in a different order per thread),
    released together; returns the mismatches [(thread, input index)] and any exceptions."""
    start = threading.Barrier(THREADS)
    bad, errors = [], []

    def worker(t):
        try:
            start.wait()
            order = list(range(len(inputs)))[t:] + list(range(len(inputs)))[:t]
            for _ in range(CALLS // len(inputs) + 1):
                for i in order:
                    out = call(inputs[i])
                    if not np.array_equal(out, expected[i]):
                        bad.append((t, i))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return bad, errors


@pytest.mark.parametrize("model", ["mlp", "conv"])
@pytest.mark.parametrize("use_aot", [True, False])
def test_threads_calling_one_executor_get_single_threaded_outputs(model, use_aot, mlp_ex, conv_ex):
    ex, shape = (mlp_ex, (1, 784)) if model == "mlp" else (conv_ex, (1, 8, 12, 12))
    if use_aot:
        assert "main" in ex.aot
    main = G.Executor(ex, ingot.cpu(), use_aot=use_aot)["main"]
    inputs = _inputs(shape, 6, seed=4)
    expected = [main(x).numpy().copy() for x in inputs]
    assert not all(np.array_equal(expected[0], e) for e in expected[1:])  # inputs really differ
    bad, errors = _hammer(lambda x: main(x).numpy(), inputs, expected)
    assert not errors, errors
    assert not bad, f"{len(bad)} concurrent calls gave outputs that differ from single calls: {bad[:5]}"


def test_the_aot_state_pool_grows_only_to_the_calls_in_flight(mlp_ex):
    main = G.Executor(mlp_ex, ingot.cpu())["main"]
    x = _inputs((1, 784), 1, seed=5)[0]
    for _ in range(5):
        main(x)
    assert len(main.pool) == 1  # sequential calls reuse one workspace
    bad, errors = _hammer(lambda v: main(v).numpy(), [x], [main(x).numpy()])
    assert not bad and not errors
    assert 1 <= len(main.pool) <= THREADS


def test_outputs_are_never_reused_by_a_later_call(conv_ex):
    main = G.Executor(conv_ex, ingot.cpu())["main"]
    a, b = _inputs((1, 8, 12, 12), 2, seed=6)
    out_a = main(a).numpy()
    kept = out_a.copy()
    main(b)
    np.testing.assert_array_equal(out_a, kept)


def test_ingot_run_on_one_package_from_threads(mlp_ex):
    from ingot.workflow.model import Package, TensorInfo

    pkg = Package(mlp_ex, [TensorInfo("x", (1, 784), "float32")], [TensorInfo("y", (1, 10), "float32")], "llvm")
    inputs = _inputs((1, 784), 5, seed=7)
    expected = [ingot.run(pkg, {"x": x})["y"] for x in inputs]
    bad, errors = _hammer(lambda x: ingot.run(pkg, {"x": x})["y"], inputs, expected)
    assert not errors, errors
    assert not bad


def test_two_packages_called_from_two_threads(mlp_ex, conv_ex):
    m = G.Executor(mlp_ex)["main"]
    c = G.Executor(conv_ex)["main"]
    xm, xc = _inputs((1, 784), 1, 8)[0], _inputs((1, 8, 12, 12), 1, 9)[0]
    want_m, want_c = m(xm).numpy(), c(xc).numpy()
    results = {}

    def loop(key, fn, x, want):
        results[key] = all(np.array_equal(fn(x).numpy(), want) for _ in range(50))

    ts = [threading.Thread(target=loop, args=("m", m, xm, want_m)),
          threading.Thread(target=loop, args=("c", c, xc, want_c))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert results == {"m": True, "c": True}


def test_module_calls_release_the_gil(mlp_ex):
    """The library is a ctypes.CDLL (not PyDLL): a foreign call drops the GIL while C runs."""
    import ctypes

    lib = mlp_ex.lib._lib
    assert isinstance(lib, ctypes.CDLL) and not isinstance(lib, ctypes.PyDLL)
