"""`BlockedGemm`: the cache-blocked GEMM of `ingot.ops.schedule.blocked` as a tunable schedule
rule (sampled tile sizes, so the search explores around the rule-based default).

Note: every branch is built by the one public builder the default uses,
`blocked.blocked_gemm_rule`, with its tile factors given as `sample_perfect_tile` decisions:

* the row blocks ``M / MR -> (ic, ir)``: MC = ir x MR rows of A per block (its L2 share);
* the k split ``K -> (kc, ko, ki)``: KC = ko x ki the slice depth (kc = 1 is the one-slice
  case), ki <= ``max_unroll_k`` the unrolled k steps of the micro-kernel.

`MutateTileSize` mutates those; what fixes the instruction sequence is a *branch*: the register
tile (MR, NVEC) — NR = NVEC x lanes is also the packed panel width, a constant of
`transform_layout` — and the loop order. The branches, in this order:

1. ``panel`` order (the default's: parallel B panels, each packed by its thread, A in place,
   epilogue per MC x NR block) for each (MR, NVEC) of ``tiles`` that divides the sizes and fits
   the registers (up to ``max_branches``). The branch with the default's tile carries the
   default's MC, KC and KU as its decisions and is marked ``meta_schedule.seeded``: the search
   measures it as generated in its first round, so mutations start from the default;
2. ``block`` and ``slice`` orders (blocked.py's module note) with the default tile.

The block is annotated ``meta_schedule.blocked_gemm`` = "<order> <MR>x<NVEC>" (the branch) so that `ParallelVectorizeUnroll` /
`RandomComputeLocation` leave it alone (it is already parallel and vectorized). The rule also
returns the untouched schedule, so `MultiLevelTiling` still builds its own branches from it.

Example:
    >>> from ingot.cpu_model import named_cpu
    >>> BlockedGemm().tiles[:2], blocked_defaults(1024, named_cpu("znver3"))
    (((8, 2), (4, 4)), (4, 2))
"""
from __future__ import annotations

import logging
from typing import Any

from .base import ScheduleRule

logger = logging.getLogger("ingot.tune")

MARK = "meta_schedule.blocked_gemm"
SEEDED = "meta_schedule.seeded"   # a design-space member whose own decisions are worth measuring
# (MR, NVEC) register tiles tried after the target's default (`blocked.default_gemm_tile`), in
# this order, those that fit the target's registers (`CpuModel.fits_registers`): the first five
# for 32 registers (AVX-512), the rest for 16 (AVX2). 16x1 (one B vector per 16 broadcasts) is
# left out: it lost everywhere it was tried (BENCHMARKS.md "fp32 GEMM").
TILES = ((8, 2), (4, 4), (6, 4), (12, 2), (8, 3), (6, 2), (4, 2), (3, 3), (2, 4), (8, 1))
ORDERS = ("panel", "block", "slice")   # "panel" first: the default's order, the seeded branch


def cpu_block_info(rule: Any, sch: Any, block: Any) -> "tuple[Any, Any]":
    """(target, `analyze_block` info) for a rule of a CPU tuning context; info is None when the
    target is not a CPU or the analysis does not understand the block (then it is no GEMM).

    Example:
        >>> cpu_block_info(BlockedGemm(), None, None)   # no tuning context: no target
        (None, None)
    """
    from ingot.ops.schedule.analysis import analyze_block

    target = getattr(getattr(rule, "context", None), "target", None)
    if target is None or not getattr(target, "is_cpu", True):
        return target, None
    try:
        return target, analyze_block(sch, block)
    except Exception:  # noqa: BLE001 - a block the analysis does not understand: not a GEMM
        return target, None


