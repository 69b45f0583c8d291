"""Design space, postprocs, mutators, features, cost model and schedulers (no timing asserts)."""
import math

import numpy as np
import pytest

from ingot.testing.kernels import matmul_func  # noqa: E402

import ingot  # noqa: E402
from ingot.ir import structural_equal  # noqa: E402
from ingot.tir.schedule import Schedule  # noqa: E402
from ingot.tir.schedule.trace import Trace  # noqa: E402
from ingot.tune.cost_model import RandomModel, XGBModel, rank_correlation  # noqa: E402
from ingot.tune.feature_extractor import PerStoreFeature  # noqa: E402
from ingot.tune.mutator import MutateParallel, MutateTileSize, MutateUnroll  # noqa: E402
from ingot.tune.task_scheduler import GradientBased, RoundRobin, format_table  # noqa: E402
from ingot.tune.tune_context import TuneContext  # noqa: E402
from ingot.tune.utils import estimate_flops  # noqa: E402


def _ctx(n=32, seed=0, **kw):
    ctx = TuneContext(matmul_func(n, n, n), "llvm -num-cores=2", seed=seed, **kw)
    ctx.search_strategy.pre_tuning(ctx, ctx.generate_design_space(), None, None)
    return ctx


def test_estimate_flops():
    assert estimate_flops(matmul_func(64, 32, 16)) == 2 * 64 * 32 * 16


