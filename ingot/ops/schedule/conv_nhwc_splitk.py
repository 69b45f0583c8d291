"""Split-K NHWC 1x1 convs (`ingot.ops.schedule.conv_nhwc`'s small-N note): a small-N GEMM whose
few output-channel tasks split unevenly over the cores (MobileNetV2's 960->160 and 576->160 at
7x7: 5 oc blocks; 7 rows split 4/3) cuts the input channels in ``ConvNhwcPolicy.split_k`` parts by
`rfactor` instead. Each (part, n) is one parallel task over every oc block and pixel of its
channels: each core reads only its part of the weights (cold inside a model: the cost there), a
channel slice serves all 49 pixels from L1. A second pass sums the partials and runs the
epilogue (its effect in MobileNetV2: BENCHMARKS.md, "conv_nhwc choices").

Example:
    >>> # if split_k_kc(shape, cpu): split_k_1x1(sch, "conv2d_nhwc", shape, cpu, epilogue=True)
"""
from __future__ import annotations

from typing import Any

from ingot.ir.expr import Var
from ingot.tir.schedule.error import ScheduleError

from ingot.cpu_model import CpuModel

from . import conv_nhwc as CN
from .conv_nhwc import KU, ConvNhwcShape, _inline_chain, choose_kc
from .rules import max_tile_rows

__all__ = ["split_k_kc", "split_k_1x1"]


def split_k_kc(shape: ConvNhwcShape, cpu: CpuModel, parts: int = 2) -> int:
    """The channel slice of a split-K 1x1 conv in ``parts`` parts, 0 when it does not
    apply: sliced 1x1 convs whose output row is one register tile (OW within `max_tile_rows`: the
    7x7 stage; `split_k_1x1` tiles whole rows) and whose (n, oc block) tasks are odd and fewer than
    4 per core (MobileNetV2's 960->160 and 576->160: 5 blocks), each part sliceable in steps of `KU`.

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> spr = named_cpu("sapphirerapids").with_cores(2)
        >>> split_k_kc(ConvNhwcShape(1, 7, 7, 160, 960, 1, 6, 16, 2), spr), split_k_kc(ConvNhwcShape(1, 7, 7, 320, 960, 1, 6, 16, 2), spr)
        (120, 0)
    """
    cores = cpu.cores
    if not (shape.taps == 1 and shape.ow <= max_tile_rows(shape.nvec, cpu) and CN.few_uneven_tasks(shape.n * shape.o // shape.nr, cores)
            and choose_kc(shape.taps, shape.c, shape.nr, cpu) and shape.c % parts == 0):
        return 0
    # a part whose panel fits L1 is one slice
    kc = choose_kc(shape.taps, shape.c // parts, shape.nr, cpu) or shape.c // parts
    return kc if kc and kc % KU == 0 and (shape.c // parts) % kc == 0 else 0


def split_k_1x1(sch: Any, name: str, shape: ConvNhwcShape, cpu: CpuModel, epilogue: bool, parts: int = 2) -> None:
    """Split-K 1x1 conv (module note): the input channels cut into ``parts`` parts by
    `rfactor`; each (part, n) is a parallel task computing every oc block and pixel of its part (channel slices
    outside the rows: a slice serves all 49 pixels from L1; each core reads its half of the
    weights once), then one pass sums the partials and runs the fused epilogue.

        for t in parallel(parts * n):  for ob, slice: for oh: 7 x 2-vector tile += slice
        for n, oh in parallel: out[n, oh, :, :] = epilogue(sum_k part[k, n, oh, :, :])

    Example:
        >>> # if split_k_kc(shape, cpu): split_k_1x1(sch, "conv2d_nhwc", shape, cpu, epilogue=True)
    """
    from .blocked import _vectorize_init
    from .rules import _fuse_epilogue

    lanes, kc = shape.lanes, split_k_kc(shape, cpu, parts)
    # Step 1. rc -> (part, rest); rfactor the part into a partial-result buffer.
    blk = sch.get_block(name)
    loops = sch.get_loops(blk)
    rc = loops[shape.rc_pos]
    part, rest = sch.split(rc, [parts, None])
    rf = sch.rfactor(part, 0)
    # Step 2. The partial block: (part, n) parallel, oc block, slice, rows, 7 x 2-vector tile.
    lk, ln, ly, lx, lo, *taps, rr = _rf_loops(sch, rf, sch.get(part).loop_var)
    xo, xi = sch.split(lx, [1, shape.ow])
    oo, on, ol = sch.split(lo, [None, shape.nvec, lanes])
    rs, rm, ru = sch.split(rr, [shape.c // parts // kc, kc // KU, KU])
    sch.reorder(lk, ln, oo, rs, ly, xo, *taps, rm, ru, xi, on, ol)
    for lp in (ru, xi, on):
        sch.unroll(lp)
    sch.vectorize(ol)
    sch.parallel(sch.fuse(lk, ln))
    _vectorize_init(sch, sch.decompose_reduction(rf, rs), lanes)
    # Step 3. The sum of the partials, (n, oh) parallel, vectorized over o; the epilogue fused.
    wb = sch.get_block(name)
    wn, wy, wx, wo, wk = sch.get_loops(wb)
    woo, wol = sch.split(wo, [None, lanes])
    sch.reorder(wn, wy, wx, woo, wk, wol)
    task = sch.fuse(wn, wy)
    sch.parallel(task)
    sch.vectorize(wol)
    _vectorize_init(sch, sch.decompose_reduction(wb, wk), lanes)
    if epilogue:
        _fuse_epilogue(sch, wb, task, lanes)
        _inline_chain(sch, wb, lanes)


def _rf_loops(sch: Any, rf: Any, part_var: Var) -> list:
    """The rfactor block's loops with the part loop first (it keeps its place in the nest)."""
    loops = sch.get_loops(rf)
    names = [sch.get(lp).loop_var for lp in loops]
    k = next((i for i, v in enumerate(names) if v is part_var or v.name == part_var.name), None)
    if k is None:
        raise ScheduleError(f"conv_nhwc_rule: split-K: rfactor block {sch.get(rf).name_hint!r} has no loop "
                            f"{part_var.name!r}", "build with ConvNhwcPolicy(split_k=0) to use the one-pass schedule")
    return [loops[k]] + loops[:k] + loops[k + 1:]
