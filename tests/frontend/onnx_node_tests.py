"""Coverage harness: ONNX's own backend node tests run through Ingot.

Note: onnx 1.23 ships its node tests as Python generators (`onnx.backend.test.case.node`); calling
`collect_testcases()` builds all ~1,900 models with their inputs and expected outputs in memory in
a few seconds, so nothing is exported to disk. Each case is imported with `from_onnx` and run in one
of two modes:

* ``"reference"``: the imported graph evaluated with each operator's numpy reference
  (`ingot.frontend.reference`) — checks the importer alone, needs no compiler, fast;
* ``"compiled"``: ``ingot.graph.build`` + ``Executor`` — the real path (import → compile → run).

Shape-like inputs (Reshape's shape, Slice's starts, TopK's K, ...) are frozen to constants by default, as
TVM's tests do; ``--no-freeze`` keeps them graph inputs, so they are values known only at run time
(issue 17: the run-time shape path of `ingot.frontend.onnx.ops_dynamic`).

Every case is classified ``pass`` / ``mismatch`` / ``error`` / ``unsupported`` and the results are
grouped per op. Cases whose expected output is one random draw (Bernoulli, Random*, training
Dropout) are excluded.

Usage (also from benchmarks/onnx_coverage.py):
    python tests/frontend/onnx_node_tests.py [--mode reference|compiled] [--subset N] [-k FILTER] [--no-freeze]
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import sys
import warnings
from typing import Any, Callable, Iterable

import numpy as np

RANDOM_CASE_MARKERS = ("bernoulli", "random", "dropout")
RESULTS = ("pass", "mismatch", "error", "unsupported")


@dataclasses.dataclass
class CaseResult:
    """The outcome of one node test case."""

    name: str
    op: str
    status: str
    detail: str = ""


def is_random_case(name: str) -> bool:
    """Whether the case's expected output is one random draw (excluded from coverage).

    Dropout cases are excluded only in training mode (inference Dropout is deterministic).
    """
    lname = name.lower()
    if "dropout" in lname:
        return "training" in lname
    return any(m in lname for m in RANDOM_CASE_MARKERS if m != "dropout")


@functools.lru_cache(maxsize=1)
def collect_cases() -> tuple:
    """All deterministic node test cases (``onnx.backend.test.case.TestCase``), in a stable order."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    cases = [c for c in cases if c.kind == "node" and c.model is not None and not is_random_case(c.name)]
    return tuple(sorted(cases, key=lambda c: c.name))


def case_op(case: Any) -> str:
    """The op a case tests (the single node's type, or ``<op> (expanded)`` for function expansions)."""
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    stem = case.name[len("test_"):]
    return stem.split("_")[0] + " (expanded)" if "expanded" in case.name else nodes[-1].op_type


def deterministic_subset(cases: Iterable[Any], every: int) -> list:
    """A stable subset: cases whose name hashes to 0 modulo ``every`` (same on every machine)."""
    return [c for c in cases if int(hashlib.sha256(c.name.encode()).hexdigest(), 16) % every == 0]


def _run_reference(mod: Any, inputs: list) -> list:
    from ingot.frontend.reference import evaluate

    return evaluate(mod, inputs)