def test_default_space_samples_are_correct_and_replay_from_json():
    ctx = _ctx(32)
    cands = ctx.search_strategy.sample_random(3, set())
    assert len(cands) == 3 and len({c.candidate_hash for c in cands}) == 3
    a = np.random.rand(32, 32).astype("float32")
    b = np.random.rand(32, 32).astype("float32")
    for cand in cands:
        kinds = {l for l in cand.sch.mod.script().split() if l.startswith("T.parallel") or l.startswith("T.vectorized")}
        assert kinds, "postproc should rewrite annotations into parallel/vectorized loops"
        # The stored trace (with postprocs) replays to the same program.
        sch2 = Schedule(matmul_func(32, 32, 32))
        Trace.from_json(cand.sch.trace.as_json()).apply_to_schedule(sch2)
        assert structural_equal(sch2.mod, cand.sch.mod)
        lib = ingot.build(cand.sch.mod, "llvm -num-cores=2")
        c = np.zeros((32, 32), "float32")
        lib["main"](a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_mutators_change_one_decision_and_replay():
    ctx = _ctx(32)
    # a MultiLevelTiling sample: it has tile, unroll and parallel decisions (SmallGemm's have tiles only)
    cand = next(c for c in ctx.search_strategy.sample_random(16, set())
                if "meta_schedule.tiling_structure" in str(c.sch.trace))
    trace = cand.sch.trace.simplified(remove_postproc=True)
    rng = np.random.default_rng(0)
    for mutator in (MutateTileSize(), MutateUnroll(), MutateParallel()):
        hashes = set()
        for _ in range(32):  # another parallel limit can leave the fused extent unchanged: retry
            new = mutator.apply(trace, rng)
            assert new is not None, mutator
            child = ctx.search_strategy.replay(new)
            assert child is not None, mutator
            hashes.add(child.candidate_hash)
            if child.candidate_hash != cand.candidate_hash:
                break
        assert hashes - {cand.candidate_hash}, mutator
    tiles = [i for i in trace.insts if i.kind.name == "sample_perfect_tile"]
    new = MutateTileSize().apply(trace, rng)
    changed = [i for i in tiles if list(new.decisions[[j for j in new.insts if j is i][0]]) != list(trace.decisions[i])]
    assert len(changed) == 1 and math.prod(new.decisions[changed[0]]) == math.prod(trace.decisions[changed[0]])


def test_features_fixed_length_and_distinguish_schedules():
    ctx = _ctx(32)
    cands = ctx.search_strategy.sample_random(4, set())
    f = PerStoreFeature()
    X = f.extract([c.sch.mod for c in cands], [c.candidate_hash for c in cands])
    assert X.shape == (4, f.dim) and np.isfinite(X).all()
    assert len({tuple(r) for r in X}) == 4
    assert f.extract_one(matmul_func(32, 32, 32)).shape == (f.dim,)


def test_rank_correlation():
    assert rank_correlation([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert rank_correlation([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)


def test_xgb_ranks_measured_matmul_candidates_better_than_random(kernel_cache):
    """Measure 56 candidates of a 64x64x64 matmul space; over 8 random splits, train on 40 and
    rank the other 16 (held-out Spearman, printed). Candidates run on one thread and keep the
    fastest repeat: on a shared machine a 2-thread OpenMP run stalls whenever a core is busy,
    which turns the labels into noise."""
    from ingot.tune.builder import BuilderInput, LocalBuilder
    from ingot.tune.database import ArgInfo
    from ingot.tune.runner import LocalRunner, RunnerConfig, RunnerInput

    ctx = _ctx(64, seed=3)
    cands = ctx.search_strategy.sample_random(56, set())
    with LocalBuilder(max_workers=2, cache_dir=kernel_cache) as builder:
        built = builder.build([BuilderInput(c.sch.mod, "llvm -num-cores=2") for c in cands])
    args = [ArgInfo("float32", (64, 64))] * 3
    # many short repeats, fastest kept: one of them runs undisturbed even on a loaded machine
    with LocalRunner(RunnerConfig(number=3, repeat=15, min_repeat_ms=2, check_correctness=False)) as runner:
        secs = [float(np.min(r.run_secs)) if r.ok else math.inf
                for r in runner.run([RunnerInput(b.artifact_path, args, num_threads=1) for b in built if b.ok])]
    cands = [c for c, b in zip(cands, built) if b.ok]
    secs = np.array(secs)
    X = ctx.feature_extractor.extract([c.sch.mod for c in cands], [c.candidate_hash for c in cands])
    rhos, rhos_random = [], []
    for split in range(8):
        perm = np.random.default_rng(split).permutation(len(secs))
        train, test = perm[:40], perm[40:]
        model = XGBModel(seed=0, min_train=4)
        model.update(X[train], secs[train])
        throughput = 1.0 / secs[test]
        rhos.append(rank_correlation(model.predict(X[test]), throughput))
        rhos_random.append(np.mean([rank_correlation(RandomModel(seed=s).predict(X[test]), throughput)
                                    for s in range(10)]))
    rho, rho_random = float(np.mean(rhos)), float(np.mean(rhos_random))
    print(f"Spearman rank correlation on held-out candidates (mean of 8 splits): xgb {rho:.3f}, random {rho_random:.3f}")
    # Measured labels on a 2-core machine are noisy: observed xgb 0.13-0.38 against random ~0.0-0.04
    # over 80 random rankings. The margin below still fails for a model that ranks no better than chance.
    assert rho > rho_random + 0.05


class _FakeTask:
    def __init__(self, name, weight):
        self.task_name, self.weight, self.flop_count = name, weight, 1e6


def test_round_robin_and_gradient_policies():
    tasks = [_FakeTask("a", 1.0), _FakeTask("b", 10.0)]
    rr = RoundRobin(tasks, None, None, None, max_trials_global=10)
    assert [rr.next_task_id() for _ in range(3)] == [0, 1, 0]
    rr.done[0] = True
    assert rr.next_task_id() == 1
    gb = GradientBased(tasks, None, None, None, max_trials_global=10, window_size=1)
    assert gb.next_task_id() == 0  # warm-up: every task gets a round first
    for i, hist in enumerate(([2e-3, 2e-3], [1e-3, 1e-3])):
        gb.best_history[i], gb.best_secs[i], gb.rounds[i], gb.trials[i] = hist, hist[-1], 2, 16
    # task b: weight 10 x latency 1 ms dominates task a: weight 1 x 2 ms
    assert gb.next_task_id() == 1
    gb.done[1] = True
    assert gb.next_task_id() == 0


def test_format_table():
    text = format_table([{"id": 0, "name": "mm", "flop": 2e6, "weight": 1, "gflops": None, "latency_us": None,
                          "trials": 0, "done": True}])
    assert "ID | Name" in text and "N/A" in text and text.rstrip().endswith("Y")


def test_evolutionary_search_follows_the_cost_model():
    """With a trained model, the candidates the search proposes score far better under that
    model than random samples of the space do (the search uses the model's ranking, and evolution
    improves on the random population). The model here is an oracle on one feature (the
    register-tile size), so the check needs no measurement."""
    from ingot.tune.cost_model.base import CostModel
    from ingot.tune.search_strategy import EvolutiveSearch

    column = 17  # PerStoreFeature: log2(1 + register tile) of the heaviest store (first `_structure` entry)

    class Oracle(CostModel):
        is_trained = True

        def predict(self, X):
            return np.asarray(X)[:, column]

    ctx = TuneContext(matmul_func(64, 64, 64), "llvm -num-cores=2", seed=0,
                      search_strategy=EvolutiveSearch(population_size=32, eps_greedy=0.0, seed=0))
    st = ctx.search_strategy
    st.pre_tuning(ctx, ctx.generate_design_space(), None, Oracle())
    st.take_fixed_candidates()  # the default schedule: not part of this comparison
    chosen = st.generate_measure_candidates(8)
    rand = st.sample_random(32, set())
    score = lambda cs: Oracle().predict(ctx.feature_extractor.extract([c.sch.mod for c in cs]))  # noqa: E731
    assert len(chosen) == 8
    assert score(chosen).mean() > np.quantile(score(rand), 0.75), (score(chosen), score(rand))
