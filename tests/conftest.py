"""Test-suite setup: the repository root on ``sys.path``, so that the tests import this checkout's
``ingot`` (and its shared workloads, `ingot.testing`) whichever way pytest is started."""
from __future__ import annotations

import os
import sys

_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
