"""Ingot: an end-to-end deep-learning compiler in Python, in the line of Apache TVM.

Entry points (TVM names in parentheses):

* tensor programs: `ingot.te` (te), `ingot.script` (TVMScript), `ingot.tir` (tir),
  `ingot.tir.Schedule` (tir.Schedule), `ingot.build` / `ingot.lower` (tvm.build / tvm.lower);
* runtime: `ingot.nd.array`, `ingot.cpu`, `ingot.runtime.load_module`, `ingot.register_func`;
* models: `ingot.load` → `ingot.workflow.tune` → `ingot.compile` → `ingot.run` (tvmc; `ingot.workflow`);
* auto-tuning: `ingot.tune` (MetaSchedule: `tune_tir`, `tune_model`, databases, ...).

Subpackages load on first use, so ``import ingot`` stays fast.

Example:
    >>> import ingot
    >>> from ingot import te
    >>> A = te.placeholder((4,), name="A")
    >>> B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    >>> mod = ingot.IRModule({"main": te.create_prim_func([A, B])})
"""
from __future__ import annotations

from .ir import DataType, IRModule, structural_equal, structural_hash, assert_structural_equal
from .ir.error import IngotError
from .support import lazy_exports

__version__ = "0.1.0"

_SUBMODULES = {
    "ir", "arith", "tir", "te", "script", "ops", "graph", "frontend", "codegen", "runtime", "tune", "driver", "workflow", "cli",
}

# Top-level names → (module, attribute). Resolved lazily on first access.
_LAZY_ATTRS = {
    "build": ("ingot.driver.build", "build"),
    "lower": ("ingot.driver.lower", "lower"),
    "cpu": ("ingot.runtime", "cpu"),
    "cuda": ("ingot.runtime", "cuda"),
    "device": ("ingot.runtime", "device"),
    "Device": ("ingot.runtime", "Device"),
    "NDArray": ("ingot.runtime", "NDArray"),
    "nd": ("ingot.runtime.ndarray", None),
    "target": ("ingot.target", None),
    "Target": ("ingot.target", "Target"),
    "register_func": ("ingot.runtime", "register_func"),
    "get_global_func": ("ingot.runtime", "get_global_func"),
    "list_global_func_names": ("ingot.runtime", "list_global_func_names"),
    "transform": ("ingot.ir.transform", None),
    "Schedule": ("ingot.tir.schedule", "Schedule"),
    "load": ("ingot.workflow.model", "load"),
    "compile": ("ingot.workflow.model", "compile"),
    "run": ("ingot.workflow.model", "run"),
    "load_package": ("ingot.workflow.model", "load_package"),
    "profile": ("ingot.workflow.model", "profile"),
    "Package": ("ingot.workflow.model", "Package"),
    "tune": ("ingot.tune", None),
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY_ATTRS, _SUBMODULES)

# TVMScript registers the printer of statements, functions and modules (ingot.ir cannot import
# it: imports only go down), so `print(func)` and `mod.script()` show TVMScript.
from . import script  # noqa: E402,F401  (after the lazy table: script imports ingot.tir)
