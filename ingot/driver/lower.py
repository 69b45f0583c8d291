"""`ingot.lower`: run the TensorIR lowering pipeline (TVM's ``tvm.lower``).

Note: the pipeline takes scheduled TensorIR (blocks under loops) to the lowered form the code
generators print (docs/passes.md states that contract). It runs in four phases; the
``"tir.add_lower_pass"`` config inserts user passes after a phase, as in TVM:

* phase 0 — block-level IR, before anything is lowered;
* phase 1 — after blocks became loops (init lowered, bindings substituted, allocations compacted,
  guards on run-time sizes unswitched);
* phase 2 — after buffers were flattened to 1-D and the result simplified;
* phase 3 — at the end (after unrolling, vectorization, cleanup).

Example:
    >>> import ingot
    >>> from ingot.tir.transform import prim_func_pass
    >>> tag = prim_func_pass(lambda f, m, c: f.with_attr("seen", True), name="Tag")
    >>> with ingot.transform.PassContext(config={"tir.add_lower_pass": [(1, tag)]}):
    ...     [p.name for p in get_lowering_pipeline().passes][2:5]
    ['CompactBufferAllocation', 'UnswitchRuntimeGuards', 'Tag']
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.ir.module import IRModule
from ingot.ir.transform import Pass, PassConfigError, PassContext, Sequential
from ingot.tir.function import PrimFunc
from ingot.support import gc_paused
from ingot.tir import transform as tt

__all__ = ["lower", "get_lowering_pipeline"]


def _user_passes(ctx: PassContext) -> dict[int, list[Pass]]:
    phases: dict[int, list[Pass]] = {0: [], 1: [], 2: [], 3: []}
    for entry in ctx.config.get("tir.add_lower_pass", ()) or ():
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
            raise PassConfigError(f"tir.add_lower_pass entries are (phase, pass) pairs, got {entry!r}")
        phase, p = entry
        if phase not in phases:
            raise PassConfigError(f"tir.add_lower_pass: phase must be 0, 1, 2 or 3, got {phase!r} for {p!r}")
        if not isinstance(p, Pass):
            raise PassConfigError(
                f"tir.add_lower_pass: {p!r} (phase {phase}) is not a Pass; wrap a function with "
                "ingot.tir.transform.prim_func_pass or ingot.transform.module_pass"
            )
        phases[phase].append(p)
    return phases


def get_lowering_pipeline(ctx: "PassContext | None" = None) -> Sequential:
    """The lowering passes, with the context's ``tir.add_lower_pass`` user passes inserted.

    Example:
        >>> [p.name for p in get_lowering_pipeline().passes][-1]
        'RemoveNoOp'
    """
    ctx = ctx or PassContext.current()
    user = _user_passes(ctx)
    passes: list[Pass] = list(user[0])
    # Phase 1: blocks -> loops.
    passes += [tt.LowerInitBlock(), tt.ConvertBlocksToLoops(), tt.CompactBufferAllocation()]
    # Guards on run-time sizes out of the register tile while they are still structured `if`s (#17).
    passes += [tt.UnswitchRuntimeGuards()]
    passes += user[1]
    # Phase 2: software prefetch hints (need the multi-dimensional regions), flat buffers, canonical indices.
    passes += [tt.InjectSoftwarePrefetch(), tt.FlattenBuffer(), tt.Simplify()]
    passes += user[2]
    # Phase 3: loop-kind lowering and cleanup. Unroll before vectorize, so an unrolled loop inside a
    # vectorized one leaves straight-line stores that vectorize.
    passes += [tt.UnrollLoop(), tt.Simplify(), tt.VectorizeLoop(), tt.RemoveNoOp()]
    passes += user[3]
    return Sequential(passes, opt_level=0, name="tir.lower")


def _as_module(obj: Any, name: str) -> IRModule:
    if isinstance(obj, IRModule):
        return obj
    if isinstance(obj, PrimFunc):
        if "global_symbol" not in obj.attrs:
            obj = obj.with_attr("global_symbol", name)
        return IRModule({name: obj})
    mod = getattr(obj, "mod", None)  # a tir.Schedule
    if isinstance(mod, IRModule):
        return mod
    if isinstance(obj, (list, tuple)) and obj:  # TE tensors, as tvm.lower(s, [A, B]) took them
        from ingot import te

        return _as_module(te.create_prim_func(list(obj)), name)
    raise TypeError(
        f"ingot.lower takes an IRModule, a PrimFunc, a tir.Schedule or a list of TE tensors; "
        f"got {type(obj).__name__}"
    )


def lower(inp: Any, args: "Sequence[Any] | None" = None, name: str = "main", simple_mode: bool = False) -> IRModule:
    """Lower scheduled TensorIR to loop-level IR ready for code generation.

    ``inp`` is an `IRModule`, a `PrimFunc` (stored as ``name``), a ``tir.Schedule`` (its ``mod``) or a
    list of TE tensors (``args`` likewise, for TVM's ``lower(s, [A, B])`` spelling). ``simple_mode``
    is accepted for TVM compatibility and changes nothing. Functions get ``"tir.noalias"`` from the
    ``tir.noalias`` config (default True).

    Example:
        >>> from ingot.ir import Var, decl_buffer
        >>> from ingot.tir import PrimFunc, For, ForKind, BufferStore
        >>> A = decl_buffer((4, 4), "float32", "A"); i = Var("i")
        >>> f = PrimFunc([A], For(i, 0, 4, ForKind.SERIAL, BufferStore(A, 0.0, [i, i])))
        >>> mod = lower(f)
        >>> str(mod["main"].body.body.indices[0])
        'i * 5'
    """
    if args is not None and not isinstance(inp, (IRModule, PrimFunc)):
        inp = list(args)
    mod = _as_module(inp, name)
    ctx = PassContext.current()
    noalias = ctx.config.get("tir.noalias", True)
    functions = {}
    for key, func in mod.items():
        if isinstance(func, PrimFunc) and noalias and "tir.noalias" not in func.attrs:
            func = func.with_attr("tir.noalias", True)
        functions[key] = func
    mod = IRModule(functions, mod.attrs)
    with gc_paused():
        return get_lowering_pipeline(ctx)(mod)
