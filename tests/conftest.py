"""Test-suite setup: the repository root on ``sys.path``, so that tests share the benchmark
workloads (``from benchmarks import architectures``) whichever way pytest is started."""
from __future__ import annotations

import os
import sys

_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
