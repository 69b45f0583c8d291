"""`default_schedule`: the rule-based schedule every untuned kernel gets (TVM's DLight idea).

Note: for each block of the function's root (in program order) the driver picks a rule from the
block's structure (`analysis.analyze_block`) — GEMM-like → register-tiled micro-kernel with the
elementwise epilogue fused; row reductions (softmax, layernorm) → vector lane accumulators via
rfactor; other reductions → parallel spatial loops, vectorized when the reduction is over an
outer axis; elementwise → parallel + vectorized — and runs it on a *copy*
of the schedule. If a primitive refuses (`ScheduleError`), the copy is dropped and the next,
simpler rule is tried, ending with `parallel_vectorize` and finally "leave the block alone".
Correctness therefore never depends on a rule being right: every step is a checked primitive.
Blocks already moved under another block's loops (a fused epilogue) are skipped.

Example:
    >>> from ingot import te
    >>> A = te.placeholder((64, 32), name="A"); B = te.placeholder((32, 64), name="B")
    >>> k = te.reduce_axis((0, 32), name="k")
    >>> C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    >>> D = te.compute((64, 64), lambda i, j: te.max(C[i, j], 0.0), name="D")
    >>> f = default_schedule(te.create_prim_func([A, B, D]), "llvm -num-cores=2")
    >>> type(f).__name__
    'PrimFunc'
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ingot.cpu_model import named_cpu
from ingot.ir.module import IRModule
from ingot.target import Target, as_target
from ingot.tir.function import PrimFunc
from ingot.tir.schedule import Schedule
from ingot.tir.schedule.error import ScheduleError
from ingot.tir.stmt import BlockRealize, For, ForKind, SeqStmt

from .._util import KEEP_STAGE_KEY
from .analysis import analyze_block
from .blocked import blocked_gemm_rule
from .conv import conv_oc_rule
from .conv_nhwc import conv_nhwc_rule
from .conv_window import nhwc_window_rule
from .reduction import gemv_rule, row_norm_rule, row_reduction_rule
from .rules import elementwise_rule, gemm_rule, parallel_vectorize, reduction_rule
from .winograd import winograd_rule

__all__ = ["default_schedule", "schedule_blocks", "inline_injective", "RULES"]

# kind -> rules to try in order (the last ones are the safe fallbacks).
RULES: dict[str, list[Callable]] = {
    "gemm": [conv_nhwc_rule, blocked_gemm_rule, conv_oc_rule, gemv_rule, gemm_rule, reduction_rule],
    "reduction": [nhwc_window_rule, row_norm_rule, row_reduction_rule, reduction_rule],
    "elementwise": [elementwise_rule],
    "opaque": [],
}


def _top_level_blocks(func: PrimFunc) -> list[str]:
    """Names of the blocks directly in the root block's body (each under its own loop nest)."""
    root = func.body.block if isinstance(func.body, BlockRealize) else None
    if root is None:
        return []
    stmts = list(root.body.seq) if isinstance(root.body, SeqStmt) else [root.body]
    names = []
    for s in stmts:
        while isinstance(s, For):
            s = s.body
        if isinstance(s, BlockRealize):
            names.append(s.block.name_hint)
    return names


def schedule_blocks(sch: Schedule, target: Target, *, log: Optional[list] = None) -> Schedule:
    """Apply the default rules to every top-level block of ``sch``'s working function and return
    ``sch`` (scheduled in place). Each rule runs inside ``sch.attempt()``: a rule that fails
    halfway leaves no trace of itself, and the next, simpler rule starts from the same state.
    ``log`` (a list) receives ``(block, rule or None, error or None)`` for each block — what
    happened and why.

    Example:
        >>> # sch = schedule_blocks(Schedule(func), Target("llvm -num-cores=2"))
    """
    func = sch.mod[sch.func_working_on or "main"]
    # parsed once: every rule derives its tiles from this CPU model (a GPU target has none: its
    # kernels are bound to threads by the CUDA lowering; these loops get 128-bit vectors)
    cpu = target.cpu if target.is_cpu else named_cpu("x86-64-v2").with_cores(target.num_cores)
    # A Winograd conv's stages need each other's layout (ops/schedule/winograd.py): one rule for all.
    scheduled = winograd_rule(sch, _top_level_blocks(func), cpu, RULES["gemm"])
    if log is not None:
        log.extend(scheduled)
    inline_injective(sch, log=log)
    func = sch.mod[sch.func_working_on or "main"]
    for name in _top_level_blocks(func):
        try:
            info = analyze_block(sch, sch.get_block(name))
        except ScheduleError:
            continue  # moved or removed by an earlier rule (a fused epilogue)
        if _already_scheduled(sch, name):
            continue
        errors = []
        for rule in RULES.get(info.kind, []) + [_baseline]:
            try:
                with sch.attempt():  # a multi-step rule: all of it or nothing
                    rule(sch, name, info, cpu)
            except ScheduleError as e:  # a primitive refused: try the next, simpler rule
                errors.append(f"{rule.__name__}: {e}".splitlines()[0])
                continue
            except (NotImplementedError, ValueError, TypeError, AttributeError) as e:
                # A primitive or analysis this rule relies on does not handle the block (yet):
                # a model build must not fail for it, so fall back the same way.
                errors.append(f"{rule.__name__}: {type(e).__name__}: {e}".splitlines()[0])
                continue
            if log is not None:
                log.append((name, rule.__name__, errors or None))
            break
        else:
            if log is not None:
                log.append((name, None, errors))
    return sch


