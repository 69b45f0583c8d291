"""`ingot.codegen`: source generation for lowered TensorIR and the build of runtime modules.

* `ingot.codegen.c` — the C backend (CPU): `generate_c(mod, target) -> CSource`;
* `ingot.codegen.build` — `build_module(lowered_mod, target) -> ingot.runtime.Module`;
* `ingot.codegen.sanitize` — safe C identifiers; `ingot.codegen.prelude` — the C ABI prelude;
* `ingot.codegen.toolchain` — the system C compiler (`run_compiler`, also nvcc's), cached;
* `ingot.codegen.disk_cache` — the on-disk content-hashed cache itself (location, entries, size
  cap); the toolchain, `ingot.codegen.cuda.compile` and `ingot.driver.kernel_cache` call it.

Submodules load on first use (``import ingot.codegen`` does not start a compiler).

Example:
    >>> import ingot.codegen
    >>> callable(ingot.codegen.build_module)
    True
"""
from __future__ import annotations

from ingot.support import lazy_exports

_LAZY = {
    "build_module": ("ingot.codegen.build", "build_module"),
    "generate_source": ("ingot.codegen.build", "generate_source"),
    "generate_c": ("ingot.codegen.c", "generate_c"),
    "CodegenError": ("ingot.codegen.c.printer", "CodegenError"),
    "CompileError": ("ingot.codegen.toolchain", "CompileError"),
    "ToolchainError": ("ingot.codegen.toolchain", "ToolchainError"),
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