def _run_compiled(mod: Any, inputs: list) -> list:
    import ingot
    from ingot import graph as G

    ex = G.build(mod, "llvm")
    out = G.Executor(ex, ingot.cpu())["main"](*inputs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    # A nested tuple is an ONNX sequence output: a list of arrays.
    return [[x.numpy() for x in o] if isinstance(o, tuple) else o.numpy() if hasattr(o, "numpy") else np.asarray(o)
            for o in outs]


RUNNERS: dict[str, Callable] = {"reference": _run_reference, "compiled": _run_compiled}


def compare(expected: np.ndarray, actual: np.ndarray, rtol: float, atol: float) -> str:
    """Empty when ``actual`` matches ``expected`` (shape, dtype kind, values), else what differs."""
    expected, actual = np.asarray(expected), np.asarray(actual)
    if expected.shape != actual.shape:
        return f"shape {actual.shape} != expected {expected.shape}"
    if expected.dtype != actual.dtype:
        return f"dtype {actual.dtype} != expected {expected.dtype}"
    if expected.dtype.kind in "biuUSO":
        return "" if np.array_equal(expected, actual) else "values differ"
    try:
        np.testing.assert_allclose(actual, expected, rtol=max(rtol, 1e-5), atol=max(atol, 1e-6), equal_nan=True)
    except AssertionError as exc:
        return str(exc).strip().splitlines()[-1][:120] if str(exc).strip() else "values differ"
    return ""


# Inputs at these positions of these ops are shapes/axes/counts: the harness freezes them as
# constants (TVM's ONNX tests do the same with freeze_params), since Ingot compiles static graphs.
_SHAPE_LIKE_SLOTS = {
    "Reshape": {1}, "Expand": {1}, "Tile": {1}, "Squeeze": {1}, "Unsqueeze": {1}, "Slice": {1, 2, 3, 4},
    "Split": {1}, "Pad": {1, 2, 3}, "Range": {0, 1, 2}, "OneHot": {1, 2}, "Trilu": {1}, "ConstantOfShape": {0},
    "TopK": {1}, "CumSum": {1}, "Resize": {1, 2, 3}, "Clip": {1, 2}, "ReduceSum": {1}, "ReduceMean": {1},
    "ReduceMax": {1}, "ReduceMin": {1}, "ReduceProd": {1}, "ReduceL1": {1}, "ReduceL2": {1},
    "ReduceLogSum": {1}, "ReduceLogSumExp": {1}, "ReduceSumSquare": {1}, "Upsample": {1}, "CenterCropPad": {1},
    "Col2Im": {1, 2},
    # sizes, steps and axes of the signal/image ops (issue 17)
    "AffineGrid": {1}, "DFT": {1, 2}, "STFT": {1, 3}, "HannWindow": {0}, "HammingWindow": {0},
    "BlackmanWindow": {0}, "MelWeightMatrix": {0, 1, 2, 3, 4}, "SplitToSequence": {1},
}


def frozen_inputs(model: Any, inputs: list) -> dict:
    """The graph inputs used as shape-like operands (frozen to constants for import)."""
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    slots = set()
    for node in model.graph.node:
        for k, name in enumerate(node.input):
            if k in _SHAPE_LIKE_SLOTS.get(node.op_type, ()):
                slots.add(name)
    return {n: np.asarray(v) for n, v in zip(names, inputs) if n in slots}


def _array(value: Any) -> np.ndarray:
    import onnx
    from onnx import numpy_helper

    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    array = np.asarray(value)
    if array.dtype == object:
        raise ValueError("not a tensor")
    return array


def run_case(case: Any, mode: str = "reference", freeze: bool = True) -> CaseResult:
    """Import (input shapes from the first data set), run and compare one case; never raises. ``freeze=False``
    keeps shape-like inputs as graph inputs (run-time values)."""
    from ingot.frontend import UnsupportedOpsError
    from ingot.frontend.onnx import from_onnx

    op = case_op(case)
    try:
        first_inputs = [_array(i) for i in case.data_sets[0][0]]
    except ValueError:
        return CaseResult(case.name, op, "unsupported", "sequence/optional inputs")
    frozen = frozen_inputs(case.model, first_inputs) if freeze else {}
    names = [i.name for i in case.model.graph.input if i.name not in {t.name for t in case.model.graph.initializer}]
    shapes = {n: list(v.shape) for n, v in zip(names, first_inputs) if n not in frozen}
    try:
        mod, _ = from_onnx(case.model, shape_dict=shapes, const_inputs=frozen)
    except UnsupportedOpsError as exc:
        return CaseResult(case.name, op, "unsupported", ",".join(exc.ops))
    except Exception as exc:  # an import error of any kind is the case's result
        return CaseResult(case.name, op, "error", f"import: {type(exc).__name__}: {_first(exc)}")
    for inputs, expected in case.data_sets:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                outs = RUNNERS[mode](mod, [_array(i) for n, i in zip(names, inputs) if n not in frozen])
        except Exception as exc:
            return CaseResult(case.name, op, "error", f"run: {type(exc).__name__}: {_first(exc)}")
        if len(outs) < len(expected):
            return CaseResult(case.name, op, "mismatch", f"{len(outs)} outputs, expected {len(expected)}")
        for k, (e, a) in enumerate(zip(expected, outs)):
            if isinstance(e, list):  # a sequence output: a list of arrays (a tuple of tensors in Ingot)
                if not isinstance(a, list) or len(a) != len(e):
                    return CaseResult(case.name, op, "mismatch", f"output {k}: expected a sequence of {len(e)} "
                                                                 f"tensors, got {type(a).__name__}")
                why = next((w for w in (compare(_array(x), y, case.rtol, case.atol) for x, y in zip(e, a)) if w), "")
            else:
                why = compare(_array(e), a, case.rtol, case.atol)
            if why:
                return CaseResult(case.name, op, "mismatch", f"output {k}: {why}")
    return CaseResult(case.name, op, "pass")


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else ""


def _run_by_name(name: str, mode: str, freeze: bool = True) -> CaseResult:
    case = next(c for c in collect_cases() if c.name == name)
    return run_case(case, mode, freeze)


def run_all(cases: Iterable[Any], mode: str = "reference", isolate: "bool | None" = None,
            freeze: bool = True) -> list[CaseResult]:
    """`run_case` over ``cases``. With ``isolate`` (default for the compiled mode) the cases run in
    one long-lived child process, restarted when a kernel crashes it; the crash is that case's
    ``error`` and the run goes on."""
    cases = list(cases)
    if isolate is None:
        isolate = mode == "compiled"
    if not isolate:
        return [run_case(c, mode, freeze) for c in cases]
    import concurrent.futures as cf
    import multiprocessing as mp

    results = []
    ctx = mp.get_context("spawn")
    pool = cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx)
    try:
        for c in cases:
            try:
                results.append(pool.submit(_run_by_name, c.name, mode, freeze).result(timeout=600))
            except (cf.process.BrokenProcessPool, cf.TimeoutError) as exc:
                results.append(CaseResult(c.name, case_op(c), "error", f"run: the process crashed or hung "
                                                                         f"({type(exc).__name__})"))
                pool.shutdown(wait=False, cancel_futures=True)
                pool = cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return results


