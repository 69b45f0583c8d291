"""`SmallGemm` (tunable register tile + k unrolling of small GEMMs) and the runner's aligned
inputs / fastest-window records (no timing asserts)."""

import numpy as np

from ingot.testing.kernels import matmul_func  # noqa: E402

import ingot  # noqa: E402
from ingot.ir import structural_equal  # noqa: E402
from ingot.tir.schedule import Schedule  # noqa: E402
from ingot.tir.schedule.trace import Trace  # noqa: E402
from ingot.tune.mutator import MutateTileSize  # noqa: E402
from ingot.tune.schedule_rule import SmallGemm  # noqa: E402
from ingot.tune.schedule_rule.blocked_gemm import MARK, SEEDED  # noqa: E402
from ingot.tune.tune_context import TuneContext  # noqa: E402

#: The design spaces are the ones of an AVX-512 CPU (32 registers, 48 KiB L1d: the tiles these tests
#: spell out); the schedules are built and run for the host (16-lane code runs on an AVX2 host too).
TARGET = "llvm -mcpu=sapphirerapids -num-cores=2"
HOST = "llvm -num-cores=2"


def _space(shape):
    ctx = TuneContext(matmul_func(*shape), TARGET, seed=0)
    return ctx, ctx.generate_design_space()


def _ann(sch, key):
    return [i.inputs[2] for i in sch.trace.insts if i.kind.name == "annotate" and len(i.inputs) >= 3
            and i.inputs[1] == key]


def test_space_of_128_cubed_has_seeded_small_branches_with_unrolled_k():
    _, spaces = _space((128, 128, 128))
    small = [s for s in spaces if _ann(s, MARK)]
    assert [_ann(s, MARK)[0] for s in small] == ["small 8x2", "small 12x2", "small 4x4", "small 6x4"]
    for s in small:
        assert _ann(s, SEEDED)
        tiles = [tuple(s.trace.decisions[i]) for i in s.trace.insts if i.kind.name == "sample_perfect_tile"]
        assert tiles == [(32, 4)]    # k = 128 split (ko, ki), ki = SEED_KU unrolled
    # MultiLevelTiling's branches and the decision-free default are still there
    assert any("meta_schedule.tiling_structure" in str(s.trace) for s in spaces)
    assert any(not s.trace.decisions for s in spaces)


def test_small_branches_compute_the_matmul_and_replay_from_json():
    _, spaces = _space((128, 128, 128))
    rng = np.random.default_rng(0)
    a, b = rng.random((128, 128), dtype="float32"), rng.random((128, 128), dtype="float32")
    for sch in [s for s in spaces if _ann(s, MARK)][:2]:    # 8x2 (M divides) and 12x2 (ragged M)
        lib = ingot.build(sch.mod, target=HOST)
        c = np.zeros((128, 128), "float32")
        lib["main"](a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
        replayed = Schedule(matmul_func(128, 128, 128))
        Trace.from_json(sch.trace.as_json()).apply_to_schedule(replayed)
        assert structural_equal(replayed.mod, sch.mod)


def test_unroll_depth_is_a_mutable_decision():
    ctx, spaces = _space((64, 64, 96))
    sch = next(s for s in spaces if _ann(s, MARK))
    mut = MutateTileSize()
    mut.initialize_with_tune_context(ctx)
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(20):
        new = mut.apply(sch.trace, rng)
        if new is not None:
            seen.add(tuple(next(iter(new.decisions.values()))))
    assert seen and all(ko * ki == 96 and ki <= 16 for ko, ki in seen)


def test_rule_leaves_large_and_batched_gemms_alone():
    from ingot import te

    ctx, _ = _space((64, 64, 64))
    rule = SmallGemm()
    rule.initialize_with_tune_context(ctx)
    big = Schedule(matmul_func(256, 256, 256))   # BlockedGemm's (is_large_gemm)
    assert rule.apply(big, big.get_block("C")) == [big]
    A = te.placeholder((4, 32, 32), name="A")
    B = te.placeholder((4, 32, 32), name="B")
    r = te.reduce_axis((0, 32), name="k")
    C = te.compute((4, 32, 32), lambda n, i, j: te.sum(A[n, i, r] * B[n, r, j], axis=r), name="C")
    batched = Schedule(te.create_prim_func([A, B, C]))
    assert rule.apply(batched, batched.get_block("C")) == [batched]


def test_runner_inputs_are_64_byte_aligned():
    from ingot.tune.runner._child import _aligned_copy, _random_args

    arrays = _random_args([("float32", (128, 128)), ("float32", (7, 3))], "wl")
    assert all(a.ctypes.data % 64 == 0 and a.flags.c_contiguous for a in arrays)
    copy = _aligned_copy(arrays[0])
    assert copy.ctypes.data % 64 == 0 and np.array_equal(copy, arrays[0])


def test_tune_tir_records_the_fastest_of_short_windows(tmp_path, kernel_cache):
    from ingot import tune as ms

    work = tmp_path / "w"
    ms.tune_tir(matmul_func(32, 32, 32), HOST, str(work), max_trials_global=4, num_trials_per_iter=4,
                seed=0, cost_model="random", verbose=0)
    db = ms.SQLiteDatabase(str(work / "database.db"))
    recs = [r for r in db.get_records(ingot.ir.IRModule({"main": matmul_func(32, 32, 32)}), HOST) if r.is_valid]
    assert recs and all(len(r.run_secs) == 1 for r in recs)
    assert recs[0].measure == {"cache_flush": False, "number": 1, "repeat": 10, "min_repeat_ms": 2, "kept": "min"}
