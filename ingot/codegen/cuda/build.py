"""Build a scheduled or lowered module for ``cuda``: lower → CUDA source → nvcc → `CUDAModule`.

Note: lowering for the GPU is the ordinary pipeline (`ingot.driver.lower.lower`) with
``tir.disable_vectorize`` set — the CUDA printer emits scalar code, a vectorized loop inside a
thread runs as a serial loop — followed by the host/device split inside `generate_cuda`. The
architecture is the target's ``-arch``, else the compute capability of ``cuda(0)`` when a GPU is
present, else `ingot.codegen.cuda.compile.DEFAULT_ARCH`; the fatbin carries PTX too, so newer
GPUs JIT it.

Example:
    >>> lib = build_cuda(sch.mod, "cuda -arch=sm_90")        # doctest: +SKIP
    >>> lib["main"](a_gpu, b_gpu)                            # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any

from ingot.ir.module import IRModule
from ingot.ir.transform import PassContext
from ingot.target import Target, as_target
from ingot.tir.function import PrimFunc

from .codegen import CUDASource, generate_cuda
from .compile import compile_cuda

__all__ = ["lower_for_cuda", "build_cuda", "cuda_arch"]


def lower_for_cuda(mod_or_func: Any, name: str = "main") -> IRModule:
    """Lower for CUDA: the standard pipeline with vectorization off (see the module note).

    Example:
        >>> lowered = lower_for_cuda(sch.mod)            # doctest: +SKIP
    """
    from ingot.driver.build import is_lowered, lower

    if isinstance(mod_or_func, (IRModule, PrimFunc)) and is_lowered(mod_or_func):
        return lower(mod_or_func, name)
    ctx = PassContext.current()
    config = {**ctx.config, "tir.disable_vectorize": True}
    with PassContext(opt_level=ctx.opt_level, config=config, required_pass=ctx.required_pass,
                     disabled_pass=ctx.disabled_pass, instruments=ctx.instruments):
        return lower(mod_or_func, name)


def cuda_arch(target: Target) -> str:
    """The ``sm_XX`` to compile for (target ``-arch``, else the local GPU, else the default).

    Example:
        >>> cuda_arch(Target("cuda -arch=sm_90"))
        'sm_90'
    """
    from .compile import normalize_arch

    if target.arch:
        return normalize_arch(target.arch)
    try:
        from ingot.runtime import cuda as rt_cuda

        if rt_cuda.is_available():
            major, minor = rt_cuda.compute_capability(0)
            return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001 - no driver: fall back to the default architecture
        pass
    return normalize_arch(None)


def build_cuda(mod_or_func: Any, target: "str | Target | None" = "cuda", name: str = "main", *,
               cache_dir: Any = None):
    """Compile ``mod_or_func`` (scheduled or lowered) for ``target`` and wrap it in a
    `ingot.runtime.cuda.CUDAModule`; needs ``nvcc`` (build) and, to call it, a GPU.

    Example:
        >>> lib = build_cuda(sch.mod, "cuda -arch=sm_90")    # doctest: +SKIP
        >>> "__global__" in lib.get_source()                 # doctest: +SKIP
        True
    """
    from ingot.runtime.cuda import CUDAModule

    target = as_target(target)
    if not target.is_cuda:
        raise ValueError(f"build_cuda needs a 'cuda' target, got {str(target)!r}")
    with target:
        lowered = lower_for_cuda(mod_or_func, name)
    source: CUDASource = generate_cuda(lowered, target)
    path = compile_cuda(source.code, cuda_arch(target), "fatbin", cache=cache_dir)
    with open(path, "rb") as f:
        image = f.read()
    return CUDAModule(image, source.metadata, source.code)