def _spatial(sch: Schedule, block_rv: Any) -> bool:
    return all(iv.kind == "S" for iv in sch.get(block_rv).iter_vars)


def inline_injective(sch: Schedule, *, log: Optional[list] = None) -> list[str]:
    """compute_inline every intermediate elementwise/injective block (reshape, transpose, slice,
    bias add, the pieces of GELU...) that no GEMM/conv/reduction feeds, directly or through other
    spatial blocks, and whose consumers are all spatial blocks, so a fused chain runs as one pass over memory instead of one parallel loop and one workspace
    buffer per stage; returns the names of the inlined blocks.

    Note: a chain downstream of a GEMM, conv or reduction output is left alone — those rules
    place their epilogue themselves (per register tile, or one inlined pass) and a conv's
    padding stage feeds a reduction, so it is not a candidate either. Inlining recomputes a
    block once per consumer read (an injective copy costs a load; GELU's bias add, read twice,
    costs one more add), the trade TVM's injective fusion makes too.

    Example:
        >>> # C = relu(A * 2) as two blocks -> one block "C" reading A
        >>> from ingot import te
        >>> from ingot.tir.schedule import Schedule
        >>> A = te.placeholder((8, 16), name="A")
        >>> B = te.compute((8, 16), lambda i, j: A[i, j] * 2.0, name="B")
        >>> C = te.compute((8, 16), lambda i, j: te.max(B[i, j], 0.0), name="C")
        >>> inline_injective(Schedule(te.create_prim_func([A, C])))
        ['B']
    """
    inlined = []
    func = sch.mod[sch.func_working_on or "main"]
    names = _top_level_blocks(func)
    # Step 1. Blocks downstream of a GEMM/conv/reduction (transitively: conv -> bias -> residual
    # add -> relu) are that rule's epilogue; mark them before anything moves.
    downstream: set = set()
    for name in names:
        block = sch.get_block(name)
        if not _spatial(sch, block) or any(sch.get(p).name_hint in downstream for p in sch.get_producers(block)):
            downstream.add(name)
    # Step 2. Inline the others in program order (a chain collapses front to back).
    for name in names:
        if name in downstream:
            continue
        try:
            block = sch.get_block(name)
        except ScheduleError:
            continue
        if _already_scheduled(sch, name):
            continue  # placed by a whole-function rule (winograd_rule)
        if KEEP_STAGE_KEY in sch.get(block).annotations:
            continue  # its op asks for its own loop nest (the value is read many times)
        consumers = sch.get_consumers(block)
        if not consumers or not all(_spatial(sch, b) for b in consumers):
            continue
        try:
            sch.compute_inline(block)  # checks every precondition (not an output, one store...)
        except (ScheduleError, NotImplementedError, ValueError, TypeError) as e:
            if log is not None:
                log.append((name, None, [f"inline_injective: {e}".splitlines()[0]]))
            continue
        inlined.append(name)
        if log is not None:
            log.append((name, "inline_injective", None))
    return inlined


def _baseline(sch: Schedule, name: str, info: Any, cpu: Any) -> None:
    if info.reduce:
        raise ScheduleError(f"block {name!r}: no safe baseline for a reduction the rules refused")
    parallel_vectorize(sch, name, cpu.lanes(info.dtype), cpu.cores)


def _already_scheduled(sch: Schedule, name: str) -> bool:
    """A block under a parallel loop (moved there as an epilogue) has been handled."""
    return any(sch.get(lp).kind != ForKind.SERIAL for lp in sch.get_loops(sch.get_block(name)))


def default_schedule(func: "PrimFunc | IRModule", target: "Target | str | None" = None) -> "PrimFunc | IRModule":
    """The default (untuned) schedule of ``func`` for ``target`` (default: `Target.current()`,
    else ``"llvm"``): a PrimFunc for a PrimFunc, an IRModule (every PrimFunc scheduled) for an
    IRModule. Functions without a root block (already lowered) are returned unchanged.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((8, 64), name="A")
        >>> B = te.compute((8, 64), lambda i, j: A[i, j] * 2.0, name="B")
        >>> f = default_schedule(te.create_prim_func([A, B]), "llvm -num-cores=2")
        >>> "vectorized" in f.script() and "parallel" in f.script()
        True
    """
    target = as_target(target)  # a Target passes through as is: the caller parsed it once
    if isinstance(func, IRModule):
        funcs = {}
        for name, f in func.items():
            funcs[name] = default_schedule(f, target) if isinstance(f, PrimFunc) else f
        return IRModule(funcs)
    if not isinstance(func, PrimFunc):
        raise TypeError(f"default_schedule expects a PrimFunc or IRModule, got {type(func).__name__}")
    if not _top_level_blocks(func):
        return func
    sch = schedule_blocks(Schedule(func), target)
    return sch.mod["main"]
