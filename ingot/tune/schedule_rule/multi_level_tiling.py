"""`MultiLevelTiling`: tile a reduction block's loops in a structure such as ``SSRSRS``.

Note: each spatial loop is split into as many tiles as there are ``S`` in the structure and each
reduction loop into as many as there are ``R``, with `sample_perfect_tile` (so the tile sizes are
decisions the search mutates); then the tiles are reordered level by level, e.g. for ``SSRSRS``
``i0 j0 | i1 j1 | k0 | i2 j2 | k1 | i3 j3``. The innermost spatial tile is left for
`RewriteParallelVectorizeUnroll` to vectorize. With ``reuse_write`` the block writes into a
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

    def __init__(self, structure: str = "SSRSRS", max_innermost_factor: int = 64, reuse_write: bool = True):
        if set(structure) - {"S", "R"} or "S" not in structure:
            raise ValueError(f"MultiLevelTiling: structure must be made of 'S' and 'R', got {structure!r}")
        self.structure = structure
        self.max_innermost_factor = int(max_innermost_factor)
        self.reuse_write = reuse_write

    def apply(self, sch: Any, block: Any) -> "list[Any]":
        if not is_reduction_block(sch, block):
            return [sch]
        loops = sch.get_loops(block)
        kinds = loop_iter_kinds(sch, block, loops)
        if not kinds or any(k is None for k in kinds):
            return [sch]
        # Step 1. split every loop into tiles with sampled sizes.
        n_s, n_r = self.structure.count("S"), self.structure.count("R")
        tiles: dict[str, list] = {"S": [], "R": []}
        for loop, kind in zip(loops, kinds):
            n = n_s if kind == "S" else n_r
            factors = sch.sample_perfect_tile(loop, n=n, max_innermost_factor=self.max_innermost_factor)
            tiles[kind].append(sch.split(loop, factors))
        # Step 2. reorder level by level following the structure.
        order = []
        level = {"S": 0, "R": 0}
        for ch in self.structure:
            order += [t[level[ch]] for t in tiles[ch]]
            level[ch] += 1
        sch.reorder(*order)
        sch.annotate(block, "meta_schedule.tiling_structure", self.structure)
        results = [sch]
        # Step 3. optionally cache the output locally under the second spatial level.
        if self.reuse_write:
            if not has_primitive(sch, "reverse_compute_at"):
                missing_primitive("MultiLevelTiling", "reverse_compute_at", "the cache_write branch")
            else:
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
