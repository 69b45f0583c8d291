"""`BlockedGemm`: the cache-blocked GotoBLAS schedule of `ingot.ops.schedule.blocked` as a
tunable schedule rule (sampled tile sizes, so the search explores around the default).

Note: the rule-based default for large GEMMs (matmul, dense, batch_matmul) packs B into
NR-wide panels and A into MR-row panels, splits k into KC-deep slices and runs an MR x NR
register tile, parallel over MC-row blocks of C. Here the same structure is built from the
same building blocks (`blocked._operand_reads`, `blocked._pack`, `rules._fuse_epilogue`), but:

* MR and NR = NVEC x lanes fix the panel layouts (`transform_layout` records its index map as
  a constant), so each (MR, NVEC) pair that divides the sizes and fits the 32 zmm registers is
  one design-space *branch* (the default pair first);
* inside a branch, the row block ``M / MR -> (ic, ir)`` (MC = ir x MR: the parallel granularity
  and the L2 block of A) and the k split ``K -> (kc, ko, ki)`` (KC = ko x ki: the L1 slice of
  B; ki: the unrolled k steps) are `sample_perfect_tile` decisions, mutated by `MutateTileSize`.

The loop order is the default's: ``(batch, ic) parallel | kc | jr | ir | ko | ki(unroll) |
ii(unroll) | jn(unroll) | jl(vector)``. The default pair's branch carries the default's MC and KC
as its decisions and is marked ``meta_schedule.seeded``: the search measures it as generated in
its first round (beside the decision-free default schedule), so that mutations start from the
default's neighbourhood. The block is annotated ``meta_schedule.blocked_gemm`` so
that `ParallelVectorizeUnroll` / `RandomComputeLocation` leave it alone (it is already
parallel and vectorized). The rule also returns the untouched schedule, so `MultiLevelTiling`
still builds its own branches from it.

Example:
    >>> BlockedGemm().max_accumulators
    28
"""
from __future__ import annotations

import logging
from typing import Any

from .base import ScheduleRule

logger = logging.getLogger("ingot.tune")

MARK = "meta_schedule.blocked_gemm"
SEEDED = "meta_schedule.seeded"   # a design-space member whose own decisions are worth measuring
# (MR, NVEC) register tiles tried, default first: MR x NVEC zmm accumulators + NVEC B vectors
# + 1 broadcast must fit the 32 registers of AVX-512.
TILES = ((8, 2), (4, 4), (6, 4), (12, 2), (16, 1), (8, 3), (4, 3))


