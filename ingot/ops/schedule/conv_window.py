"""Window reductions over NHWC: depthwise convolutions and pools, vectorized over the channel.

Note: in a depthwise conv2d (``depthwise_conv2d_nhwc``) or a pool over NHWC (``pool_max``,
``pool_sum``, global/spatial mean) the channel is both the output's last axis and every input's
last axis, and the reduce axes are the window. `nhwc_window_rule` tiles MR output pixels × one or
two channel vectors, keeps the window loops outside the tile, accumulates in registers with the
epilogue fused into the write-back (`conv_nhwc._register_tile`), and inlines the padding stage: a
bounds check per tap instead of a padded copy of a memory-bound activation.

    for task in T.parallel(...):          # (n, oh, c block) rows, or the rows alone when few
        for ow tile:
            acc[MR, nvec * lanes] local
            for ky, kx:                   # the window
                for r in unroll(MR): for v in unroll(nvec): for l in vectorized(lanes):
                    acc[r, v*lanes + l] op= x[n, oh*s + ky, (ow0 + r)*s + kx, c0 + v*lanes + l]   # (x w: depthwise)
            out[n, oh, ow0 + r, c0:] = epilogue(acc[r, :])

Example:
    >>> # nhwc_window_rule(sch, "depthwise_conv2d_nhwc", info, Target("llvm -mcpu=haswell -num-cores=2").cpu)
"""
from __future__ import annotations

from typing import Any, Optional

from ingot.cpu_model import CpuModel
from ingot.ir.expr import Var
from ingot.ir.functor import collect_loads, collect_vars
from ingot.tir.schedule.error import ScheduleError

from .analysis import BlockInfo
from .conv_nhwc import _register_tile, current_policy
from .rules import _fuse_parallel, choose_mr, fuse_parallel_loops

__all__ = ["nhwc_window_rule", "window_accumulators"]


