"""Post-processors: run on every sampled candidate after its design-space trace.

Note: a postproc either rewrites the schedule (recorded in the trace after ``enter_postproc``, so
the stored trace replays to the measured program) or rejects the candidate (returns False).
`RewriteParallelVectorizeUnroll` turns the block annotations of `ParallelVectorizeUnroll`
into loop kinds; `VerifyLoops` rejects programs code generation would mishandle.

Example:
    >>> [repr(p) for p in default_postprocs()]
    ['RewriteParallelVectorizeUnroll', 'RewriteReductionBlock', 'VerifyLoops']
"""
from __future__ import annotations

from typing import Any

from ingot.ir.expr import as_const_int
from ingot.tir.stmt import ForKind

from ..schedule_rule.base import loop_iter_kinds


class Postproc:
    """Base class: ``apply(sch) -> bool`` (False rejects the candidate).

    Example:
        >>> # ok = postproc.apply(sch)
    """

    def initialize_with_tune_context(self, context: Any) -> None:
        self.context = context

    def apply(self, sch: Any) -> bool:
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__


def _blocks(sch: Any) -> list:
    """Handles of every (non-root) block of every function, in program order."""
    out = []
    for func_name in sch.state.func_names():
        for name in list(sch.state.blocks(func_name)):
            if name != "root":
                out.append(sch.get_block(name, func_name))
    return out


EXPLICIT_UNROLL_MAX = 64


class RewriteParallelVectorizeUnroll(Postproc):
    """Rewrite ``meta_schedule.parallel/vectorize/unroll_explicit`` block annotations:

    Step 1. fuse the outermost spatial loops while their product stays within the parallel
    limit, and mark the fused loop parallel. Step 2. vectorize the innermost loop when it is
    spatial and within the vector limit. Step 3. put ``pragma_auto_unroll_max_step`` (and
    ``pragma_unroll_explicit``, 1 up to ``EXPLICIT_UNROLL_MAX`` steps, else 0: GCC unrolls) on
    the outermost loop. The annotations are removed.

    Example:
        >>> # RewriteParallelVectorizeUnroll().apply(sch)
    """

    def apply(self, sch: Any) -> bool:
        for block in _blocks(sch):
            ann = sch.get(block).annotations
            keys = [k for k in ("meta_schedule.parallel", "meta_schedule.vectorize", "meta_schedule.unroll_explicit")
                    if k in ann]
            if not keys:
                self._vectorize_moved_block(sch, block)
                continue
            max_par = int(ann.get("meta_schedule.parallel", 0) or 0)
            max_vec = int(ann.get("meta_schedule.vectorize", 0) or 0)
            unroll = int(ann.get("meta_schedule.unroll_explicit", 0) or 0)
            for k in keys:
                sch.unannotate(block, k)
            loops = sch.get_loops(block)
            if not loops:
                continue
            kinds = loop_iter_kinds(sch, block, loops, strict=False) or [None] * len(loops)
            extents = [as_const_int(sch.get(l).extent) for l in loops]
            # Step 1. parallel
            n_par, prod = 0, 1
            if max_par > 1:
                for kind, ext in zip(kinds, extents):
                    if kind != "S" or ext is None or prod * ext > max_par:
                        break
                    prod *= ext
                    n_par += 1
            # Step 2. vectorize the innermost spatial loop (not one used for parallelism)
            inner = len(loops) - 1
            if (max_vec > 1 and inner >= n_par and kinds and kinds[inner] == "S" and extents[inner] is not None
                    and 1 < extents[inner] <= max_vec):
                sch.vectorize(loops[inner])
            if n_par > 0 and prod > 1:
                fused = sch.fuse(*loops[:n_par]) if n_par > 1 else loops[0]
                sch.parallel(fused)
                loops = sch.get_loops(block)
            # Step 3. unroll pragma on the outermost loop
            if unroll > 0:
                sch.annotate(loops[0], "pragma_auto_unroll_max_step", unroll)
                # Up to EXPLICIT_UNROLL_MAX steps the lowering expands the loops (TVM's
                # unroll_explicit); beyond, it marks them for `#pragma GCC unroll`: expanding
                # 512 steps of a conv nest in Python took 10 s per candidate (555 KB of C),
                # a quarter of the random samples, and made builds the bulk of tuning time.
                sch.annotate(loops[0], "pragma_unroll_explicit", int(unroll <= EXPLICIT_UNROLL_MAX))
        return True


    @staticmethod
    def _vectorize_moved_block(sch: Any, block: Any, max_vec: int = 64) -> None:
        """A spatial block moved under a parallel loop (a cache write-back, a fused epilogue) has
        no annotations of its own: vectorize its innermost loop when it is a power of two in
        [4, max_vec] (the tile of the block it follows)."""
        b = sch.get(block)
        if b.init is not None or any(iv.kind != "S" for iv in b.iter_vars):
            return
        loops = sch.get_loops(block)
        if len(loops) < 2 or not any(sch.get(l).kind == ForKind.PARALLEL for l in loops[:-1]):
            return
        inner = sch.get(loops[-1])
        ext = as_const_int(inner.extent)
        kinds = loop_iter_kinds(sch, block, loops[-1:], strict=False)
        if (inner.kind == ForKind.SERIAL and ext is not None and 4 <= ext <= max_vec and ext & (ext - 1) == 0
                and kinds and kinds[-1] == "S"):
            sch.vectorize(loops[-1])


