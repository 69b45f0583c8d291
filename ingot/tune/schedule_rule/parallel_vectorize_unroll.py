"""`ParallelVectorizeUnroll`: annotate blocks with parallel / vectorize / unroll limits.

Note: like TVM, the rule only records intentions as block annotations
(``meta_schedule.parallel`` = max parallel extent, ``meta_schedule.vectorize`` = max vector
extent, ``meta_schedule.unroll_explicit`` = a sampled max unroll step); the post-processor
`RewriteParallelVectorizeUnroll` turns them into real loop kinds once tiling has shaped the
loops. The unroll step is a `sample_categorical` decision (mutated by `MutateUnroll`), the
parallel extent an annotation value (mutated by `MutateParallel`).

Example:
    >>> ParallelVectorizeUnroll().unroll_max_steps
    (0, 16, 64, 512)
"""
from __future__ import annotations

from typing import Any

from .base import ScheduleRule


class ParallelVectorizeUnroll(ScheduleRule):
    """Annotate each block (see the module note).

    ``max_jobs_per_core``: parallel extent limit = this × cores (-1: no parallelism).
    ``max_vectorize_extent``: vector extent limit (-1: none). ``unroll_max_steps``: choices.

    Example:
        >>> ParallelVectorizeUnroll(max_jobs_per_core=4).max_jobs_per_core
        4
    """

    def __init__(self, max_jobs_per_core: int = 16, max_vectorize_extent: int = 64,
                 unroll_max_steps=(0, 16, 64, 512), unroll_explicit: bool = True):
        self.max_jobs_per_core = int(max_jobs_per_core)
        self.max_vectorize_extent = int(max_vectorize_extent)
        self.unroll_max_steps = tuple(int(s) for s in unroll_max_steps)
        self.unroll_explicit = unroll_explicit

    def apply(self, sch: Any, block: Any) -> "list[Any]":
        annotations = sch.get(block).annotations
        if ("meta_schedule.parallel" in annotations or "meta_schedule.blocked_gemm" in annotations
                or "meta_schedule.nhwc_conv" in annotations):
            return [sch]  # already annotated, or already parallel and vectorized (BlockedGemm, NhwcConv)
        cores = getattr(getattr(self, "context", None), "num_cores", None) or 1
        if self.max_jobs_per_core > 0:
            sch.annotate(block, "meta_schedule.parallel", self.max_jobs_per_core * cores)
        if self.max_vectorize_extent > 0:
            sch.annotate(block, "meta_schedule.vectorize", self.max_vectorize_extent)
        if self.unroll_max_steps:
            probs = [1.0 / len(self.unroll_max_steps)] * len(self.unroll_max_steps)
            v = sch.sample_categorical(list(self.unroll_max_steps), probs)
            sch.annotate(block, "meta_schedule.unroll_explicit", v)
        return [sch]
