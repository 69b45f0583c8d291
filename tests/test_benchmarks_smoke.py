"""The benchmark scripts' ``--smoke`` modes run end to end (tiny models, one repeat): a script that no
longer runs is found by the test run, not by whoever re-times the benchmarks. The numbers they print
are not checked (timings are never asserted), only that every variant produced one and that the
compiled model matched the reference it is compared with."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow


def _run(*args: str) -> str:
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "models.py"), *args],
                          capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_models_dynamic_smoke():
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")  # the dynamo exporter's dependency
    pytest.importorskip("onnxruntime")
    out = _run("--dynamic", "--smoke", "--models", "mobilenet_v2")
    rows = [line for line in out.splitlines() if line.startswith("| mobilenet_v2 |")]
    assert len(rows) == 1, out
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert len(cells) == 10 and "n/a" not in cells, rows[0]
    assert float(cells[-1]) < 1e-3, f"the dynamic plan differs from ONNX Runtime: {rows[0]}"
