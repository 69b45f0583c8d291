"""`ingot.frontend`: model importers (TVM's ``relax.frontend``).

* `ingot.frontend.onnx.from_onnx(model_or_path, shape_dict, dtype_dict)` → ``(IRModule, params)``
* `ingot.frontend.reference.evaluate(mod, inputs)`: run an imported graph with the operators' numpy
  references (no compiler), to check an importer.

Errors: `ModelLoadError`, `UnsupportedOpsError`, `ShapeDictError`, `ConversionError`.

Example:
    >>> from ingot.frontend import ModelLoadError
    >>> issubclass(ModelLoadError, ValueError)
    True
"""
from __future__ import annotations

import importlib
from typing import Any

from .errors import ConversionError, FrontendError, ModelLoadError, ShapeDictError, UnsupportedOpsError


def __getattr__(name: str) -> Any:
    # onnx and torch are optional dependencies: import the importers on first use only.
    if name in ("onnx", "reference", "torch"):
        return importlib.import_module(f"ingot.frontend.{name}")
    raise AttributeError(f"module 'ingot.frontend' has no attribute {name!r}")
