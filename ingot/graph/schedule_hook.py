"""Scheduling the kernels of a graph module at build time: tuned trace, default schedule, fallback.

Note: every PrimFunc that still has blocks gets a schedule before lowering, in this order:
  1. ``apply_schedule(func)`` — a hook the caller passes to `ingot.graph.build` (model tuning
     substitutes tuned traces here: return the scheduled PrimFunc, or None to decline);
  2. ``ingot.ops.schedule.default_schedule(func, target)`` — the rule-based default schedules
     (DLight-like) when that module exists;
  3. `fallback_schedule` — a small local schedule that is always safe: inline elementwise
     stages into their consumers, parallelize the fused outer spatial loops of stages with enough
     work, vectorize the innermost loop of spatial stages. Each primitive that raises a
     `ScheduleError` is skipped, so it never fails a build.
Functions marked ``tir.is_scheduled`` (hand-scheduled by the user) or already lowered are kept.
`schedule_module` reports for each kernel which of ``"tuned"``, ``"default"``, ``"fallback"``,
``"kept"`` (already scheduled/lowered) or ``"unscheduled"`` (every schedule declined) it got.

Example:
    >>> from ingot import te
    >>> A = te.placeholder((64, 64), name="A")
    >>> B = te.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
    >>> func = fallback_schedule(te.create_prim_func([A, B]))
    >>> func is not None
    True
"""
from __future__ import annotations

from typing import Any, Callable

from ingot.ir import IRModule
from ingot.ir.expr import as_const_int

#: Below this many loop iterations (spatial x reduce) a stage runs serially: an OpenMP fork
#: costs microseconds, more than a small kernel's whole run time.
PARALLEL_MIN_WORK = 1 << 14


def _default_schedule_fn() -> "Callable | None":
    from ingot.ops.schedule import default_schedule  # on first use: the rules load the ops layer

    return default_schedule


def _as_prim_func(result: Any) -> Any:
    """A PrimFunc from what a schedule hook returned (PrimFunc, Schedule, IRModule or None)."""
    from ingot.tir.function import PrimFunc

    if result is None or isinstance(result, PrimFunc):
        return result
    mod = getattr(result, "mod", result)
    if isinstance(mod, IRModule):
        funcs = [f for _, f in mod.items() if isinstance(f, PrimFunc)]
        if len(funcs) == 1:
            return funcs[0]
    raise TypeError(f"a schedule hook must return a PrimFunc, a Schedule or None, got {type(result).__name__}")


def _has_blocks(func: Any) -> bool:
    from ingot.tir.analysis import is_lowered

    return not is_lowered(func)


def _extent(loop_stmt: Any) -> "int | None":
    return as_const_int(loop_stmt.extent)


def fallback_schedule(func: Any, target: Any = None) -> Any:
    """A safe CPU schedule of ``func``: inline elementwise stages, parallel outer loops, vectorize.

    Used when no tuned record and no default schedule applies. Primitives that the schedule's
    checks refuse are skipped, so the result is always a valid PrimFunc.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((128, 256), name="A")
        >>> B = te.compute((128, 256), lambda i, j: A[i, j] + 1.0, name="B")
        >>> "parallel" in str(fallback_schedule(te.create_prim_func([A, B])))
        True
    """
    from ingot.tir.schedule import Schedule, ScheduleError

    sch = Schedule(func)
    skip = (ScheduleError, ValueError, NotImplementedError)
    names = [n for n in sch.state.blocks("main") if n != "root"]
    # Step 1: inline spatial (elementwise/injective) stages that are not outputs into consumers.
    for name in names[:-1]:
        try:
            block = sch.get_block(name)
            if all(iv.kind == "S" for iv in sch.get(block).iter_vars):
                sch.compute_inline(block)
        except skip:
            continue
    # Step 2: per remaining stage, parallelize the fused leading spatial loops, vectorize.
    for name in [n for n in sch.state.blocks("main") if n != "root"]:
        try:
            block = sch.get_block(name)
        except skip:
            continue
        node = sch.get(block)
        loops = sch.get_loops(block)
        if not loops:
            continue
        stmts = [sch.get(lp) for lp in loops]
        kinds = [iv.kind for iv in node.iter_vars]
        # TE stages bind one loop per iteration variable, spatial ones first; other nests
        # (hand-written) only get their outermost loop considered.
        n_spatial = kinds.index("R") if "R" in kinds else len(kinds)
        if len(loops) != len(kinds):
            n_spatial = min(n_spatial, 1)
        work = 1
        for s in stmts:
            e = _extent(s)
            work *= e if e is not None else 1 << 10
        reduce_block = any(k == "R" for k in kinds)
        outer = n_spatial if reduce_block else max(n_spatial - 1, 0)
        if work >= PARALLEL_MIN_WORK and outer >= 1:
            try:
                fused = sch.fuse(*loops[:outer]) if outer > 1 else loops[0]
                sch.parallel(fused)
            except skip:
                pass
        if not reduce_block and n_spatial >= 1:
            try:
                sch.vectorize(sch.get_loops(block)[-1])
            except skip:
                pass
    return sch.mod["main"]