class BlockedGemm(ScheduleRule):
    """Tunable GotoBLAS blocking of large GEMM blocks (see the module note).

    ``tiles``: the (MR, NVEC) register tiles to branch on; ``max_branches``: how many of those
    that fit the sizes become design-space branches; ``max_unroll_k``: the largest ki.

    Example:
        >>> len(BlockedGemm(max_branches=2).tiles) >= 2
        True
    """

    def __init__(self, tiles=TILES, max_branches: int = 3, max_unroll_k: int = 8, max_accumulators: int = 28):
        self.tiles = tuple((int(a), int(b)) for a, b in tiles)
        self.max_branches = int(max_branches)
        self.max_unroll_k = int(max_unroll_k)
        self.max_accumulators = int(max_accumulators)

    def apply(self, sch: Any, block: Any) -> "list[Any]":
        from ingot.ops.schedule.analysis import analyze_block
        from ingot.ops.schedule.blocked import is_large_gemm

        target = getattr(getattr(self, "context", None), "target", None)
        if target is None or not getattr(target, "is_cpu", True):
            return [sch]
        try:
            info = analyze_block(sch, block)
        except Exception:  # a block the analysis does not understand: not a GEMM
            return [sch]
        if info.kind != "gemm" or not info.simple_loops or not is_large_gemm(info):
            return [sch]
        name = sch.get(block).name_hint
        lanes = int(target.vector_lanes(info.dtype))
        cores = max(1, int(target.num_cores or 1))
        out = [sch]
        for mr, nvec in self._fitting_tiles(info, lanes):
            try:
                trial = self._schedule(sch.copy(), name, info, lanes, cores, mr, nvec,
                                       seed=(mr, nvec) == (blocked_defaults()[0], blocked_defaults()[1]))
            except Exception as err:  # a primitive refused (layout, sizes): this branch is dropped
                logger.debug("BlockedGemm: block %r, MR=%d NVEC=%d skipped: %s", name, mr, nvec, err)
                continue
            out.append(trial)
        return out

    def _fitting_tiles(self, info: Any, lanes: int) -> "list[tuple[int, int]]":
        m, n = info.extents[info.i_index], info.extents[info.j_index]
        fits = [(mr, nv) for mr, nv in self.tiles
                if m % mr == 0 and n % (nv * lanes) == 0 and mr * nv + nv + 1 <= self.max_accumulators + 4
                and mr * nv <= self.max_accumulators]
        return fits[: self.max_branches]

    def _schedule(self, sch: Any, name: str, info: Any, lanes: int, cores: int, mr: int, nvec: int,
                  seed: bool = False) -> Any:
        from ingot.ops.schedule import blocked
        from ingot.ops.schedule.rules import _fuse_epilogue

        i, j, r = info.i_index, info.j_index, info.reduce[0]
        m, k = info.extents[i], info.extents[r]
        mc_dec, k_dec = (_default_decisions(m, k, mr, cores, self.max_unroll_k) if seed else (None, None))
        vi, vdim, bi, bdim = blocked._operand_reads(sch, name, info)
        if vdim < 0:  # weights pre-packed by the graph: the panel width is fixed
            if -vdim != nvec * lanes:
                raise ValueError(f"pre-packed panel width {-vdim} != NR {nvec * lanes}")
        # Step 1. pack B into NR-wide panels and A into MR-row panels (parallel copies).
        blk = sch.get(sch.get_block(name))
        vbuf, bbuf = blk.reads[vi].buffer, blk.reads[bi].buffer
        if vdim >= 0:
            blocked._pack(sch, name, vi, vdim, len(vbuf.shape), nvec * lanes, lanes, cores)
        bi = next(k for k, rg in enumerate(sch.get(sch.get_block(name)).reads) if rg.buffer is bbuf)
        blocked._pack(sch, name, bi, bdim, len(bbuf.shape), mr, lanes, cores)
        # Step 2. tiles: i -> (ic, ir | ii = MR), j -> (jr | jn = NVEC, jl = lanes), k -> (kc, ko, ki);
        # (ic, ir) and (kc, ko, ki) are sampled.
        b = sch.get_block(name)
        loops = sch.get_loops(b)
        io, ii = sch.split(loops[i], [None, mr])
        ic, ir = sch.split(io, sch.sample_perfect_tile(io, n=2, max_innermost_factor=1 << 20, decision=mc_dec))
        jr, jn, jl = sch.split(loops[j], [None, nvec, lanes])
        kco, ko, ki = sch.split(loops[r], sch.sample_perfect_tile(loops[r], n=3, max_innermost_factor=self.max_unroll_k,
                                                                  decision=k_dec))
        others = [loops[x] for x in info.spatial if x not in (i, j)]
        sch.reorder(*others, ic, kco, jr, ir, ko, ki, ii, jn, jl)
        sch.unroll(ki)
        sch.unroll(ii)
        sch.unroll(jn)
        sch.vectorize(jl)
        # Step 3. parallel over (batch, ic); C zeroed per row block before the k slices.
        outer = sch.fuse(*others, ic) if others else ic
        sch.parallel(outer)
        init = sch.decompose_reduction(b, kco)
        blocked._vectorize_init(sch, init, lanes)
        sch.annotate(b, MARK, 1)
        if seed and mc_dec is not None and k_dec is not None:
            # the search measures this design-space member with these decisions in its first
            # round (SearchStrategy.take_fixed_candidates), so mutations start from the default
            sch.annotate(b, SEEDED, 1)
        # Step 4. elementwise consumers per row block, after its k slices (on a copy: a consumer
        # an earlier rule already moved may refuse, then the epilogue stays a separate nest).
        trial = sch.copy()
        try:
            _fuse_epilogue(trial, trial.get_block(name), outer, lanes)
        except Exception as err:
            logger.debug("BlockedGemm: block %r: epilogue not fused: %s", name, err)
            return sch
        _drop_parallel_intent(trial, outer)
        return trial


def blocked_defaults() -> "tuple[int, int]":
    """The (MR, NVEC) register tile of the rule-based default (`blocked_gemm_rule`'s defaults)."""
    import inspect

    from ingot.ops.schedule.blocked import blocked_gemm_rule

    params = inspect.signature(blocked_gemm_rule).parameters
    return int(params["mr"].default), int(params["nvec"].default)


def _default_decisions(m: int, k: int, mr: int, cores: int, max_ki: int) -> "tuple[Any, Any]":
    """The rule-based default's (ic, ir) and (kc, ko, ki) tiles, as `blocked_gemm_rule`
    computes MC and KC (None where the default would not apply)."""
    from ingot.ops.schedule import blocked

    mc = min(blocked.MC, max(mr, (m // max(1, 2 * cores)) // mr * mr))
    while mc > mr and m % mc:
        mc -= mr
    ku = min(getattr(blocked, "KU", 4), max_ki)
    kc = blocked.KC
    mc_dec = [m // mc, mc // mr] if m % mc == 0 and mc % mr == 0 else None
    k_dec = [k // kc, kc // ku, ku] if k % kc == 0 and kc % ku == 0 else None
    return mc_dec, k_dec


def _drop_parallel_intent(sch: Any, outer: Any) -> None:
    """Consumers fused under the parallel row-block loop ``outer`` were annotated by
    `ParallelVectorizeUnroll` before (consumers are visited first): drop their parallel intent
    (a nested parallel loop) but keep vectorize/unroll."""
    from ingot.tir.schedule.analysis import is_ancestor

    outer_sref = sch.get_sref(outer)
    for func_name in sch.state.func_names():
        for bname in list(sch.state.blocks(func_name)):
            if bname == "root":
                continue
            blk = sch.get_block(bname, func_name)
            if "meta_schedule.parallel" in sch.get(blk).annotations and is_ancestor(outer_sref, sch.get_sref(blk)):
                sch.unannotate(blk, "meta_schedule.parallel")
