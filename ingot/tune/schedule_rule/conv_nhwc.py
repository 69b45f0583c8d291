"""`NhwcConv`: the register-tiled NHWC conv2d of `ingot.ops.schedule.conv_nhwc` as a tunable
schedule rule (sampled tile sizes around the rule-based default).

Note: the default kernel of a CPU conv network's layers (``conv2d_nhwc_packed_weight`` fused
with bias, relu and the residual add) is `build_conv_nhwc`: MR output pixels x NR output
channels of accumulators in zmm registers, the reduction over (ky, kx, c) inside, optionally
sliced by ``kc`` input channels so a weight slice stays in L1, the epilogue fused into the
accumulators' write-back. MultiLevelTiling's SSRSRS space has nothing near it (it never keeps
the tile in registers with the epilogue fused), so tuning could not improve a conv. This rule
builds that kernel with its factors as sampling decisions:

* ``OW -> (pixel tiles, MR)``: ``sample_perfect_tile(n=2)`` (MR x NVEC within the target's
  register file less four: 28 accumulators with 32 registers, 12 with 16);
* the input channels ``C -> (slices, kc/ku, ku)`` (sliced) or ``(C/ku, ku)`` (unsliced; ku
  unrolled): ``sample_perfect_tile(n=3 | 2)``, mutated by `MutateTileSize`.

The loop order (``rows``: (n, oh) parallel; ``oc``: (n, oc block) parallel, each core's panels
stay hot) and sliced vs unsliced change the loop structure, so they are design-space
*branches*: the default's (order, slicing), the other order, the other slicing. Every branch
starts from the default factors for its structure (`default_conv_params`) and is marked
``meta_schedule.seeded``, so the search measures each in its first round and mutates from there.

The conv block is annotated ``meta_schedule.nhwc_conv`` (its padding stage too, which the rule
schedules as the default does: parallel rows, vector copies), so `AutoInline`,
`ParallelVectorizeUnroll`, `RandomComputeLocation` and `MultiLevelTiling` leave both alone. The
fused epilogue blocks lose the parallel/vectorize/unroll intents `ParallelVectorizeUnroll` gave
them before (consumers are visited first): they run inside the conv's parallel task, vectorized.
The rule also returns the untouched schedule, so the generic rules still build their branches.

Example:
    >>> NhwcConv().max_branches
    3
"""
from __future__ import annotations

import logging
from typing import Any

from .base import ScheduleRule

logger = logging.getLogger("ingot.tune")

MARK = "meta_schedule.nhwc_conv"
SEEDED = "meta_schedule.seeded"
#: Annotations `ParallelVectorizeUnroll` puts on a block (dropped from the fused epilogue).
_PVU_KEYS = ("meta_schedule.parallel", "meta_schedule.vectorize", "meta_schedule.unroll_explicit")