def schedule_func(func: Any, target: Any, apply_schedule: "Callable | None" = None,
                  validate: "Callable | None" = None) -> "tuple[Any, str]":
    """``(scheduled func, how)`` for one kernel; ``how`` is tuned/default/fallback/kept/unscheduled.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((8,), name="A")
        >>> f, how = schedule_func(te.create_prim_func([A, te.compute((8,), lambda i: A[i] * 2.0)]), "llvm")
        >>> how in ("default", "fallback")
        True
    """
    if func.attrs.get("tir.is_scheduled") or not _has_blocks(func):
        return func, "kept"
    kernel = func.attrs.get("global_symbol", "?")

    def usable(candidate: Any, how: str) -> bool:
        # A schedule that a later stage (lowering, C codegen) rejects must not fail the whole
        # model: warn, and try the next, simpler schedule.
        if candidate is None or validate is None:
            return candidate is not None
        try:
            validate(candidate)
            return True
        except Exception as err:  # noqa: BLE001
            _warn(f"the {how} schedule of kernel {kernel!r} does not compile ({type(err).__name__}: {err}); "
                  f"trying a simpler schedule")
            return False

    if apply_schedule is not None:
        tuned = _as_prim_func(apply_schedule(func))
        if usable(tuned, "tuned"):
            return tuned, "tuned"
    default = _default_schedule_fn()
    if default is not None:
        try:
            scheduled = _as_prim_func(default(func, target))
        except Exception as err:  # noqa: BLE001 - a broken rule must not fail the model build
            _warn(f"ingot.ops.schedule.default_schedule failed on kernel {kernel!r}: {err}; using the fallback")
            scheduled = None
        if usable(scheduled, "default"):
            return scheduled, "default"
    try:
        scheduled = fallback_schedule(func, target)
    except Exception:  # noqa: BLE001 - e.g. a PrimFunc without a "main"-style root block
        scheduled = None
    if usable(scheduled, "fallback"):
        return scheduled, "fallback"
    return func, "unscheduled"


def _warn(message: str) -> None:
    import warnings

    warnings.warn(message, RuntimeWarning, stacklevel=3)


def schedule_module(mod: IRModule, target: Any, apply_schedule: "Callable | None" = None,
                    validate: "Callable | None" = None) -> "tuple[IRModule, dict[str, str]]":
    """Schedule every PrimFunc of ``mod``; returns the module and ``{kernel: how}``.

    ``validate(func)`` (optional) raises when a scheduled kernel cannot be lowered/compiled; the
    next schedule in the order (default → fallback → unscheduled) is tried then.

    Example:
        >>> mod2, report = schedule_module(IRModule({}), "llvm")
        >>> report
        {}
    """
    from ingot.tir.function import PrimFunc

    report: dict[str, str] = {}
    funcs = {}
    for name, func in mod.items():
        name = getattr(name, "name_hint", name)
        if isinstance(func, PrimFunc):
            func, report[name] = schedule_func(func, target, apply_schedule, validate)
        funcs[name] = func
    return IRModule(funcs, mod.attrs), report
