"""ONNX backend node tests through Ingot: the pass count must never go down.

The counts live in onnx_node_pass_count.txt (``<mode> <count>`` per line). When you raise
coverage, update the file with the new number printed by the failing-or-passing test output
(``python tests/frontend/onnx_node_tests.py --mode reference``).
"""
from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("onnx")
sys.path.insert(0, os.path.dirname(__file__))

import onnx_node_tests as harness  # noqa: E402

COUNT_FILE = os.path.join(os.path.dirname(__file__), "onnx_node_pass_count.txt")
# The compiled path compiles one library per case; CI runs this deterministic share of the cases
# (the full set runs in benchmarks/onnx_coverage.py).
COMPILED_SUBSET_EVERY = 25


def _recorded() -> dict:
    counts = {}
    with open(COUNT_FILE) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                mode, count = line.split()
                counts[mode] = int(count)
    return counts


def test_random_cases_are_excluded():
    names = [c.name for c in harness.collect_cases()]
    assert len(names) > 1500
    # Inference Dropout is the identity even when the case name says "random" (test_dropout_random_old).
    assert not any(("bernoulli" in n or "random" in n) and "dropout" not in n for n in names)
    assert not any("dropout" in n and "training" in n for n in names)
    assert any(n.startswith("test_dropout_default") for n in names)  # inference dropout is kept


def test_reference_pass_count_never_goes_down():
    results = harness.run_all(harness.collect_cases(), "reference")
    summary = harness.summarize(results)
    print(harness.format_report(results))
    assert summary["pass"] >= _recorded()["reference"], (
        f"ONNX node-test pass count fell to {summary['pass']} (recorded {_recorded()['reference']})")


@pytest.mark.slow
@pytest.mark.compiler
def test_compiled_subset_pass_count_never_goes_down():
    cases = harness.deterministic_subset(harness.collect_cases(), COMPILED_SUBSET_EVERY)
    results = harness.run_all(cases, "compiled")
    summary = harness.summarize(results)
    print(harness.format_report(results, details=True))
    assert summary["pass"] >= _recorded().get("compiled_subset", 0)
