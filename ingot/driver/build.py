"""`ingot.build`: tensor program → compiled, loaded module (TVM's ``tvm.build``).

Note: ``build`` accepts a `PrimFunc` or an `IRModule` of PrimFuncs, scheduled (with blocks) or
already lowered. Functions that still contain blocks are lowered with
`ingot.driver.lower.lower` under the target; the lowered module is then printed as C, compiled
once (content-hashed cache) and loaded (`ingot.codegen.build.build_module`).

Example:
    >>> import numpy as np, ingot
    >>> from ingot import te
    >>> A = te.placeholder((8,), name="A")
    >>> B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> lib = ingot.build(te.create_prim_func([A, B]), target="llvm")
    >>> a = np.arange(8, dtype="float32"); b = np.empty_like(a)
    >>> lib["main"](a, b)
    >>> b[:4]
    array([0., 2., 4., 6.], dtype=float32)
"""
from __future__ import annotations

from typing import Any

from ingot.ir.module import IRModule
from ingot.target import Target, as_target
from ingot.tir.analysis.lowered import is_lowered  # re-exported: ingot.driver.build.is_lowered stays
from ingot.tir.function import PrimFunc

__all__ = ["build", "lower", "lower_for_cuda", "is_lowered"]


def _as_module(mod_or_func: Any, name: str) -> IRModule:
    if isinstance(mod_or_func, PrimFunc):
        func = mod_or_func
        if "global_symbol" not in func.attrs:
            func = func.with_attr("global_symbol", name)
        return IRModule({name: func})
    if isinstance(mod_or_func, IRModule):
        return mod_or_func
    raise TypeError(
        f"ingot.build expects a tir.PrimFunc or an IRModule of PrimFuncs, got {type(mod_or_func).__name__}; "
        "for a TE computation call te.create_prim_func([inputs..., outputs...]) first"
    )


def lower(mod_or_func: Any, name: str = "main") -> IRModule:
    """Lower a scheduled PrimFunc/IRModule to loops (TVM's ``tvm.lower``); a module that is
    already lowered is returned as is.

    Example:
        >>> lowered = lower(prim_func)       # doctest: +SKIP
        >>> is_lowered(lowered)              # doctest: +SKIP
        True
    """
    mod = _as_module(mod_or_func, name)
    if is_lowered(mod):
        return mod
    from ingot.driver.lower import lower as lower_pipeline

    return lower_pipeline(mod)


def lower_for_cuda(mod_or_func: Any, name: str = "main") -> IRModule:
    """Lower for CUDA: the standard pipeline with ``tir.disable_vectorize`` set (the CUDA printer
    emits scalar code; a vectorized loop inside a thread runs as a serial loop). A module that is
    already lowered is returned as is.

    Example:
        >>> lowered = lower_for_cuda(sch.mod)            # doctest: +SKIP
    """
    from ingot.ir.transform import PassContext

    if isinstance(mod_or_func, (IRModule, PrimFunc)) and is_lowered(mod_or_func):
        return lower(mod_or_func, name)
    ctx = PassContext.current()
    config = {**ctx.config, "tir.disable_vectorize": True}
    with PassContext(opt_level=ctx.opt_level, config=config, required_pass=ctx.required_pass,
                     disabled_pass=ctx.disabled_pass, instruments=ctx.instruments):
        return lower(mod_or_func, name)


def build(mod_or_func: Any, target: "str | Target | dict | None" = "llvm", name: str = "main", *,
          cache_dir: Any = None):
    """Compile a tensor program for ``target`` and load it; returns an `ingot.runtime.Module`.

    ``mod_or_func``: a `PrimFunc` (exported as ``name`` unless it has a ``global_symbol``) or an
    `IRModule` of PrimFuncs, scheduled or lowered. ``target``: a TVM-style string such as
    ``"llvm -mcpu=znver5 -num-cores=2"``, a `Target`, or ``None`` for `Target.current()`.

    Example:
        >>> lib = ingot.build(func, "llvm -num-cores=2")    # doctest: +SKIP
        >>> lib["main"](a, b, c)                            # doctest: +SKIP
        >>> print(lib.get_source()[:40])                     # doctest: +SKIP
    """
    from ingot.codegen.build import build_module

    target = as_target(target)
    if target.is_cuda:
        # CUDA: lowered without vectorization, split into kernels, compiled by nvcc (docs/cuda.md).
        from ingot.codegen.cuda.build import build_cuda

        with target:
            lowered = lower_for_cuda(mod_or_func, name)
        return build_cuda(lowered, target, name, cache_dir=cache_dir)
    with target:
        lowered = lower(mod_or_func, name)
    return build_module(lowered, target, cache_dir=cache_dir)
