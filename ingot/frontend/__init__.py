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

from ingot.support import lazy_exports

from .errors import ConversionError, FrontendError, ModelLoadError, ShapeDictError, UnsupportedOpsError


# onnx and torch are optional dependencies: import the importers on first use only.
__getattr__, __dir__ = lazy_exports(__name__, submodules=("onnx", "reference", "torch"))
