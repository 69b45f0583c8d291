"""`ingot.workflow`: the model workflow load → tune → compile → run (TVM's ``tvmc``).

Note: the top of the layer list (docs/architecture.md): it uses the frontends (``load``), the
graph (``compile``), the tuner (``tune``, tuning records at compile time) and the runtime
(``run``); nothing in Ingot below it imports it. ``ingot.load``, ``ingot.compile``,
``ingot.run``, ``ingot.profile`` are these functions; ``ingot.driver.model`` re-exports them
for code written before this package existed.

Example:
    >>> import ingot
    >>> ingot.compile is ingot.workflow.compile
    True
    >>> # skipped here: needs a model file, and tuning takes minutes (tests/tune_model runs it)
    >>> model = ingot.load("mlp.onnx")                              # doctest: +SKIP
    >>> records = ingot.workflow.tune(model, "llvm", trials=64, work_dir="w")  # doctest: +SKIP
    >>> package = ingot.compile(model, "llvm", tuning_records=records)         # doctest: +SKIP
    >>> out = ingot.run(package, {"x": x})                                    # doctest: +SKIP
"""
from __future__ import annotations

from ingot.support import lazy_exports

from .model import (KernelTime, Model, ModelInputError, Package, Profile, TensorInfo, check_inputs, compile,
                    from_module, kernel_timed_main, load, load_package, profile, run)
from .tune import tune

__all__ = ["KernelTime", "Model", "ModelInputError", "Package", "Profile", "TensorInfo", "check_inputs", "compile",
           "from_module", "kernel_timed_main", "load", "load_package", "profile", "run", "tune", "validate_in_model",
           "InModelReport"]


# In-model validation loads the tuner's record code: only on first use, so `import ingot`
# followed by ingot.load/compile/run stays fast.
__getattr__, __dir__ = lazy_exports(__name__, {
    "validate_in_model": ("ingot.workflow.validate", "validate_in_model"),
    "InModelReport": ("ingot.workflow.validate", "InModelReport"),
})
