"""Build a lowered module for ``cuda``: CUDA source → nvcc → `CUDAModule`.

Note: `build_cuda` takes a lowered module; the driver lowers it first
(`ingot.driver.build.lower_for_cuda`: the ordinary pipeline with ``tir.disable_vectorize`` set —
the CUDA printer emits scalar code, a vectorized loop inside a thread runs as a serial loop), so
code generation never climbs back to the driver. The host/device split happens inside
`generate_cuda`. The
architecture is the target's ``-arch``, else the compute capability of ``cuda(0)`` when a GPU is
present, else `ingot.codegen.cuda.compile.DEFAULT_ARCH`; the fatbin carries PTX too, so newer
GPUs JIT it.

Example:
    >>> # needs nvcc and a GPU:
    >>> lib = ingot.build(sch.mod, "cuda -arch=sm_90")       # doctest: +SKIP
    >>> lib["main"](a_gpu, b_gpu)                            # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any

from ingot.ir.module import IRModule
from ingot.target import Target, as_target
from ingot.tir.analysis import is_lowered
from ingot.tir.function import PrimFunc

from .codegen import CUDASource, generate_cuda
from .compile import compile_cuda

__all__ = ["build_cuda", "cuda_arch"]


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


def build_cuda(lowered: Any, target: "str | Target | None" = "cuda", name: str = "main", *,
               cache_dir: Any = None):
    """Compile ``lowered`` (an IRModule or PrimFunc without blocks: lowered by
    `ingot.driver.build.lower_for_cuda`) for ``target`` and wrap it in a
    `ingot.runtime.cuda.CUDAModule`; needs ``nvcc`` (build) and, to call it, a GPU.
    ``ingot.build(mod, "cuda")`` lowers and calls it.

    Example:
        >>> # needs nvcc and a GPU:
        >>> lib = build_cuda(lower_for_cuda(sch.mod), "cuda -arch=sm_90")    # doctest: +SKIP
        >>> "__global__" in lib.get_source()                                # doctest: +SKIP
        True
    """
    from ingot.runtime.cuda import CUDAModule

    target = as_target(target)
    if not target.is_cuda:
        raise ValueError(f"build_cuda needs a 'cuda' target, got {str(target)!r}")
    if isinstance(lowered, PrimFunc):
        func = lowered if "global_symbol" in lowered.attrs else lowered.with_attr("global_symbol", name)
        lowered = IRModule({name: func})
    if not is_lowered(lowered):
        raise ValueError("build_cuda needs a lowered module (no blocks); call ingot.build(mod, 'cuda'), which "
                         "lowers it first (ingot.driver.build.lower_for_cuda)")
    source: CUDASource = generate_cuda(lowered, target)
    path = compile_cuda(source.code, cuda_arch(target), "fatbin", cache=cache_dir)
    with open(path, "rb") as f:
        image = f.read()
    return CUDAModule(image, source.metadata, source.code)