class BlockedGemm(ScheduleRule):
    """Tunable cache blocking of large GEMM blocks (see the module note).

    ``tiles``: the (MR, NVEC) register tiles to branch on in "panel" order; ``max_branches``: how
    many of those that fit the sizes and the target's registers become branches (the target's
    default tile first); ``orders``: the loop orders (the others
    than "panel" get the default tile only); ``max_unroll_k``: the largest ki.

    Example:
        >>> len(BlockedGemm(max_branches=2).tiles) >= 2
        True
    """

    def __init__(self, tiles=TILES, max_branches: int = 3, max_unroll_k: int = 8, orders=ORDERS):
        self.tiles = tuple((int(a), int(b)) for a, b in tiles)
        self.max_branches = int(max_branches)
        self.max_unroll_k = int(max_unroll_k)
        self.orders = tuple(orders)
        if not self.orders or self.orders[0] != "panel":
            raise ValueError(f"BlockedGemm: orders must start with 'panel' (the default's order), got {orders!r}")

    def apply(self, sch: Any, block: Any) -> "list[Any]":
        from ingot.ops.schedule import blocked

        target, info = cpu_block_info(self, sch, block)
        if info is None or info.kind != "gemm" or not info.simple_loops or not blocked.is_large_gemm(info):
            return [sch]
        name = sch.get(block).name_hint
        cpu = target.cpu
        default_tile = blocked_defaults(info.extents[info.i_index], cpu)
        branches = [("panel", tile) for tile in self._fitting_tiles(info, cpu, default_tile)]
        if default_tile in [t for _, t in branches]:
            branches += [(order, default_tile) for order in self.orders[1:]]
        out = [sch]
        for order, (mr, nvec) in branches:
            seed = order == "panel" and (mr, nvec) == default_tile
            try:
                trial = self._schedule(sch.copy(), name, info, cpu, mr, nvec, order, seed)
            except Exception as err:  # a primitive refused (layout, sizes): this branch is dropped
                logger.debug("BlockedGemm: block %r, %s MR=%d NVEC=%d skipped: %s", name, order, mr, nvec, err)
                continue
            out.append(trial)
        return out

    def _fitting_tiles(self, info: Any, cpu: Any, default_tile: "tuple[int, int]") -> "list[tuple[int, int]]":
        m, n = info.extents[info.i_index], info.extents[info.j_index]
        lanes = cpu.lanes(info.dtype)
        tiles = [default_tile] + [t for t in self.tiles if t != default_tile]
        fits = [(mr, nv) for mr, nv in tiles
                if m % mr == 0 and n % (nv * lanes) == 0 and cpu.fits_registers(mr, nv)]
        return fits[: self.max_branches]

    def _schedule(self, sch: Any, name: str, info: Any, cpu: Any, mr: int, nvec: int,
                  order: str, seed: bool = False) -> Any:
        from ingot.ops.schedule.blocked import blocked_gemm_rule

        m, k = info.extents[info.i_index], info.extents[info.reduce[0]]
        mc_dec, k_dec = _default_decisions(m, k, mr, self.max_unroll_k, cpu) if seed else (None, None)
        max_ki = self.max_unroll_k
        # Step 1. The builder samples (ic, ir) on the M / MR loop it creates and (kc, ko, ki) on k.
        blocked_gemm_rule(
            sch, name, info, cpu, mr=mr, nvec=nvec, order=order,
            mc_split=lambda lp: sch.sample_perfect_tile(lp, n=2, max_innermost_factor=1 << 20, decision=mc_dec),
            k_split=lambda lp: sch.sample_perfect_tile(lp, n=3, max_innermost_factor=max_ki, decision=k_dec))
        b = sch.get_block(name)
        sch.annotate(b, MARK, f"{order} {mr}x{nvec}")   # the branch, for reports (tune_gemm.py)
        if seed and mc_dec is not None and k_dec is not None:
            # the search measures this design-space member with these decisions in its first
            # round (SearchStrategy.take_fixed_candidates), so mutations start from the default
            sch.annotate(b, SEEDED, 1)
        # Step 2. Consumers fused under the parallel loop were annotated parallel before (the
        # rules visit consumers first): a nested parallel region would serialize; drop that.
        _drop_parallel_intent(sch)
        return sch


def blocked_defaults(m: int, cpu: Any) -> "tuple[int, int]":
    """The (MR, NVEC) register tile of the rule-based default for M = ``m`` on ``cpu``
    (`ingot.ops.schedule.blocked.default_gemm_tile`).

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> blocked_defaults(1024, named_cpu("sapphirerapids")), blocked_defaults(1024, named_cpu("znver3"))
        ((8, 2), (4, 2))
    """
    from ingot.ops.schedule.blocked import default_gemm_tile

    return default_gemm_tile(m, cpu)


def _default_decisions(m: int, k: int, mr: int, max_ki: int, cpu: Any) -> "tuple[Any, Any]":
    """The rule-based default's (ic, ir) and (kc, ko, ki) factors, as `blocked_gemm_rule`
    computes MC, KC and KU (None where the default would not apply)."""
    from ingot.ops.schedule import blocked

    kc, ku = blocked.choose_kc(k), min(blocked.default_ku(mr, 2, cpu), max_ki)
    mc = min(blocked.default_mc(kc or blocked.KC, cpu), m)
    while mc > mr and m % mc:
        mc -= mr
    if kc is None:
        return None, None
    mc_dec = [m // mc, mc // mr] if m % mc == 0 and mc % mr == 0 else None
    k_dec = [k // kc, kc // ku, ku] if k % kc == 0 and kc % ku == 0 else None
    return mc_dec, k_dec


def _drop_parallel_intent(sch: Any) -> None:
    """Blocks annotated ``meta_schedule.parallel`` (by `ParallelVectorizeUnroll`) that now sit
    under a parallel loop lose that intent (a nested parallel loop), keeping vectorize/unroll."""
    from ingot.tir.stmt import ForKind

    for func_name in sch.state.func_names():
        for bname in list(sch.state.blocks(func_name)):
            if bname == "root":
                continue
            blk = sch.get_block(bname, func_name)
            if "meta_schedule.parallel" not in sch.get(blk).annotations:
                continue
            if any(sch.get(lp).kind == ForKind.PARALLEL for lp in sch.get_loops(blk)):
                sch.unannotate(blk, "meta_schedule.parallel")
