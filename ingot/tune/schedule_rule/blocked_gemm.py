"""`BlockedGemm`: the cache-blocked GEMM of `ingot.ops.schedule.blocked` as a tunable schedule
rule (sampled tile sizes, so the search explores around the rule-based default).

Note: the rule-based default for large GEMMs (matmul, dense, batch_matmul) runs an MR x NR
register tile (NR = NVEC x lanes) over KC-deep k slices with B packed into NR-wide panels. Two
loop orders are built here from blocked.py's own building blocks (`_operand_reads`, `_pack`,
`_pack_slice`, `_vectorize_init`; `rules._fuse_epilogue`):

* ``blis`` (the default's order when blocked.py has `_pack_slice`): ``batch | kc | ic | jr
  (parallel) | ir | ko | ki | ii | jn | jl``, B packed per k slice under ``kc``, A read in place;
* ``goto``: A and B packed up front into MR-row / NR-wide panels, ``(batch, ic) parallel | kc |
  jr | ir | ko | ki | ii | jn | jl``, elementwise consumers fused per row block.

MR and NVEC fix the panel layouts (`transform_layout` records its index map as a constant), so
each (MR, NVEC) pair that divides the sizes and fits the 32 zmm registers is one design-space
*branch* (``blis`` for up to ``max_branches`` pairs, ``goto`` for the default pair). Inside a
branch, the row blocks ``M / MR -> (ic, ir)`` (MC = ir x MR: the L2 block of A; the parallel
granularity for ``goto``) and the k split ``K -> (kc, ko, ki)`` (KC = ko x ki: the slice depth;
ki: the unrolled k steps) are `sample_perfect_tile` decisions, mutated by `MutateTileSize`.
The unrolled ``ki ii jn`` and vectorized ``jl`` form the micro-kernel.

The default order's branch with the default pair carries the default's MC and KC as its
decisions and is marked ``meta_schedule.seeded``: the search measures it as generated in its
first round (beside the decision-free default schedule), so mutations start from the default's
neighbourhood. The block is annotated ``meta_schedule.blocked_gemm`` so that
`ParallelVectorizeUnroll` / `RandomComputeLocation` leave it alone (it is already parallel and
vectorized). The rule also returns the untouched schedule, so `MultiLevelTiling` still builds
its own branches from it.

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
        from ingot.ops.schedule import blocked
        from ingot.ops.schedule.analysis import analyze_block

        target = getattr(getattr(self, "context", None), "target", None)
        if target is None or not getattr(target, "is_cpu", True):
            return [sch]
        try:
            info = analyze_block(sch, block)
        except Exception:  # a block the analysis does not understand: not a GEMM
            return [sch]
        if info.kind != "gemm" or not info.simple_loops or not blocked.is_large_gemm(info):
            return [sch]
        name = sch.get(block).name_hint
        lanes = int(target.vector_lanes(info.dtype))
        cores = max(1, int(target.num_cores or 1))
        default_tile = blocked_defaults()
        # the loop order of the rule-based default first (BLIS when blocked.py packs per k slice)
        orders = ["blis", "goto"] if hasattr(blocked, "_pack_slice") else ["goto"]
        branches = [(orders[0], tile) for tile in self._fitting_tiles(info, lanes)]
        if len(orders) > 1 and default_tile in [t for _, t in branches]:
            branches.append((orders[1], default_tile))
        out = [sch]
        for order, (mr, nvec) in branches:
            seed = order == orders[0] and (mr, nvec) == default_tile
            try:
                trial = self._schedule(sch.copy(), name, info, lanes, cores, mr, nvec, order, seed)
            except Exception as err:  # a primitive refused (layout, sizes): this branch is dropped
                logger.debug("BlockedGemm: block %r, %s MR=%d NVEC=%d skipped: %s", name, order, mr, nvec, err)
                continue
            out.append(trial)
        return out

    def _fitting_tiles(self, info: Any, lanes: int) -> "list[tuple[int, int]]":
        m, n = info.extents[info.i_index], info.extents[info.j_index]
        fits = [(mr, nv) for mr, nv in self.tiles
                if m % mr == 0 and n % (nv * lanes) == 0 and mr * nv <= self.max_accumulators]
        return fits[: self.max_branches]

    def _schedule(self, sch: Any, name: str, info: Any, lanes: int, cores: int, mr: int, nvec: int,
                  order: str, seed: bool = False) -> Any:
        from ingot.ops.schedule import blocked

        i, j, r = info.i_index, info.j_index, info.reduce[0]
        m, k = info.extents[i], info.extents[r]
        mc_dec, k_dec = _default_decisions(m, k, mr, cores, self.max_unroll_k) if seed else (None, None)
        vi, vdim, bi, bdim = blocked._operand_reads(sch, name, info)
        if vdim < 0 and -vdim != nvec * lanes:  # weights pre-packed by the graph: fixed panel width
            raise ValueError(f"pre-packed panel width {-vdim} != NR {nvec * lanes}")
        blk = sch.get(sch.get_block(name))
        vbuf, bbuf = blk.reads[vi].buffer, blk.reads[bi].buffer
        if order == "goto":
            # Step 1 (GotoBLAS). pack B into NR-wide panels and A into MR-row panels up front.
            if vdim >= 0:
                blocked._pack(sch, name, vi, vdim, len(vbuf.shape), nvec * lanes, lanes, cores)
            bi = next(x for x, rg in enumerate(sch.get(sch.get_block(name)).reads) if rg.buffer is bbuf)
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
        if order == "goto":
            sch.reorder(*others, ic, kco, jr, ir, ko, ki, ii, jn, jl)
        else:
            sch.reorder(*others, kco, ic, jr, ir, ko, ki, ii, jn, jl)
        sch.unroll(ki)
        sch.unroll(ii)
        sch.unroll(jn)
        sch.vectorize(jl)
        # Step 3. parallel loop: (batch, ic) row blocks (GotoBLAS) or the jr column panels of one
        # shared k slice (BLIS, whose B slice is packed under kc by the threads that read it).
        if order == "goto":
            outer = sch.fuse(*others, ic) if others else ic
            sch.parallel(outer)
        else:
            outer = None
            sch.parallel(jr)
            if vdim >= 0:
                blocked._pack_slice(sch, name, vi, vdim, nvec * lanes, lanes, kco)
        init = sch.decompose_reduction(b, kco)
        blocked._vectorize_init(sch, init, lanes)
        sch.annotate(b, MARK, 1)
        if seed and mc_dec is not None and k_dec is not None:
            # the search measures this design-space member with these decisions in its first
            # round (SearchStrategy.take_fixed_candidates), so mutations start from the default
            sch.annotate(b, SEEDED, 1)
        if outer is None:
            return sch  # BLIS: C is final only after the last slice; consumers stay separate nests
        # Step 4 (GotoBLAS). elementwise consumers per row block, after its k slices (on a copy:
        # a consumer an earlier rule already moved may refuse; then it stays a separate nest).
        from ingot.ops.schedule.rules import _fuse_epilogue

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

    if hasattr(blocked, "choose_kc"):  # BLIS order: MC rows of A per (serial) ic block
        mc, kc = min(blocked.MC, m), blocked.choose_kc(k)
    else:                              # GotoBLAS order: enough row blocks for the cores
        mc, kc = min(blocked.MC, max(mr, (m // max(1, 2 * cores)) // mr * mr)), blocked.KC
    while mc > mr and m % mc:
        mc -= mr
    ku = min(getattr(blocked, "KU", 4), max_ki)
    if kc is None:
        return None, None
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
