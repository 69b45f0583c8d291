"""NCHW convolutions vectorized over output channels (pre-packed or per-call packed weights).

Note: `gemm_rule` treats an NCHW conv2d as an implicit GEMM with the output width as the vector
axis. ResNet/MobileNet widths (56, 28, 14, 7) are not multiples of 16, so the last vector of each
row is predicated, which the C backend scalarizes (no zmm FMA, hundreds of stack accesses in
the micro-kernel). Output channels (64 … 2048) are multiples of 16, so this rule swaps the roles:

    w_global[o // NR, c, ky, kx, o % NR] = w[o, c, ky, kx]     # cache_read + transform_layout
    for n, oh (parallel, fused), ow tiles, oc blocks:
        acc[MR ow, NR oc] local, laid out (…, ow, oc) so that oc is contiguous (transform_layout)
        for c, ky, kx:                      # the whole reduction in registers
            for r in unroll(MR): for v in unroll(NR / 16): for l in vectorized(16):
                acc[r, v*16 + l] += x_pad[n, c, oh*s + ky, (ow0 + r)*s + kx] * w_global[...]
        write back (a strided store per output channel, once per tile) + fused epilogue

MR divides the output width (56 → 8, 28/14/7 → 7), so there are no predicates. When the graph
pre-packed a constant weight (`ingot.graph.transform.PackWeights` → ``conv2d_packed_weight``,
read as ``w[o // P, c, ky, kx, o % P]``, recognized by `analysis.panel_layout`), NR = P and the
per-call copy is skipped. Depthwise convolutions are only accepted in the channel-blocked form of
``depthwise_conv2d_packed_weight`` (input ``data_pack[n, o // P, y, x, o % P]``: the P channels
of a vector are contiguous in both operands); an input that depends on the output channel any
other way (grouped/plain depthwise) is refused — vectorizing over channels would gather it —
and keeps `gemm_rule`.

Example:
    >>> # conv_oc_rule(sch, "conv2d_nchw", info, Target("llvm -num-cores=2").cpu)
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ingot.cpu_model import CpuModel
from ingot.ir.expr import Var
from ingot.ir.functor import collect_loads, collect_vars
from ingot.tir.schedule.error import ScheduleError

from .analysis import BlockInfo, panel_layout
from .rules import fit_tile, gemm_rule

__all__ = ["conv_oc_rule"]


def conv_oc_rule(sch: Any, name: str, info: BlockInfo, cpu: CpuModel, *, epilogue: bool = True) -> None:
    """Register-tiled NCHW convolution vectorized over output channels (module note). Raises
    `ScheduleError` when the block is not such a convolution (the driver then uses `gemm_rule`):
    the vector axis of `analyze_block` must be the last output axis (width) with the row axis an
    earlier one (channels) that is a multiple of ``lanes``, indexes the weights by a plain
    variable or as a pre-packed panel, and does not index the input (except the channel-blocked
    input of a packed depthwise conv, see the module note).

    Example:
        >>> # conv_oc_rule(sch, "conv2d_nchw", info, Target("llvm -num-cores=2").cpu)
    """
    lanes, cores = cpu.lanes(info.dtype), cpu.cores
    if info.kind != "gemm" or not info.simple_loops or None in info.extents or len(info.reduce) < 2:
        raise ScheduleError(f"conv_oc_rule: block {name!r} is not a convolution with static shapes")
    o, x = info.i_index, info.j_index
    ext_o, ext_x = info.extents[o], info.extents[x]
    if ext_o % lanes or x != max(info.spatial) or o > x:
        raise ScheduleError(f"conv_oc_rule: block {name!r}: {ext_o} output channels are not a multiple of "
                            f"{lanes} lanes")
    # Step 1. Find the weights (indexed by the output channel, not by the width) and the input.
    block = sch.get(sch.get_block(name))
    ov, xv = block.iter_vars[o].var, block.iter_vars[x].var
    weight, wdim, panel, input_panel = None, None, None, None
    for ld in collect_loads(block.body.value, nested=False):
        if ld.buffer is block.body.buffer:
            continue
        dims = [d for d, ix in enumerate(ld.indices) if isinstance(ix, Var) and ix is ov]
        packed = panel_layout(ld, ov)
        uses_x = xv in collect_vars(ld)
        if not uses_x and (dims or packed):
            weight, wdim, panel = ld.buffer, (dims[0] if dims else None), (packed[1] if packed and not dims else None)
        elif uses_x and packed and not dims:
            # the NCHWc input of a packed depthwise conv: P channels contiguous, like the weights
            input_panel = packed[1]
        elif ov in collect_vars(ld):
            raise ScheduleError(f"conv_oc_rule: block {name!r}: the input depends on the output channel "
                                "(depthwise/grouped): vectorizing over channels would gather it")
    if weight is None:
        raise ScheduleError(f"conv_oc_rule: block {name!r}: no operand indexed by the output channel")
    if input_panel is not None and input_panel != panel:
        raise ScheduleError(f"conv_oc_rule: block {name!r}: the channel-blocked input (panel {input_panel}) and "
                            f"the weights (panel {panel}) disagree")
    if input_panel is None and ext_x % lanes == 0 and ext_x >= 2 * lanes:
        raise ScheduleError(f"conv_oc_rule: block {name!r}: the width {ext_x} vectorizes without predicates "
                            "(gemm_rule is the better fit)")
    if panel is not None:
        # Pre-packed weights (ingot.ops.packed): the register tile's channel vectors are the panel.
        if panel % lanes:
            raise ScheduleError(f"conv_oc_rule: block {name!r}: weight panel width {panel} is not a multiple of "
                                f"{lanes} lanes")
        nvec = panel // lanes
    else:
        nvec = 2 if ext_o % (2 * lanes) == 0 else 1
    try:
        mr, tile_nvec = fit_tile(ext_x, nvec, cpu)
    except ScheduleError as err:
        raise ScheduleError(f"conv_oc_rule: block {name!r}: {err}") from None
    nr = nvec * lanes  # the panel the weights are packed in; the tile may cover part of it
    nvec = tile_nvec
    # Step 2. Pack the weights into NR-wide output-channel panels (a parallel copy per call)
    # unless the graph pre-packed them at compile time (PackWeights).
    if panel is None:
        from .blocked import _pack

        read_index = next(k for k, r in enumerate(block.reads) if r.buffer is weight)
        _pack(sch, name, read_index, wdim, len(weight.shape), nr, lanes, cores)
    # Step 3. The register tile with rows = output width, vectors = output channels; the local
    # accumulator moves the channel axis last so that each vector is contiguous.
    ndim = len(block.body.indices)
    out_o = next(d for d, ix in enumerate(block.body.indices) if ix is ov)

    def local_layout(*idx: Any) -> tuple:
        return (*(v for d, v in enumerate(idx) if d != out_o), idx[out_o])

    swapped = replace(info, i_index=x, j_index=o)
    gemm_rule(sch, name, swapped, cpu, epilogue=epilogue, mr=mr, nvec=nvec, local_layout=local_layout, lanes=lanes)
    del ndim
