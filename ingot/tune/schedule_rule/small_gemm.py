"""`SmallGemm`: the register-tiled GEMM of `ingot.ops.schedule.rules.gemm_rule` as a tunable rule,
for the plain GEMMs too small for `BlockedGemm` (which needs K >= 256 and 2·M·N·K >= 2·256³).

Note: a small GEMM's operands fit in L2 (the MLC course's 128³ matmul: 3 x 64 KiB), so packing
and cache blocking cost more than they save; what decides its speed is the register tile, how
far the k loop is unrolled, and the memory alignment of the operands (`ingot.tune.runner`
times on 64-byte-aligned arrays); against Apache TVM's best 128³ kernel the tiles and unroll
depths compare in BENCHMARKS.md ("Apache TVM in the same run").

Each branch is one register tile (MR, NVEC) built by `gemm_rule` (parallel outer tiles, local
accumulators, the elementwise epilogue fused), whose innermost reduce loop is then split by a
`sample_perfect_tile` decision (ko, ki) and ki unrolled: `MutateTileSize` explores the unroll
depth. Every branch is marked ``meta_schedule.seeded`` with ki = `SEED_KU` (or the largest of
4, 2 that divides K), so the first round measures each tile as built and evolution starts from
the best. The block is annotated ``meta_schedule.blocked_gemm`` = "small <MR>x<NVEC>" so that
`ParallelVectorizeUnroll` and `RandomComputeLocation` leave it alone (it is already parallel and
vectorized) and tune_gemm.py reports the branch. The untouched schedule is returned too, so
`MultiLevelTiling` still builds its own branches.

Example:
    >>> SmallGemm().tiles[0]
    (8, 2)
"""
from __future__ import annotations

import logging
from typing import Any

from .base import ScheduleRule
from .blocked_gemm import MARK, SEEDED, _drop_parallel_intent, cpu_block_info

logger = logging.getLogger("ingot.tune")

#: (MR, NVEC) register tiles, in branch order, those that fit the target's registers
#: (`CpuModel.fits_registers`): the first four for 32 registers (AVX-512), the rest for 16 (AVX2).
#: MR need not divide M (gemm_rule predicates the last row tile), NVEC x lanes must divide N.
TILES = ((8, 2), (12, 2), (4, 4), (6, 4), (6, 2), (4, 2), (3, 3), (2, 4))
#: The unroll depth of k every branch is first measured with (unrolled k steps let GCC schedule
#: one step's loads under the previous step's FMAs).
SEED_KU = 4


class SmallGemm(ScheduleRule):
    """Tunable register tiling of small plain GEMMs (see the module note).

    ``tiles``: (MR, NVEC) branches, of which the first ``max_branches`` that fit the target's
    registers and N are built; ``max_unroll_k``: the largest ki the search may sample.

    Example:
        >>> SmallGemm(tiles=[(8, 2)], max_unroll_k=8).max_unroll_k
        8
    """

    def __init__(self, tiles=TILES, max_unroll_k: int = 16, max_branches: int = 4):
        self.tiles = tuple((int(a), int(b)) for a, b in tiles)
        self.max_unroll_k = int(max_unroll_k)
        self.max_branches = int(max_branches)
        if not self.tiles:
            raise ValueError("SmallGemm: tiles must name at least one (MR, NVEC) register tile")

    def apply(self, sch: Any, block: Any) -> "list[Any]":
        from ingot.ops.schedule import blocked

        target, info = cpu_block_info(self, sch, block)
        # plain (batch-free) GEMMs with static sizes only: conv-like blocks have their own rules
        if (info is None or info.kind != "gemm" or not info.simple_loops or len(info.spatial) != 2 or len(info.reduce) != 1
                or None in info.extents or blocked.is_large_gemm(info)):
            return [sch]
        cpu = target.cpu
        lanes = cpu.lanes(info.dtype)
        n, k = info.extents[info.j_index], info.extents[info.reduce[0]]
        name = sch.get(block).name_hint
        out = [sch]
        for mr, nvec in self.tiles:
            if n % (nvec * lanes) or mr > info.extents[info.i_index] or not cpu.fits_registers(mr, nvec):
                continue
            if len(out) > self.max_branches:
                break
            try:
                out.append(self._schedule(sch.copy(), name, info, cpu, mr, nvec, k))
            except Exception as err:  # a primitive refused: this branch is dropped
                logger.debug("SmallGemm: block %r, tile %dx%d skipped: %s", name, mr, nvec, err)
        return out

    def _schedule(self, sch: Any, name: str, info: Any, cpu: Any, mr: int, nvec: int, k: int) -> Any:
        from ingot.ops.schedule.rules import gemm_rule

        # Step 1. the register-tiled kernel (parallel outer tiles, accumulators, epilogue).
        gemm_rule(sch, name, info, cpu, mr=mr, nvec=nvec)
        # Step 2. the k loop (just above the tile loops ii, jn, jl) split by a sampled (ko, ki); ki unrolled.
        b = sch.get_block(name)
        k_loop = sch.get_loops(b)[-4]
        seed = next((u for u in (SEED_KU, 2) if u <= self.max_unroll_k and k % u == 0), 1)
        factors = sch.sample_perfect_tile(k_loop, n=2, max_innermost_factor=self.max_unroll_k,
                                          decision=[k // seed, seed])
        _, ki = sch.split(k_loop, factors)
        sch.unroll(ki)
        sch.annotate(b, MARK, f"small {mr}x{nvec}")
        sch.annotate(b, SEEDED, 1)   # measured as built in the first round (SearchStrategy)
        # Step 3. consumers annotated parallel before (rules visit consumers first) now sit under
        # the parallel tile loop: a nested parallel region would serialize; drop that intent.
        _drop_parallel_intent(sch)
        return sch
