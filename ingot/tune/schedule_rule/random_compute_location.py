"""`RandomComputeLocation`: move a producer block under a sampled loop of its consumer.

Note: applies to spatial blocks that are not tiled and have consumers; samples the location
with `sample_compute_location` and calls ``compute_at``. Without ``compute_at`` in the schedule
the rule logs a note and does nothing.

Example:
    >>> # RandomComputeLocation().apply(sch, sch.get_block("A_pad"))
"""
from __future__ import annotations

from typing import Any

from .base import ScheduleRule, has_primitive, is_reduction_block, missing_primitive


class RandomComputeLocation(ScheduleRule):
    """Random compute location for producers (see the module note).

    Example:
        >>> repr(RandomComputeLocation())
        'RandomComputeLocation'
    """

    def apply(self, sch: Any, block: Any) -> "list[Any]":
        ann = sch.get(block).annotations
        if is_reduction_block(sch, block) or "meta_schedule.tiling_structure" in ann or "meta_schedule.blocked_gemm" in ann \
                or "meta_schedule.nhwc_conv" in ann:
            return [sch]
        func = sch.mod[sch.get_sref(block).func_name]
        if any(w.buffer is p for w in sch.get(block).writes for p in func.params) or not sch.get_consumers(block):
            return [sch]
        if not has_primitive(sch, "compute_at"):
            missing_primitive("RandomComputeLocation", "compute_at", "moving producers")
            return [sch]
        try:
            with sch.attempt():  # sample + move: both or neither (a refused move drops the sample)
                loc = sch.sample_compute_location(block)
                if sch.get(loc) not in ("root", "inline"):
                    sch.compute_at(block, loc, preserve_unit_loops=True)
        except Exception:
            pass
        return [sch]
