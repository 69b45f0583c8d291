"""Where a search's measured candidates came from, round by round (issue #4's evidence).

Note: works on the records alone (any database, any strategy, old runs included): a record's
*branch* is its trace with the sampled values blanked out (the design-space member it was drawn
from, e.g. a BlockedGemm register tile or a MultiLevelTiling branch), and a record is a
*neighbour* of an earlier one when both share a branch and differ in exactly one decision —
what one mutation makes. A search that refines the good region keeps many neighbours of the
best measured records; a drifting one moves its picks to slow branches.

Example:
    >>> # recs = db.get_records(mod, target)                      # in measurement order
    >>> # print(lineage_table(recs, per_round=64, flop_count=2 * 1024**3))
"""
from __future__ import annotations

import json
import math
from typing import Any, Sequence

import numpy as np


def _branch_and_decisions(trace_json: dict) -> "tuple[str, dict]":
    insts = trace_json.get("insts", [])
    end = next((k for k, x in enumerate(insts) if x[0] == "enter_postproc"), len(insts))
    body = insts[:end]
    # sampled values feed later instructions as RVs, so blanking the sampling instructions'
    # attrs (their candidates stay) and the decisions leaves what the design space fixed
    branch = json.dumps([[x[0], x[1] if x[0] in ("transform_layout", "annotate") else None, x[2]]
                         for x in body], sort_keys=True, default=str)
    decisions = {int(i): json.dumps(v) for i, v in trace_json.get("decisions", []) if int(i) < end}
    return branch, decisions


def lineage_rows(records: Sequence[Any], per_round: int, flop_count: float, top: int = 16) -> "list[dict]":
    """One dict per round of ``per_round`` records (in measurement order): mean / max GFLOP/s,
    the best before the round, how many records are one-decision neighbours of any earlier
    record and of the ``top`` fastest earlier ones, and the count / mean GFLOP/s per branch.

    Example:
        >>> lineage_rows([], 64, 1e9)
        []
    """
    if per_round < 1:
        raise ValueError(f"lineage_rows: per_round must be >= 1, got {per_round}")
    items, branch_ids = [], {}
    for r in records:
        branch, dec = _branch_and_decisions(r.trace_json)
        b = branch_ids.setdefault(branch, len(branch_ids))
        sec = r.mean_sec
        items.append((b, dec, flop_count / sec / 1e9 if math.isfinite(sec) and sec > 0 else 0.0))
    rows, earlier = [], []
    for start in range(0, len(items), per_round):
        chunk = items[start:start + per_round]
        best_earlier = sorted(earlier, key=lambda e: -e[2])[:top]
        n_any = sum(1 for it in chunk if _has_neighbour(it, earlier))
        n_top = sum(1 for it in chunk if _has_neighbour(it, best_earlier))
        per_branch: dict = {}
        for b, _, g in chunk:
            per_branch.setdefault(b, []).append(g)
        gs = [g for _, _, g in chunk]
        rows.append({"round": start // per_round + 1, "n": len(chunk), "mean_gflops": float(np.mean(gs)),
                     "max_gflops": float(max(gs)), "best_before": max((e[2] for e in earlier), default=0.0),
                     "neighbours_of_earlier": n_any, f"neighbours_of_top{top}": n_top,
                     "branches": {b: (len(v), float(np.mean(v))) for b, v in sorted(per_branch.items())}})
        earlier += chunk
    return rows


def _has_neighbour(item: tuple, others: list) -> bool:
    b, dec, _ = item
    if not dec:
        return False
    for ob, odec, _ in others:
        if ob == b and sum(1 for k in set(dec) | set(odec) if dec.get(k) != odec.get(k)) == 1:
            return True
    return False


def lineage_table(records: Sequence[Any], per_round: int, flop_count: float, top: int = 16) -> str:
    """`lineage_rows` as a Markdown table (branches as ``b<id>:<count>/<mean GFLOP/s>``).

    Example:
        >>> lineage_table([], 64, 1e9).splitlines()[0]
        '| round | mean GFLOP/s | max | best before | neighbours of earlier | neighbours of top 16 | branches |'
    """
    lines = [f"| round | mean GFLOP/s | max | best before | neighbours of earlier | neighbours of top {top} | branches |",
             "|---|---|---|---|---|---|---|"]
    for r in lineage_rows(records, per_round, flop_count, top):
        br = " ".join(f"b{b}:{n}/{g:.0f}" for b, (n, g) in r["branches"].items())
        lines.append(f"| {r['round']} | {r['mean_gflops']:.1f} | {r['max_gflops']:.1f} | {r['best_before']:.1f} | "
                     f"{r['neighbours_of_earlier']}/{r['n']} | {r[f'neighbours_of_top{top}']}/{r['n']} | {br} |")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m ingot.tune.search_strategy.report DB PER_ROUND FLOP
    import sys

    from ..database import SQLiteDatabase

    if len(sys.argv) != 4:
        sys.exit("usage: python -m ingot.tune.search_strategy.report work_dir/database.db PER_ROUND FLOP_COUNT")
    db = SQLiteDatabase(sys.argv[1])
    print(lineage_table(db.get_all_tuning_records(), int(sys.argv[2]), float(sys.argv[3])))
