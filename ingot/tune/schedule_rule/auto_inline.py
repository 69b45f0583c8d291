"""`AutoInline`: inline elementwise producers into consumers (and epilogues into producers).

Note: TVM's AutoInline calls ``compute_inline`` on spatial single-store blocks that do not write
a function output, and ``reverse_compute_inline`` on elementwise epilogues. Both primitives
are owned by the schedule layer; until they exist the rule logs a note and leaves blocks alone.

Example:
    >>> # AutoInline().apply(sch, sch.get_block("T_add")) -> [sch with T_add inlined]
"""
from __future__ import annotations

from typing import Any

from .base import ScheduleRule, has_primitive, is_spatial_elementwise, missing_primitive


class AutoInline(ScheduleRule):
    """Inline elementwise blocks where the schedule allows it (see the module note).

    Example:
        >>> AutoInline(into_producer=False).into_producer
        False
    """

    def __init__(self, into_producer: bool = True, into_consumer: bool = True):
        self.into_producer, self.into_consumer = into_producer, into_consumer

    def apply(self, sch: Any, block: Any) -> "list[Any]":
        if not is_spatial_elementwise(sch, block) or "meta_schedule.nhwc_conv" in sch.get(block).annotations:
            return [sch]  # (a padding stage NhwcConv scheduled stays a separate stage)
        func = sch.mod[sch.get_sref(block).func_name]
        writes_output = any(w.buffer is p for w in sch.get(block).writes for p in func.params)
        if self.into_consumer and not writes_output and sch.get_consumers(block):
            if not has_primitive(sch, "compute_inline"):
                missing_primitive("AutoInline", "compute_inline", "inlining producers")
                return [sch]
            try:
                sch.compute_inline(block)  # all-or-nothing: a refusal leaves sch unchanged
            except Exception:
                pass
            return [sch]
        if self.into_producer and sch.get_producers(block):
            if not has_primitive(sch, "reverse_compute_inline"):
                missing_primitive("AutoInline", "reverse_compute_inline", "inlining epilogues")
                return [sch]
            try:
                sch.reverse_compute_inline(block)
            except Exception:
                pass
            return [sch]
        return [sch]

