"""ONNX backend node-test coverage of Ingot's compiled path, beside ONNX Runtime on the same cases.

Every deterministic case of ``onnx.backend.test.case.node`` (see tests/frontend/onnx_node_tests.py)
is imported with ``ingot.frontend.onnx.from_onnx``, compiled (``ingot.graph.build``) and run, and
also run by ONNX Runtime (``CPUExecutionProvider``, the model as given: shape-like inputs are fed,
not frozen). Both are compared with the expected outputs at the case's tolerances. Prints a per-op
table (Ingot pass/mismatch/error/unsupported, ORT pass) and totals, as Markdown with ``--markdown``.

Note: compiled mode builds one C library per case (seconds each on a busy 2-core machine), so the
full set takes hours; ``--every N`` runs the hash-chosen 1/N share (the same cases on every
machine), and ``--jsonl`` appends each result as it finishes, so a cut-off run still counts.

Usage:
    python benchmarks/onnx_coverage.py [--mode compiled|reference] [--every N] [-k FILTER]
                                       [--jsonl results.jsonl] [--markdown]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "frontend"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import onnx_node_tests as harness  # noqa: E402

ORT_MAX_IR_VERSION = 13


def ort_status(case) -> str:
    """``pass``/``mismatch``/``error`` of ONNX Runtime on one case (all its data sets).

    Example:
        >>> ort_status(harness.collect_cases()[0])  # doctest: +SKIP
        'pass'
    """
    import onnxruntime as ort

    model = case.model
    if model.ir_version > ORT_MAX_IR_VERSION:
        # onnx 1.23 stamps its newest IR version on every model; ONNX Runtime 1.31 reads up to 13 and
        # would refuse the file before looking at the ops. The IR changes do not affect these graphs.
        import onnx

        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        model.ir_version = ORT_MAX_IR_VERSION
    try:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception:
        return "error"
    names = [i.name for i in sess.get_inputs()]
    for inputs, expected in case.data_sets:
        try:
            feeds = {n: harness._array(v) for n, v in zip(names, inputs)}
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                outs = sess.run(None, feeds)
        except Exception:
            return "error"
        for e, a in zip(expected, outs):
            try:
                if harness.compare(harness._array(e), a, case.rtol, case.atol):
                    return "mismatch"
            except ValueError:
                return "error"
    return "pass"


def run(cases: list, mode: str, jsonl: "str | None", chunk: int = 16) -> list[dict]:
    """Ingot (in ``mode``) and ORT results of ``cases`` as dicts; appended to ``jsonl`` per chunk."""
    done = {}
    if jsonl and os.path.exists(jsonl):
        with open(jsonl) as f:
            for line in f:
                r = json.loads(line)
                done[r["name"]] = r
    todo = [c for c in cases if c.name not in done]
    for start in range(0, len(todo), chunk):
        part = todo[start:start + chunk]
        for case, res in zip(part, harness.run_all(part, mode)):
            r = {"name": case.name, "op": res.op, "ingot": res.status, "detail": res.detail}
            done[case.name] = r
            if jsonl:
                with open(jsonl, "a") as f:
                    f.write(json.dumps(r) + "\n")
        print(f"[{min(start + chunk, len(todo))}/{len(todo)}]", file=sys.stderr, flush=True)
    # ONNX Runtime takes seconds for all cases: always rerun (not resumed from the jsonl).
    return [{**done[c.name], "ort": ort_status(c)} for c in cases]


def table(results: list[dict], markdown: bool) -> str:
    """Per-op counts and totals."""
    per_op: dict = collections.defaultdict(collections.Counter)
    for r in results:
        per_op[r["op"]][r["ingot"]] += 1
        per_op[r["op"]]["ort_pass"] += r["ort"] == "pass"
        per_op[r["op"]]["n"] += 1
    cols = ("pass", "mismatch", "error", "unsupported", "ort_pass")
    lines = []
    if markdown:
        lines += ["| op | cases | Ingot pass | mismatch | error | unsupported | ORT pass |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
    else:
        lines.append(f"{'op':40} {'n':>4} " + " ".join(f"{c:>11}" for c in cols))
    for op in sorted(per_op):
        c = per_op[op]
        if markdown:
            lines.append(f"| {op} | {c['n']} | " + " | ".join(str(c[k]) for k in cols) + " |")
        else:
            lines.append(f"{op:40} {c['n']:4} " + " ".join(f"{c[k]:11}" for k in cols))
    n = len(results)
    tot = collections.Counter(r["ingot"] for r in results)
    ort_pass = sum(r["ort"] == "pass" for r in results)
    lines.append("")
    lines.append(f"TOTAL {n} cases: Ingot pass {tot['pass']} ({100.0 * tot['pass'] / max(n, 1):.1f}%), mismatch "
                 f"{tot['mismatch']}, error {tot['error']}, unsupported {tot['unsupported']}; ONNX Runtime pass "
                 f"{ort_pass} ({100.0 * ort_pass / max(n, 1):.1f}%)")
    return "\n".join(lines)


def main(argv: "list[str] | None" = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=sorted(harness.RUNNERS), default="compiled")
    p.add_argument("--every", type=int, default=1, help="run the hash-chosen 1/N share of the cases")
    p.add_argument("-k", default="", help="only cases whose name contains this")
    p.add_argument("--jsonl", default=None, help="append results here; cases already in it are not rerun")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--details", action="store_true", help="list Ingot's mismatches and errors")
    args = p.parse_args(argv)
    cases = [c for c in harness.collect_cases() if args.k in c.name]
    if args.every > 1:
        cases = harness.deterministic_subset(cases, args.every)
    from benchmarks.common import load_average

    print(f"load average before: {load_average()}", file=sys.stderr)
    results = run(cases, args.mode, args.jsonl)
    print(table(results, args.markdown))
    if args.details:
        for r in results:
            if r["ingot"] in ("mismatch", "error"):
                print(f"  {r['ingot']:9} {r['name']}: {r['detail']}")
    print(f"load average after: {load_average()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