class NhwcConv(ScheduleRule):
    """Tunable register-tiled NHWC conv2d (see the module note).

    ``max_branches``: how many (order, slicing) structures become design-space branches (the
    default's first); ``max_unroll``: the largest unrolled channel step ``ku``;
    ``max_accumulators``: MR x NVEC bound of the sampled tile height.

    Example:
        >>> NhwcConv(max_branches=1).max_branches
        1
    """

    def __init__(self, max_branches: int = 3, max_unroll: int = 8, max_accumulators: "int | None" = None):
        self.max_branches = int(max_branches)
        self.max_unroll = int(max_unroll)
        self.max_accumulators = None if max_accumulators is None else int(max_accumulators)

    def accumulators(self, cpu: Any) -> int:
        """The MR x NVEC bound on ``cpu``: ``max_accumulators``, else the register file less four
        (the step's operand vectors and broadcast).

        Example:
            >>> from ingot.cpu_model import named_cpu
            >>> NhwcConv().accumulators(named_cpu("sapphirerapids")), NhwcConv().accumulators(named_cpu("znver3"))
            (28, 12)
        """
        return self.max_accumulators or cpu.vector_registers - 4

    def apply(self, sch: Any, block: Any) -> "list[Any]":
        from ingot.ops.schedule.analysis import analyze_block
        from ingot.ops.schedule.conv_nhwc import analyze_conv_nhwc, fit_conv_tile

        target = getattr(getattr(self, "context", None), "target", None)
        if target is None or not getattr(target, "is_cpu", True):
            return [sch]
        if MARK in sch.get(block).annotations:
            return [sch]
        name = sch.get(block).name_hint
        try:
            info = analyze_block(sch, block)
            cpu = target.cpu
            shape = fit_conv_tile(analyze_conv_nhwc(sch, name, info, cpu.lanes(info.dtype)), cpu, name)
        except Exception:  # not an NHWC conv (or a block the analysis does not understand)
            return [sch]
        out = [sch]
        for params in self.branch_params(shape, cpu):
            try:
                out.append(self._schedule(sch.copy(), name, info, shape, params, cpu))
            except Exception as err:  # a primitive refused: this branch is dropped
                logger.debug("NhwcConv: block %r, %s skipped: %s", name, params, err)
        return out

    def branch_params(self, shape: Any, cpu: Any) -> "list[Any]":
        """The (order, slicing) structures of the space with their starting factors: the default
        (`default_conv_params`), the other loop order, the other slicing (sliced <-> whole).

        Example:
            >>> from ingot.cpu_model import named_cpu
            >>> from ingot.ops.schedule.conv_nhwc import ConvNhwcShape
            >>> spr = named_cpu("sapphirerapids").with_cores(2)
            >>> [(p.order, p.kc) for p in NhwcConv().branch_params(ConvNhwcShape(1, 7, 7, 1280, 320, 1, 6, 16, 2), spr)]
            [('oc', 0), ('rows', 0), ('oc', 80)]
        """
        from ingot.ops.schedule.conv_nhwc import default_conv_params

        default = default_conv_params(shape, cpu)
        other_order = "rows" if default.order == "oc" else "oc"
        branches = [default, default_conv_params(shape, cpu, order=other_order, kc=default.kc)]
        if default.kc:
            branches.append(default_conv_params(shape, cpu, order=default.order, kc=0))
        else:
            kc = _slice_channels(shape, cpu)
            if kc:
                branches.append(default_conv_params(shape, cpu, order=default.order, kc=kc))
        if shape.c < 8 and shape.taps > 1:  # the stem: (kx, c) fused, no slicing alternative
            branches = [b for b in branches if not b.kc] or branches
        seen, out = set(), []
        for b in branches:
            if b not in seen and b.mr * shape.nvec <= self.accumulators(cpu):
                seen.add(b)
                out.append(b)
        return out[: self.max_branches]

    def _schedule(self, sch: Any, name: str, info: Any, shape: Any, params: Any, cpu: Any) -> Any:
        from ingot.ops.schedule.conv_nhwc import build_conv_nhwc

        cores = cpu.cores
        max_mr = max(params.mr, self.accumulators(cpu) // shape.nvec)
        x_dec = params.x_factors(shape.ow)
        c_dec = params.c_factors(shape.c)
        max_ku = max(self.max_unroll, c_dec[-1] if c_dec else 1)

        def x_factors(s: Any, loop: Any) -> list:
            return s.sample_perfect_tile(loop, n=2, max_innermost_factor=max_mr, decision=x_dec)

        def c_factors(s: Any, loop: Any) -> list:
            return s.sample_perfect_tile(loop, n=len(c_dec), max_innermost_factor=max_ku, decision=c_dec)

        # Step 1. the padding stage as the default schedules it (before the conv moves loops)
        pads = _schedule_pads(sch, name, cpu)  # the target's lanes (a conv may use 8)
        # Step 2. the conv with sampled tiles, the epilogue fused under its task loop
        task = build_conv_nhwc(sch, name, info, shape, params.order, x_factors,
                               c_factors if c_dec else None, cores, parallel_fuse=params.parallel_fuse,
                               prefetch=params.prefetch)
        blk = sch.get_block(name)
        sch.annotate(blk, MARK, 1)
        sch.annotate(blk, SEEDED, 1)
        for pad in pads:
            sch.annotate(sch.get_block(pad), MARK, 1)
        if task is not None:
            _drop_intents(sch, task)
        return sch


def _slice_channels(shape: Any, cpu: Any) -> int:
    """The channel slice of a sliced alternative for a layer the default keeps whole: the
    largest multiple-of-8 proper divisor of C whose weight slice fits `L1_SLICE_SHARE` of
    ``cpu``'s L1d (0: none)."""
    from ingot.ops.schedule.conv_nhwc import L1_SLICE_SHARE, MAX_KC

    best = 0
    for kc in range(8, min(shape.c - 1, MAX_KC) + 1, 8):
        if shape.c % kc == 0 and shape.taps * kc * shape.nr * 4 <= cpu.l1d_bytes * L1_SLICE_SHARE:
            best = kc
    return best


def _schedule_pads(sch: Any, name: str, cpu: Any) -> "list[str]":
    """Schedule the padding producers of conv block ``name`` with the default's elementwise rule;
    returns their names."""
    from ingot.ops.schedule.analysis import analyze_block
    from ingot.ops.schedule.rules import elementwise_rule

    names = []
    for prod in sch.get_producers(sch.get_block(name)):
        pname = sch.get(prod).name_hint
        if not pname.startswith("pad_temp"):
            continue
        elementwise_rule(sch, pname, analyze_block(sch, prod), cpu)
        names.append(pname)
    return names


def _drop_intents(sch: Any, task: Any) -> None:
    """Blocks under the conv's task loop (its fused epilogue) keep the schedule the conv rule gave
    them: drop the parallel/vectorize/unroll intents `ParallelVectorizeUnroll` annotated."""
    from ingot.tir.schedule.analysis import is_ancestor

    task_sref = sch.get_sref(task)
    for func_name in sch.state.func_names():
        for bname in list(sch.state.blocks(func_name)):
            if bname == "root":
                continue
            blk = sch.get_block(bname, func_name)
            ann = sch.get(blk).annotations
            if any(k in ann for k in _PVU_KEYS) and is_ancestor(task_sref, sch.get_sref(blk)):
                for k in _PVU_KEYS:
                    if k in sch.get(blk).annotations:
                        sch.unannotate(blk, k)


def is_nhwc_conv_scheduled(sch: Any, block: Any) -> bool:
    """Whether `NhwcConv` scheduled ``block`` (the conv or its padding stage): other rules leave it.

    Example:
        >>> # is_nhwc_conv_scheduled(sch, sch.get_block("pad_temp"))
    """
    return MARK in sch.get(block).annotations


__all__ = ["NhwcConv", "MARK", "is_nhwc_conv_scheduled"]