class RewriteReductionBlock(Postproc):
    """Split every reduction block that still has an ``init`` with ``decompose_reduction`` at its
    first reduce loop (TVM's postproc of the same name): the init then runs in its own loop nest
    before the reduction instead of behind a ``k == 0`` test in the innermost loop.

    Example:
        >>> repr(RewriteReductionBlock())
        'RewriteReductionBlock'
    """

    def apply(self, sch: Any) -> bool:
        for block in _blocks(sch):
            if sch.get(block).init is None:
                continue
            loops = sch.get_loops(block)
            kinds = loop_iter_kinds(sch, block, loops, strict=False) or []
            first = next((l for l, k in zip(loops, kinds) if k == "R"), None)
            if first is None:
                continue  # every reduce loop has extent 1 or is fused with spatial ones: keep the init
            try:
                sch.decompose_reduction(block, first)
            except Exception:  # a layout the primitive refuses: the guarded init stays correct
                continue
        return True


class VerifyLoops(Postproc):
    """Reject candidates with symbolic-extent vectorized loops or vector loops longer than
    ``max_vector_extent``. Loops longer than 64 lanes are fine for C code generation
    (`VectorizeLoop` leaves them as ``#pragma omp simd`` loops: the blocked GEMM's packing copies
    vectorize a whole K row), so the default limit only catches runaway fused extents.

    Example:
        >>> VerifyLoops(max_vector_extent=32).max_vector_extent
        32
    """

    def __init__(self, max_vector_extent: int = 4096):
        self.max_vector_extent = max_vector_extent

    def apply(self, sch: Any) -> bool:
        from ingot.ir.functor import Visitor

        ok = [True]
        limit = self.max_vector_extent

        class _V(Visitor):
            def visit_For(self, node):
                if node.kind == ForKind.VECTORIZED:
                    ext = as_const_int(node.extent)
                    if ext is None or ext > limit:
                        ok[0] = False
                self.visit(node.body)

        for _, func in sch.mod.items():
            _V().visit(func.body)
        return ok[0]


def default_postprocs() -> list:
    """The default CPU post-processors.

    Example:
        >>> len(default_postprocs())
        3
    """
    return [RewriteParallelVectorizeUnroll(), RewriteReductionBlock(), VerifyLoops()]



__all__ = ["Postproc", "RewriteParallelVectorizeUnroll", "RewriteReductionBlock", "VerifyLoops", "default_postprocs"]