def nhwc_window_rule(sch: Any, name: str, info: BlockInfo, cpu: CpuModel, *,
                     epilogue: bool = True, nvec: Optional[int] = None, mr: Optional[int] = None,
                     inline_pad: bool = True) -> None:
    """Window reductions over NHWC (depthwise conv2d, max/avg pool, global pool; module note):
    the output's last axis ``c`` indexes every input as its last axis, the reduce axes are the
    window. Tile MR output pixels × one ``lanes``-wide channel vector, window loops outside the
    tile, accumulators local, the epilogue fused. Raises `ScheduleError` otherwise (the driver
    then uses `reduction_rule`).

    Example:
        >>> # nhwc_window_rule(sch, "depthwise_conv2d_nhwc", info, Target("llvm -num-cores=2").cpu)
    """
    lanes, cores = cpu.lanes(info.dtype), cpu.cores
    if info.kind not in ("reduction", "gemm") or not info.simple_loops or None in info.extents or not info.reduce:
        raise ScheduleError(f"nhwc_window_rule: block {name!r} is not a static window reduction")
    nsp = len(info.spatial)
    if info.spatial != list(range(nsp)) or nsp < 2:
        raise ScheduleError(f"nhwc_window_rule: block {name!r}: spatial axes are not the leading ones")
    block = sch.get(sch.get_block(name))
    ivars = [iv.var for iv in block.iter_vars]
    if list(block.body.indices) != ivars[:nsp]:
        raise ScheduleError(f"nhwc_window_rule: block {name!r}: output not indexed by its spatial axes in order")
    cv = ivars[nsp - 1]
    rvars = set(ivars[nsp:])
    for ld in collect_loads(block.body.value):
        if ld.buffer is block.body.buffer:
            continue
        if not (isinstance(ld.indices[-1], Var) and ld.indices[-1] is cv):
            raise ScheduleError(f"nhwc_window_rule: block {name!r}: {ld.buffer.name!r} is not indexed by the "
                                "channel as its last axis (not channels-last)")
        if any(cv in collect_vars(ix) for ix in ld.indices[:-1]):
            raise ScheduleError(f"nhwc_window_rule: block {name!r}: {ld.buffer.name!r} uses the channel twice")
        if any(v in rvars for v in collect_vars(ld.indices[-1])):
            raise ScheduleError(f"nhwc_window_rule: block {name!r}: the channel index of {ld.buffer.name!r} "
                                "depends on a reduce axis")
    c = info.extents[nsp - 1]
    vl = lanes
    while vl > 4 and c % vl:
        vl //= 2
    if c % vl or c < 4:
        raise ScheduleError(f"nhwc_window_rule: block {name!r}: {c} channels have no vector split")
    if nvec is None:
        nvec = 2 if c % (2 * vl) == 0 and c >= 4 * vl else 1
    if inline_pad:
        _inline_pad(sch, name)
    # Step 1. Tiles: the pixel axis before c (ow) -> (xo, xi = MR); c -> (co, cn, cl).
    blk = sch.get_block(name)
    loops = sch.get_loops(blk)
    spatial = loops[:nsp]
    reduce = [loops[k] for k in info.reduce]
    w_ext = info.extents[nsp - 2]
    mr = mr or (choose_mr(w_ext, nvec, cpu) if nsp >= 3 else 1)
    if nvec > 1 and mr * nvec > window_accumulators(cpu):
        nvec = 1
        mr = choose_mr(w_ext, nvec, cpu) if nsp >= 3 else 1
    mr = mr if w_ext % mr == 0 else 1
    co, cn, cl = sch.split(spatial[-1], [None, nvec, vl])
    if nsp >= 3:
        xo, xi = sch.split(spatial[-2], [None, mr])
        outer = spatial[:-2]
        rows = 1
        for e in info.extents[:nsp - 2]:
            rows *= e
        sch.reorder(*outer, co, xo, *reduce, xi, cn, cl)
        if current_policy().window_row_tasks and cores <= rows < 4 * cores:
            # few rows (7x7 maps): the rows alone are the tasks (`ConvNhwcPolicy.window_row_tasks`)
            outer_loops, outer_ext = list(outer), list(info.extents[:nsp - 2])
        else:
            outer_loops, outer_ext = [*outer, co], [*info.extents[:nsp - 2], c // (nvec * vl)]
        tile_loop = xo
        sch.unroll(xi)
    else:
        # (n, c): every output vector is one task; the fused loop is also the tile loop
        outer = spatial[:-1]
        sch.reorder(*outer, co, *reduce, cn, cl)
        tile_loop = fuse_parallel_loops(sch, [*outer, co])
        outer_loops, outer_ext = [], []
    sch.unroll(cn)
    sch.vectorize(cl)
    if outer_loops:
        _fuse_parallel(sch, outer_loops, outer_ext, cores)
    _register_tile(sch, blk, tile_loop, len(reduce), 3 if nsp >= 3 else 2, vl, epilogue)


def window_accumulators(cpu: CpuModel) -> int:
    """Accumulators a window-reduction tile may have on ``cpu``: GCC software-pipelines the
    strided input loads of the unrolled taps, which need registers of their own, so half the
    register file less two (32 registers: 14, a 7 x 2 tile).

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> window_accumulators(named_cpu("sapphirerapids")), window_accumulators(named_cpu("znver3"))
        (14, 6)
    """
    return cpu.vector_registers // 2 - 2


def _inline_pad(sch: Any, name: str) -> None:
    """Inline the zero/min-padding stage feeding window block ``name`` (a producer tagged
    ``pad`` by `ingot.ops.nn.pad`): the window reads ``x`` behind a bounds check that is uniform
    over the channel vector, instead of a whole padded copy of the activation written and read
    back: the kernel is memory bound, and the copy adds a write and a read of the whole activation."""
    for prod in sch.get_producers(sch.get_block(name)):
        blk = sch.get(prod)
        if blk.name_hint.startswith("pad_temp") and not blk.reads[0].buffer.name.startswith("pad_temp"):
            try:
                sch.compute_inline(prod)  # checks every precondition before it changes anything
            except ScheduleError:
                return
