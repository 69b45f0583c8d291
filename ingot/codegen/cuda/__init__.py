"""The CUDA backend: lowered TensorIR → CUDA C++ kernels + launch metadata → nvcc → a
`ingot.runtime.cuda.CUDAModule` (TVM's ``target/source/codegen_cuda`` and ``SplitHostDevice``).

* `split_host_device` — thread-bound loops → kernels with launch extents, ``__syncthreads``
  insertion, the unbound-loop check (`ingot.codegen.cuda.split`);
* `generate_cuda` — the ``.cu`` source and the launch metadata (`ingot.codegen.cuda.codegen`);
* `compile_cuda` — nvcc, cached by content (`ingot.codegen.cuda.compile`);
* `build_cuda` — generate + compile a lowered module + wrap it in a runtime module
  (`ingot.codegen.cuda.build`; lowering for CUDA is the driver's: `ingot.driver.build.lower_for_cuda`).

Example:
    >>> import ingot.codegen.cuda as cg
    >>> callable(cg.generate_cuda) and callable(cg.build_cuda)
    True
"""
from __future__ import annotations

from ingot.support import lazy_exports

_LAZY = {
    "split_host_device": ("ingot.codegen.cuda.split", "split_host_device"),
    "insert_syncs": ("ingot.codegen.cuda.split", "insert_syncs"),
    "GPULoweringError": ("ingot.codegen.cuda.split", "GPULoweringError"),
    "generate_cuda": ("ingot.codegen.cuda.codegen", "generate_cuda"),
    "CUDASource": ("ingot.codegen.cuda.codegen", "CUDASource"),
    "compile_cuda": ("ingot.codegen.cuda.compile", "compile_cuda"),
    "build_cuda": ("ingot.codegen.cuda.build", "build_cuda"),
    "CUDAPrinter": ("ingot.codegen.cuda.printer", "CUDAPrinter"),
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
