"""`MultiLevelTiling`: tile a reduction block's loops in a structure such as ``SSRSRS``.

Note: each spatial loop is split into as many tiles as there are ``S`` in the structure and each
reduction loop into as many as there are ``R``, with `sample_perfect_tile` (so the tile sizes are
decisions the search mutates); then the tiles are reordered level by level, e.g. for ``SSRSRS``
``i0 j0 | i1 j1 | k0 | i2 j2 | k1 | i3 j3``. The innermost spatial loop (the output's
stride-1 dimension) is first split by the target's vector lanes (AVX-512: 16 fp32; the largest
power of two <= lanes that divides it), and that ``vl`` loop goes innermost after the last
level: ``... | i3 j3 jv``, so `RewriteParallelVectorizeUnroll` always finds a full-width vector
loop (an unconstrained sampled tile is 1, 3, 7 ... as often as 16) and the tile above it counts
vectors per row (register blocking). Innermost tiles are capped (``max_innermost_factor``,
``max_vector_tiles``) so the accumulators fit in registers. With ``reuse_write`` the block writes into a
``local`` cache moved under the second spatial level (TVM's ``cache_write`` +
``reverse_compute_at``): this needs ``reverse_compute_at``; without it the branch is skipped
with a logged note. The tiled block is annotated ``meta_schedule.tiling_structure``.

Example:
    >>> # MultiLevelTiling("SSRSRS").apply(sch, sch.get_block("C"))
"""
from __future__ import annotations

from typing import Any

from .base import ScheduleRule, has_primitive, is_reduction_block, loop_iter_kinds, missing_primitive


class MultiLevelTiling(ScheduleRule):
    """Multi-level tiling for CPU (``SSRSRS``) or GPU (``SSSRRSRS``) structures.

    ``max_innermost_factor``: the largest innermost tile. ``reuse_write``: try a local write cache.

    Example:
        >>> MultiLevelTiling().structure
        'SSRSRS'
    """

    def __init__(self, structure: str = "SSRSRS", max_innermost_factor: int = 16, reuse_write: bool = True,
                 vectorize_inner: bool = True, max_vector_tiles: int = 4):
        if set(structure) - {"S", "R"} or "S" not in structure:
            raise ValueError(f"MultiLevelTiling: structure must be made of 'S' and 'R', got {structure!r}")
        self.structure = structure
        self.max_innermost_factor = int(max_innermost_factor)
        self.reuse_write = reuse_write
        self.vectorize_inner = vectorize_inner
        self.max_vector_tiles = int(max_vector_tiles)

    def apply(self, sch: Any, block: Any) -> "list[Any]":
        if not is_reduction_block(sch, block):
            return [sch]
        loops = sch.get_loops(block)
        kinds = loop_iter_kinds(sch, block, loops)
        if not kinds or any(k is None for k in kinds):
            return [sch]
        # Step 1. split every loop into tiles with sampled sizes (the innermost spatial loop
        # first by the vector lanes).
        n_s, n_r = self.structure.count("S"), self.structure.count("R")
        tiles: dict[str, list] = {"S": [], "R": []}
        last_s = max(k for k, kind in enumerate(kinds) if kind == "S") if "S" in kinds else -1
        vec_loop = None
        for k, (loop, kind) in enumerate(zip(loops, kinds)):
            n = n_s if kind == "S" else n_r
            max_inner = self.max_innermost_factor
            if k == last_s and self.vectorize_inner:
                vl = _vector_split(sch, block, loop, self)
                if vl > 1:
                    loop, vec_loop = sch.split(loop, [None, vl])
                    max_inner = self.max_vector_tiles
            factors = sch.sample_perfect_tile(loop, n=n, max_innermost_factor=max_inner)
            tiles[kind].append(sch.split(loop, factors))
        # Step 2. reorder level by level following the structure.
        order = []
        level = {"S": 0, "R": 0}
        for ch in self.structure:
            order += [t[level[ch]] for t in tiles[ch]]
            level[ch] += 1
        if vec_loop is not None:
            order.append(vec_loop)
        sch.reorder(*order)
        sch.annotate(block, "meta_schedule.tiling_structure", self.structure)
        results = [sch]
        # Step 3. optionally cache the output locally under the second spatial level.
        if self.reuse_write:
            if not has_primitive(sch, "reverse_compute_at"):
                missing_primitive("MultiLevelTiling", "reverse_compute_at", "the cache_write branch")
            else:
                # A second design-space member besides sch (both are returned), so a copy is
                # genuinely needed here; a refusal halfway just drops it.
                trial = sch.copy()
                try:
                    wb = trial.cache_write(block, 0, "local")
                    s_levels = [i for i, ch in enumerate(self.structure) if ch == "S"]
                    # the last loop of the second spatial level
                    pos = sum(len(tiles[ch]) for ch in self.structure[: s_levels[1] + 1]) - 1
                    trial.reverse_compute_at(wb, trial.get_loops(block)[pos], preserve_unit_loops=True)
                    results.append(trial)
                except Exception:
                    pass
        return results


def _vector_split(sch: Any, block: Any, loop: Any, rule: Any) -> int:
    """The vector factor for the innermost spatial loop: the largest power of two <= the target's
    lanes for the block's output dtype that divides the loop extent (at least 4), else 1."""
    from ingot.ir.expr import as_const_int

    target = getattr(getattr(rule, "context", None), "target", None)
    writes = sch.get(block).writes
    if target is None or not writes or not hasattr(target, "vector_lanes"):
        return 1
    try:
        lanes = int(target.vector_lanes(writes[0].buffer.dtype))
    except Exception:  # a target without vector information
        return 1
    extent = as_const_int(sch.get(loop).extent)
    if extent is None:
        return 1
    vl = 1
    while vl * 2 <= lanes:
        vl *= 2
    while vl >= 4 and extent % vl:
        vl //= 2
    return vl if vl >= 4 and extent // vl >= 1 else 1
