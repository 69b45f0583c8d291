"""Run an exported `ingot.workflow` package in a fresh Python process (the BYOC tests' check that
external regions save and load): imported by name, like `_numpy_backend`."""
from __future__ import annotations

import subprocess
import sys

import numpy as np

_CODE = ("import sys, numpy as np; from ingot.workflow import model as M; "
         "p = M.load_package(sys.argv[1]); np.savez(sys.argv[3], **M.run(p, dict(np.load(sys.argv[2])))); "
         "print(sorted(p.executable.external))")


def run_exported(package, data: dict, tmp_path) -> "tuple[dict, str]":
    """Export ``package`` under ``tmp_path``, run it on ``data`` in a new interpreter; returns the
    outputs and what that process printed (its external regions, sorted)."""
    exported = package.export(str(tmp_path / "m.ingot"))
    np.savez(tmp_path / "in.npz", **data)
    res = subprocess.run([sys.executable, "-c", _CODE, exported, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return dict(np.load(tmp_path / "out.npz")), res.stdout