def summarize(results: list[CaseResult]) -> dict:
    """``{"total", "pass", "mismatch", "error", "unsupported", "per_op": {op: Counter}}``."""
    per_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    for r in results:
        per_op[r.op][r.status] += 1
        totals[r.status] += 1
    return {"total": len(results), **{k: totals[k] for k in RESULTS}, "per_op": dict(per_op)}


def format_report(results: list[CaseResult], details: bool = False) -> str:
    """A per-op text table plus totals."""
    s = summarize(results)
    lines = [f"{'op':32} {'pass':>5} {'mism':>5} {'err':>5} {'unsup':>5}"]
    for op in sorted(s["per_op"]):
        c = s["per_op"][op]
        lines.append(f"{op:32} {c['pass']:5} {c['mismatch']:5} {c['error']:5} {c['unsupported']:5}")
    lines.append(f"TOTAL {s['total']} cases: pass {s['pass']} ({100.0 * s['pass'] / max(s['total'], 1):.1f}%), "
                 f"mismatch {s['mismatch']}, error {s['error']}, unsupported {s['unsupported']}")
    if details:
        lines += [f"  {r.status:11} {r.name}: {r.detail}" for r in results if r.status in ("mismatch", "error")]
    return "\n".join(lines)


def main(argv: "list[str] | None" = None) -> int:
    """Command line: print the per-op report."""
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=sorted(RUNNERS), default="reference")
    p.add_argument("--subset", type=int, default=1, help="run every N-th case (by name hash)")
    p.add_argument("-k", default="", help="only cases whose name contains this")
    p.add_argument("--details", action="store_true", help="list mismatches and errors")
    p.add_argument("--no-freeze", action="store_true", help="keep shape-like inputs as run-time graph inputs")
    args = p.parse_args(argv)
    cases = [c for c in collect_cases() if args.k in c.name]
    if args.subset > 1:
        cases = deterministic_subset(cases, args.subset)
    print(format_report(run_all(cases, args.mode, freeze=not args.no_freeze), args.details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
