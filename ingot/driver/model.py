"""Compatibility: the model workflow moved to `ingot.workflow` (``ingot.workflow.model``).

Note: ``ingot.driver`` is TVM's ``tvm.driver`` again (lower/build of tensor programs); the model
workflow (load → tune → compile → run) is the top layer `ingot.workflow`. This module
re-exports the moved names so code that imports ``ingot.driver.model`` keeps working; new code
uses ``ingot.load``/``ingot.compile``/``ingot.run`` or ``ingot.workflow``. Nothing inside Ingot
imports it (tests/test_layering.py checks that: it is the one module allowed to point up).

Example:
    >>> from ingot.driver.model import compile
    >>> import ingot.workflow
    >>> compile is ingot.workflow.compile
    True
"""
from __future__ import annotations

from ingot.workflow.model import (  # noqa: F401
    FORMAT_VERSION, LIBRARY, MANIFEST, KernelTime, Model, ModelInputError, Package, Profile, TensorInfo, check_inputs,
    compile, kernel_timed_main, load, load_package, profile, run)

__all__ = ["FORMAT_VERSION", "LIBRARY", "MANIFEST", "KernelTime", "Model", "ModelInputError", "Package", "Profile",
           "TensorInfo", "check_inputs", "compile", "kernel_timed_main", "load", "load_package", "profile", "run"]
