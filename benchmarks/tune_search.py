"""Evolutionary search against random search (ReplayTrace) at equal trials on one GEMM (issue #4).

Each strategy tunes the same fp32 GEMM from the default space with its own work dir; the script
prints, per strategy, the per-round mean / max / best-so-far GFLOP/s as measured by the tuner,
then the lineage table of the evolutionary run (`ingot.tune.search_strategy.report`: branch mix
and one-decision neighbours of the best earlier records per round), and the load average before
and after. Candidates run on ``--threads`` threads (default 1: a 2-thread OpenMP run stalls
whenever the shared machine has a busy core).

    python benchmarks/tune_search.py --n 512 --trials 192 --per-round 32
    python benchmarks/tune_search.py --n 1024 --trials 1000 --per-round 64 --strategies evolutionary
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's ingot
from common import gemm_func  # noqa: E402



def run(strategy: str, n: int, trials: int, per_round: int, threads: int, seed: int, work_dir: str):
    """Tune; returns (records in measurement order, tuning wall seconds)."""
    from ingot import tune as ms
    from ingot.tune.database import SQLiteDatabase

    mod = gemm_func(n)
    target = f"llvm -num-cores={threads}"
    t = time.time()
    ms.tune_tir(mod, target, work_dir, max_trials_global=trials, num_trials_per_iter=per_round, strategy=strategy,
                seed=seed, verbose=0)
    return SQLiteDatabase(os.path.join(work_dir, "database.db")).get_records(mod, target), time.time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--trials", type=int, default=192)
    ap.add_argument("--per-round", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--strategies", nargs="+", default=["evolutionary", "replay"])
    ap.add_argument("--work-dir", default=None, help="kept when given (default: a temporary dir)")
    args = ap.parse_args()
    from ingot.tune.search_strategy.report import lineage_table

    flop = 2.0 * args.n ** 3
    print(f"load average before: {os.getloadavg()}")
    base = args.work_dir or tempfile.mkdtemp(prefix="tune_search_")
    results = {}
    for strategy in args.strategies:
        wd = os.path.join(base, f"gemm{args.n}_{strategy}")
        shutil.rmtree(wd, ignore_errors=True)
        results[strategy] = run(strategy, args.n, args.trials, args.per_round, args.threads, args.seed, wd)
    print(f"load average after: {os.getloadavg()}\n")
    print(f"fp32 GEMM {args.n}^3, {args.trials} trials in rounds of {args.per_round}, {args.threads} thread(s), "
          f"seed {args.seed}; GFLOP/s as measured by the tuner\n")
    print("| strategy | round | mean | max | best so far |\n|---|---|---|---|---|")
    for strategy, (recs, _) in results.items():
        g = [flop / r.mean_sec / 1e9 if r.is_valid else 0.0 for r in recs]
        best = 0.0
        for k in range(0, len(g), args.per_round):
            chunk = g[k:k + args.per_round]
            best = max(best, max(chunk))
            print(f"| {strategy} | {k // args.per_round + 1} | {np.mean(chunk):.1f} | {max(chunk):.1f} | {best:.1f} |")
    for strategy, (recs, wall) in results.items():
        print(f"\n{strategy}: tuning wall time {wall:.0f} s; lineage per round:\n")
        print(lineage_table(recs, args.per_round, flop))
    if not args.work_dir:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
