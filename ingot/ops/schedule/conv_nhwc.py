"""NHWC convolutions (groups 1): an implicit GEMM vectorized over the contiguous output channel.

Note: in NHWC the output channel ``o`` is the last (contiguous) axis of the output and of the
weights (HWIO, or pre-packed ``[O/P, KH, KW, C, P]`` panels, `ingot.ops.packed`), and the input
does not depend on it, so a conv2d is an implicit GEMM whose register tile is MR output pixels
(along OW) × NR = P output channels, stored as contiguous vectors — no transposing write-back:

    for task in T.parallel(...):          # (n, oh) rows for big maps; (n, oc block) for small
        for oc block, ow tile:            #   maps: each weight panel stays hot
            acc[MR, NR] local             # cache_write: MR x NR/16 zmm accumulators
            for ky, kx, c:                # the whole reduction: broadcast x, vector-load w panel
                for r in unroll(MR): for v in unroll(NR/16): for l in vectorized(16):
                    acc[r, v*16 + l] += x_pad[n, oh*s + ky, (ow0 + r)*s + kx, c] * w[ob, ky, kx, c, v*16 + l]
            out[n, oh, ow0 + r, ob*NR + :] = epilogue(acc[r, :])   # bias, residual, relu/clip

The write-back of the local tile and every elementwise consumer (bias add, residual add,
relu/clip) are moved under the tile loop and then inlined into one block that reads the
accumulators and writes the final output: one pass, vector stores. MR divides OW (56 → 8;
28, 14, 7 → 7; 112 → 8), so there is no predicate in the micro-kernel; 4 channel steps are
unrolled.

Loop order (`conv_nhwc_rule`): a weight panel is KH·KW·C·P·4 bytes (3×3, C = 512: 590 KB).
When the map is small (OH·OW ≤ `SMALL_MAP` pixels, ResNet's 14×14 and 7×7 stages) the oc block
is the outer loop and the parallel loop is (n, oc block) — each core walks all the pixels of its
panels instead of re-streaming the whole weight tensor from L3 once per row. For big maps the
rows are the parallel axis (n, oh) and the oc blocks loop inside each row.

Sliced reduction (`choose_kc`): a panel larger than L1 would still stream from L2 once per pixel
tile. Then the input channels are cut into slices of ``kc`` (32 for 3×3, ≤ 128 for 1×1: ≤ 36 KB
of weights) and the slice loop goes outside the pixel tiles of a task, so a slice stays in L1
for all of them; the accumulators live in the task's output block across slices (as in
`blocked_gemm_rule`) and the epilogue runs once per task. Where the registers hold it (32 of
them), those layers use a 14 × 2-vector tile when 14 divides OW (each weight vector feeds 14
FMAs); so do unsliced 1x1 convs with >= 2 oc blocks at OW = 14/28/56 (`_wide_1x1`); at OW = 28/56
with >= 2 oc blocks and C >= 64 in "pixels" order: rows parallel, and inside a row each 14-pixel
tile runs all the oc blocks (GEMM order: the tile's output rows and residual are one contiguous
block, its input pixels stay in L1, and GCC keeps the tile in registers, which it did not in
"rows" order). The 1x1 convs of 7×7 maps stay sliced: inside a model their weights come cold,
and a slice kept in L1 is read from memory once per task. Their stride-1 ones (`_two_panel_1x1`: ResNet-50's
512->2048 and 2048->512) use a 7 x 4-vector tile over two adjacent weight panels instead of 7 x 2
(each broadcast input feeds 4 FMAs instead of 2), 64-channel slices, no unroll (GCC spills with
2); the stride-2 downsample keeps 7 x 2 (`_stride_1`). The other sliced 1x1 convs in "oc" order
prefetch the next slice's weights at each slice (`ConvNhwcPolicy.weight_prefetch`): inside a model
the weights come cold, in 4 KB pieces 32 KB apart that hardware prefetchers do not follow.
The measurements behind these choices are in BENCHMARKS.md ("conv_nhwc choices").
Convs with < 8 input channels (the RGB stem) fuse (kx, c) into one
contiguous reduce loop.

Small-N GEMMs (MobileNetV2's projections: K = C large, N = O small): 64-output 1x1s at 14x14
(`_small_n_1x1`: two panels, so "oc" order gave one 7 x 2 task per core) use a 7 x 4-vector tile
over both panels with the (n, oh) rows parallel. Sliced 1x1s at 7x7 with
an odd handful of oc blocks (960->160, 576->160: 5 tasks, or 7 rows split 4/3) split K in
`ConvNhwcPolicy.split_k` parts by `rfactor` (`conv_nhwc_splitk.split_k_1x1`): one (part, n) task per core covers every oc block
and pixel of its channels, each core reads only its part of the (cold) weights, and one pass sums
the partials with the epilogue fused.

Tuning: `build_conv_nhwc` takes every knob (loop order, MR, the channel split, parallel fusion)
as ints or sampled variables; `default_conv_params` picks the default's; the tuner's `NhwcConv`
rule (`ingot.tune.schedule_rule.conv_nhwc`) samples around them.

Depthwise convolutions and pools over NHWC (window reductions) have their own rule,
`ingot.ops.schedule.conv_window.nhwc_window_rule`, built on this module's register tile.

Example:
    >>> # conv_nhwc_rule(sch, "conv2d_nhwc", info, Target("llvm -mcpu=haswell -num-cores=2").cpu)
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from ingot.codegen.c.printer import COMPILER_TUNE_KEY
from ingot.cpu_model import CpuModel
from ingot.ir.expr import Var
from ingot.ir.transform import PassContext, register_pass_config
from ingot.ir.functor import collect_loads, collect_vars
from ingot.tir.schedule.error import ScheduleError
from ingot.tir.stmt import ForKind

from .analysis import BlockInfo, panel_layout
from .rules import _fuse_parallel, _vectorize_tail, choose_mr, fit_tile, fuse_parallel_loops, max_tile_rows

__all__ = ["conv_nhwc_rule", "choose_kc", "SMALL_MAP", "ConvNhwcShape", "ConvNhwcParams",
           "analyze_conv_nhwc", "default_conv_params", "build_conv_nhwc",
           "fit_conv_tile", "folded_rows", "wide_tile_rows", "two_panel_rows", "two_panel_kc",
           "ConvNhwcPolicy", "POLICY_CONFIG", "current_policy"]

#: Output maps with at most this many pixels loop over oc blocks outermost (weights stay hot).
#: Not derived (yet): it stands for the per-core L2 (`CpuModel.l2_bytes`) holding the input map
#: that an "oc" task re-reads once per oc block (14 x 14 x 256 floats = 196 KiB in a 256 KiB
#: L2), against "rows" order re-streaming the whole weight tensor once per row. A rule read from
#: ``l2_bytes`` alone would move SPR's 28 x 28 maps (2 MiB L2) to "oc" order, which no measurement
#: backs yet, so the pixel count of the measured CPUs stays.
SMALL_MAP = 14 * 14


def _loop_extent(sch: Any, loop: Any) -> Optional[int]:
    e = sch.get(loop).extent
    return getattr(e, "value", None) if type(e).__name__ == "IntImm" else None


def _channel_weight(block: Any, ov: Var, name: str) -> "tuple[Any, Optional[int]]":
    """(weight buffer, panel width or None) of an NHWC conv block: the one operand indexed by
    the output channel ``ov`` — as its last index (HWIO) or as a pre-packed panel. Raises when
    another operand (the input) depends on ``ov`` (grouped/depthwise: not a GEMM over c)."""
    weight, panel = None, None
    for ld in collect_loads(block.body.value):
        if ld.buffer is block.body.buffer:
            continue
        packed = panel_layout(ld, ov)
        last_is_o = isinstance(ld.indices[-1], Var) and ld.indices[-1] is ov
        others = [ix for ix in ld.indices[:-1] if ov in collect_vars(ix)]
        if packed is not None and weight is None:
            weight, panel = ld.buffer, packed[1]
        elif last_is_o and not others and weight is None:
            weight = ld.buffer
        elif ov in collect_vars(ld):
            raise ScheduleError(f"conv_nhwc_rule: block {name!r}: operand {ld.buffer.name!r} depends on the output "
                                "channel other than as its contiguous last axis (grouped conv?)",
                                "only groups = 1 NHWC convs are register-tiled this way")
    if weight is None:
        raise ScheduleError(f"conv_nhwc_rule: block {name!r}: no operand is indexed by the output channel")
    return weight, panel


@dataclass(frozen=True)
class ConvNhwcShape:
    """What `analyze_conv_nhwc` recognized in an NHWC conv block: sizes, the input-channel
    reduce axis (``rc_pos``: its iteration-variable position), the other reduce taps
    (``taps`` = KH·KW), the vector width and vectors per output-channel tile (NR = nvec·lanes;
    fixed by the weight panel when the weights are pre-packed).

    Example:
        >>> ConvNhwcShape(1, 56, 56, 64, 64, 9, 6, 16, 2).nr
        32
    """
    n: int
    oh: int
    ow: int
    o: int
    c: int
    taps: int
    rc_pos: int
    lanes: int
    nvec: int
    #: gcc tuning of a tile that fits the registers only with its weight vectors read from memory
    #: by the FMAs (`CpuModel.fold_tune`; `fit_conv_tile`), None for an ordinary tile
    fold_tune: Optional[str] = None

    @property
    def nr(self) -> int:
        return self.nvec * self.lanes


@dataclass(frozen=True)
class ConvNhwcParams:
    """The knobs of `build_conv_nhwc` as plain ints (what `default_conv_params` picks):
    ``order`` (``"rows"``: (n, oh) rows parallel, oc blocks inside; ``"oc"``: (n, oc block)
    parallel, rows inside; ``"pixels"``: rows parallel, each MR-pixel tile loops over all the oc
    blocks — unsliced reductions only, the 1x1 default), ``mr`` (pixels per register tile, dividing OW), ``kc`` (input
    channels per reduction slice; 0: whole reduction per tile), ``ku`` (channel steps unrolled;
    1: none), ``parallel_fuse`` (``"rows"`` order: how many leading loops of (n, oh, oc block)
    fuse into the parallel loop; None: the fewest giving >= 4 tasks per core) and ``prefetch``
    (sliced layers: software-prefetch the next channel slice's weights at each slice, with this
    ``__builtin_prefetch`` locality 0-3; None: no prefetch).

    Example:
        >>> ConvNhwcParams("rows", 8, 32, 4).x_factors(56), ConvNhwcParams("rows", 8, 32, 4).c_factors(64)
        ([7, 8], [2, 8, 4])
    """
    order: str
    mr: int
    kc: int
    ku: int
    parallel_fuse: Optional[int] = None
    prefetch: Optional[int] = None

    def x_factors(self, ow: int) -> "list[int]":
        """OW -> (pixel tiles, MR) split factors."""
        return [ow // self.mr, self.mr]

    def c_factors(self, c: int) -> "Optional[list[int]]":
        """C -> (slices, kc/ku, ku) when sliced, (C/ku, ku) when not; None: no split."""
        if self.kc:
            return [c // self.kc, self.kc // self.ku, self.ku]
        if self.ku > 1:
            return [c // self.ku, self.ku]
        return None


def analyze_conv_nhwc(sch: Any, name: str, info: BlockInfo, lanes: int) -> ConvNhwcShape:
    """Recognize an NHWC conv2d block (groups 1): spatial (n, oh, ow, o), reduce (ky, kx, c) in
    any order, output ``[N, OH, OW, O]``, the weights indexed by ``o`` as their last axis or as a
    pre-packed panel. Raises `ScheduleError` (naming the block and the reason) otherwise.

    Example:
        >>> # shape = analyze_conv_nhwc(sch, "conv2d_nhwc", analyze_block(sch, blk), 16); shape.nr
    """
    if info.kind != "gemm" or not info.simple_loops or None in info.extents:
        raise ScheduleError(f"conv_nhwc_rule: block {name!r} is not a GEMM-like reduction with static shapes")
    if len(info.spatial) != 4 or info.spatial != [0, 1, 2, 3] or info.j_index != 3 or info.i_index != 2:
        raise ScheduleError(f"conv_nhwc_rule: block {name!r} is not an NHWC conv (output [N, OH, OW, O] with the "
                            "input indexed by OW and the weights by O)")
    block = sch.get(sch.get_block(name))
    ivars = [iv.var for iv in block.iter_vars]
    if [ix for ix in block.body.indices] != ivars[:4]:
        raise ScheduleError(f"conv_nhwc_rule: block {name!r}: output not indexed [n, oh, ow, o]")
    _, panel = _channel_weight(block, ivars[3], name)
    n_ext, oh, ow, o = info.extents[:4]
    if panel is not None:
        if panel % lanes:
            raise ScheduleError(f"conv_nhwc_rule: block {name!r}: weight panel {panel} is not a multiple of "
                                f"{lanes} lanes", "pack the weights with P = 16 or 32")
        nvec = panel // lanes
    elif o % lanes:
        # O not a multiple of the vector: the widest power-of-two vector dividing it (the ISA's
        # narrower registers, down to SSE's 4 floats), so a shape one ISA tiles every ISA tiles;
        # a narrow layer (MobileNetV2's 24-channel projections on AVX-512) as one row of <= 3 vectors
        while lanes > 4 and o % lanes:
            lanes //= 2
        if o % lanes:
            raise ScheduleError(f"conv_nhwc_rule: block {name!r}: {o} output channels are not a multiple of "
                                f"{lanes} (the narrowest vector)")
        nvec = o // lanes if o // lanes <= 3 else (2 if o % (2 * lanes) == 0 else 1)
    else:
        nvec = 2 if o % (2 * lanes) == 0 else 1
    if o % (nvec * lanes):
        raise ScheduleError(f"conv_nhwc_rule: block {name!r}: {o} output channels are not a multiple of "
                            f"{nvec * lanes}")
    # The input channel: the reduce axis in the input's last (contiguous) index; innermost.
    rc_pos = _input_channel_axis(block, info, ivars)
    taps = 1
    for k in info.reduce:
        if k != rc_pos:
            taps *= info.extents[k]
    return ConvNhwcShape(n_ext, oh, ow, o, info.extents[rc_pos], taps, rc_pos, lanes, nvec)


def fit_conv_tile(shape: ConvNhwcShape, cpu: CpuModel, name: str = "?") -> ConvNhwcShape:
    """``shape`` with as many vectors per tile as ``cpu``'s registers allow for a tile height
    dividing OW (`rules.fit_tile`): with 16 registers OW = 14 and 7 get 1-vector tiles — unless the
    CPU has a ``fold_tune`` under which the whole panel's tile fits with the weight vectors read
    from memory by the FMAs (7 x 2 vectors + 1 broadcast in 16 registers, AVX2 Zen cores): then
    the tile keeps its vectors and carries that tuning (`folded_rows`).

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> fit_conv_tile(ConvNhwcShape(1, 14, 14, 256, 256, 9, 6, 8, 2), named_cpu("haswell")).nvec
        1
        >>> zen = fit_conv_tile(ConvNhwcShape(1, 14, 14, 256, 256, 9, 6, 8, 2), named_cpu("znver3"))
        >>> zen.nvec, zen.fold_tune, folded_rows(zen, named_cpu("znver3"))
        (2, 'znver3', 7)
    """
    try:
        _, nvec = fit_tile(shape.ow, shape.nvec, cpu)
    except ScheduleError as err:
        raise ScheduleError(f"conv_nhwc_rule: block {name!r}: {err}") from None
    if nvec < shape.nvec and cpu.fold_tune:
        folded = replace(shape, fold_tune=cpu.fold_tune)
        if folded_rows(folded, cpu):
            return folded
    return replace(shape, nvec=nvec)


def folded_rows(shape: ConvNhwcShape, cpu: CpuModel) -> int:
    """The tile height of a folded-operand tile (`fit_conv_tile`): the largest divisor of OW whose
    ``rows x nvec`` tile fits ``cpu``'s registers with the weight vectors in memory and has enough
    independent accumulators for the FMA pipes (`CpuModel.min_accumulators`) (0: none).

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> folded_rows(ConvNhwcShape(1, 7, 7, 64, 64, 9, 6, 8, 2), named_cpu("znver3"))
        7
    """
    for rows in range(shape.ow, 0, -1):
        if (shape.ow % rows == 0 and cpu.fits_registers(rows, shape.nvec, folded=True)
                and rows * shape.nvec >= cpu.min_accumulators):
            return rows
    return 0


def default_conv_params(shape: ConvNhwcShape, cpu: CpuModel, *, order: Optional[str] = None,
                        mr: Optional[int] = None, kc: Optional[int] = None) -> ConvNhwcParams:
    """The rule-based default knobs of a conv on ``cpu`` (module note): MR from `choose_mr` (14 x 2
    vectors for sliced layers whose OW 14 divides, where the registers hold that tile), ``"oc"`` order on small maps, ``kc`` from
    `choose_kc`, `KU` unrolled channel steps, the next-slice weight prefetch for sliced 1x1 convs
    in ``"oc"`` order. ``order``/``mr``/``kc`` force a value.

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> default_conv_params(ConvNhwcShape(1, 56, 56, 64, 64, 9, 6, 16, 2), named_cpu("sapphirerapids").with_cores(2))
        ConvNhwcParams(order='rows', mr=14, kc=32, ku=2, parallel_fuse=None, prefetch=None)
        >>> default_conv_params(ConvNhwcShape(1, 56, 56, 64, 64, 9, 6, 8, 2), named_cpu("znver3").with_cores(2))
        ConvNhwcParams(order='rows', mr=4, kc=32, ku=4, parallel_fuse=None, prefetch=None)
    """
    cores = cpu.cores
    wide = wide_tile_rows(shape.ow, shape.nvec, cpu)  # a taller tile than choose_mr's divides OW
    mr_given = mr is not None
    if shape.fold_tune and not mr_given:
        # weight vectors read by the FMAs: one channel step per iteration keeps the operands of
        # the unrolled steps from piling up in the registers
        order = order or ("oc" if shape.oh * shape.ow <= SMALL_MAP else "rows")
        return ConvNhwcParams(order, folded_rows(shape, cpu), 0 if kc is None else kc, 1)
    mr = mr or choose_mr(shape.ow, shape.nvec, cpu)
    if shape.ow % mr:
        raise ScheduleError(f"conv_nhwc_rule: no register-tile height divides OW = {shape.ow}")
    if (wide and kc is None and not mr_given and order in (None, "pixels") and _wide_1x1(shape, 2, cpu)
            and shape.c >= 64 and shape.ow >= 2 * wide):
        # 1x1 convs with an L1-resident panel at OW = 28/56: the 14 x 2-vector tile (each weight
        # vector feeds 14 FMAs) in "pixels" order: the oc blocks inside each pixel tile, so its
        # output pixels' whole rows, and the residual, are written/read as one contiguous block
        # while its 14 input pixels stay in L1; in "rows" order GCC does not keep this tile in
        # registers (nor here at C = 32: those keep the choice below)
        return ConvNhwcParams("pixels", wide, 0, KU)
    if wide and kc is None and _wide_1x1(shape, 4, cpu) and not mr_given and order in (None, "rows"):
        return ConvNhwcParams("rows", wide, 0, KU)
    if order == "pixels" and (kc or choose_kc(shape.taps, shape.c, shape.nr, cpu)):
        order = "rows"  # a sliced reduction keeps the panel slice in L1 across the row's tiles
    if order is None:
        tasks = shape.n * (shape.o // shape.nr)
        order = "oc" if shape.oh * shape.ow <= SMALL_MAP and not few_uneven_tasks(tasks, cores) else "rows"
    if kc is None:
        kc = choose_kc(shape.taps, shape.c, shape.nr, cpu)
    if kc and shape.c % kc:
        raise ScheduleError(f"conv_nhwc_rule: channel slice {kc} does not divide C = {shape.c}")
    prefetch = None
    if kc:
        ku = KU if kc % KU == 0 else 1
        if shape.taps == 1 and order == "oc":
            # sliced 1x1 convs, (n, oc block) tasks: the next slice's weights (ConvNhwcPolicy)
            prefetch = current_policy().weight_prefetch
        if wide and not mr_given and shape.nvec == 2:
            # Sliced (big-panel) layers with a wide tile (OW = 14/28/56 in 32 registers): a 14 x
            # 2-vector tile (28 zmm accumulators) loads each weight vector once per 14 FMAs instead
            # of 7; 2 unrolled steps keep GCC's register allocation spill-free (with 4 it spills).
            mr, ku = wide, 2
    elif shape.c < 8 and shape.taps > 1:
        ku = 1  # the RGB stem: (kx, c) fused instead (build_conv_nhwc)
    else:
        ku = KU if KU > 1 and shape.c % KU == 0 and shape.c > KU else 1
    return ConvNhwcParams(order, mr, kc, ku, prefetch=prefetch)


def _two_panel_1x1(shape: ConvNhwcShape, cpu: CpuModel) -> bool:
    """Whether a 1x1 conv gets the OW x 4-vector tile over two weight panels (`conv_nhwc_rule`):
    sliced (a panel larger than L1), the whole row one two-panel register tile (`two_panel_rows`
    = OW: 7 x 4 vectors in 32 registers, the 7x7 stage), 2-vector panels, an even number of oc
    blocks, C a multiple of the slice `two_panel_kc`."""
    return (shape.taps == 1 and shape.nvec == 2 and shape.o % (2 * shape.nr) == 0
            and two_panel_rows(shape.ow, shape.nvec, cpu) == shape.ow
            and shape.c % two_panel_kc(shape.nr, cpu) == 0 and bool(choose_kc(shape.taps, shape.c, shape.nr, cpu)))


def few_uneven_tasks(tasks: int, cores: int) -> bool:
    """Whether ``tasks`` parallel tasks split unevenly over ``cores`` and are too few (< 4 per
    core) for the imbalance to average out: 5 tasks on 2 cores run 3/2, a 20% loss.

    Example:
        >>> few_uneven_tasks(5, 2), few_uneven_tasks(10, 2), few_uneven_tasks(9, 2)
        (True, False, False)
    """
    return bool(tasks % cores) and tasks < 4 * cores


def _small_n_1x1(shape: ConvNhwcShape, cpu: CpuModel) -> bool:
    """Whether an unsliced 1x1 conv on a small map (`SMALL_MAP`: "oc" order) has exactly two
    2-vector oc blocks (MobileNetV2's 384->64 and 192->64 projections at 14x14, fewer tasks than
    "oc" order can spread) and a two-panel tile height divides OW into two or more tiles
    (`two_panel_rows`: 7 x 4 vectors in 32 registers at OW = 14): it gets that tile over both
    panels in "rows" order (`ConvNhwcPolicy.small_n_two_panel`). A row that is one two-panel tile
    (OW = 7) keeps the one-panel default: never measured with this tile, and GCC spills the
    register-file-sized tile there (tests/ops_schedule/test_conv_nhwc.py, 1x1 stride 2)."""
    return (shape.taps == 1 and shape.oh * shape.ow <= SMALL_MAP and shape.nvec == 2
            and shape.o == 2 * shape.nr and not choose_kc(shape.taps, shape.c, shape.nr, cpu)
            and 0 < two_panel_rows(shape.ow, shape.nvec, cpu) < shape.ow)


def _stride_1(sch: Any, name: str, shape: ConvNhwcShape) -> bool:
    """Whether the input of conv block ``name`` has the output's spatial size (a stride-1 1x1):
    the two-panel tile pays only there (a strided input row feeds 4 FMAs per load either way)."""
    block = sch.get(sch.get_block(name))
    weight, _ = _channel_weight(block, block.iter_vars[3].var, name)
    for ld in collect_loads(block.body.value):
        if ld.buffer is not block.body.buffer and ld.buffer is not weight and len(ld.buffer.shape) == 4:
            dims = [getattr(d, "value", None) for d in ld.buffer.shape[1:3]]
            return dims == [shape.oh, shape.ow]
    return False


def _wide_1x1(shape: ConvNhwcShape, min_blocks: int, cpu: CpuModel) -> bool:
    """Whether a 1x1 conv gets the wide-tile "pixels" default (`default_conv_params`): unsliced
    panel, 2-vector tiles, a wide tile dividing OW (`wide_tile_rows`), at least ``min_blocks`` oc
    blocks: in "rows" order the wide tile needs 4 blocks to pay for its longer tile loop, in
    "pixels" order 2 (one block has nothing to reuse the input pixels for)."""
    return (shape.taps == 1 and shape.nvec == 2 and wide_tile_rows(shape.ow, shape.nvec, cpu) > 0
            and shape.o // shape.nr >= min_blocks
            and not choose_kc(shape.taps, shape.c, shape.nr, cpu) and shape.c % KU == 0 and shape.c > KU)


def conv_nhwc_rule(sch: Any, name: str, info: BlockInfo, cpu: CpuModel, *, epilogue: bool = True,
                   order: Optional[str] = None, mr: Optional[int] = None, kc: Optional[int] = None) -> None:
    """Register-tiled NHWC conv2d (module note) on a ``"gemm"`` block whose output is
    ``[N, OH, OW, O]`` with ``O`` the vector axis and ``OW`` the tile-row axis: `ingot.ops.nn`'s
    ``conv2d_nhwc`` (groups 1) and `ingot.ops.packed`'s ``conv2d_nhwc_packed_weight``.
    ``order`` forces ``"rows"``, ``"oc"`` or ``"pixels"`` (see the note), ``mr`` the tile height, ``kc`` the
    channel slice of the blocked reduction (0: none; default: `choose_kc`). Raises
    `ScheduleError` when the block is not such a conv (4 output axes, O a multiple of the
    vector width, a tile height dividing OW), so the driver falls back to `gemm_rule`.
    The knobs are `default_conv_params`'; `build_conv_nhwc` builds the schedule. When ``cpu``'s
    registers hold no 2-vector tile whose height divides OW (16 registers, OW = 14 or 7), the
    tile covers one vector of the panel (`fit_tile`).

    Example:
        >>> # conv_nhwc_rule(sch, "conv2d_nhwc", info, Target("llvm -mcpu=haswell -num-cores=2").cpu)
    """
    cores, policy = cpu.cores, current_policy()
    order = order if order is not None else policy.order
    if order not in (None, "oc", "rows", "pixels"):
        raise ValueError(f"conv_nhwc_rule: order must be 'rows', 'oc' or 'pixels', got {order!r}")
    shape = analyze_conv_nhwc(sch, name, info, cpu.lanes(info.dtype))
    if mr is None:
        shape = fit_conv_tile(shape, cpu, name)
    plain = shape.fold_tune is None  # the special tiles below assume operand vectors in registers
    if plain and order is None and mr is None and kc is None and _two_panel_1x1(shape, cpu) and \
            _stride_1(sch, name, shape):
        # 7 x 4 vectors over two adjacent weight panels (module note); unroll 1: GCC spills with 2
        shape = replace(shape, nvec=2 * shape.nvec)
        if policy.two_panel_balanced and few_uneven_tasks(shape.n * shape.o // shape.nr, cores):
            # an odd handful of tasks (960->320: 5 over 2 cores): the one-panel default below
            # splits evenly
            shape = replace(shape, nvec=shape.nvec // 2)
        else:
            kc2 = two_panel_kc(shape.nr // 2, cpu)  # the slice of both panels (shape.nr: already two)
            build_conv_nhwc(sch, name, info, shape, "oc", [1, shape.ow], [shape.c // kc2, kc2, 1],
                            cores, epilogue=epilogue)
            return
    if plain and order is None and mr is None and kc is None and policy.split_k > 1:
        from .conv_nhwc_splitk import split_k_1x1, split_k_kc

        if split_k_kc(shape, cpu, policy.split_k):
            split_k_1x1(sch, name, shape, cpu, epilogue, policy.split_k)
            return
    if plain and order is None and mr is None and kc is None and policy.small_n_two_panel and _small_n_1x1(shape, cpu):
        # 64 outputs at 14x14 (module note): 7 x 4 vectors over both panels, rows parallel
        rows = two_panel_rows(shape.ow, shape.nvec, cpu)
        wide = replace(shape, nvec=2 * shape.nvec)
        build_conv_nhwc(sch, name, info, wide, "rows", [shape.ow // rows, rows], None, cores, epilogue=epilogue)
        return
    try:
        params = default_conv_params(shape, cpu, order=order, mr=mr, kc=kc)
    except ScheduleError as err:
        raise ScheduleError(str(err).replace("conv_nhwc_rule:", f"conv_nhwc_rule: block {name!r}:", 1)) from None
    build_conv_nhwc(sch, name, info, shape, params.order, params.x_factors(shape.ow), params.c_factors(shape.c),
                    cores, parallel_fuse=params.parallel_fuse, epilogue=epilogue, prefetch=params.prefetch)


def build_conv_nhwc(sch: Any, name: str, info: BlockInfo, shape: ConvNhwcShape, order: str, x_factors: Any,
                    c_factors: Any, cores: int, *, parallel_fuse: Optional[int] = None, epilogue: bool = True,
                    prefetch: Optional[int] = None) -> Any:
    """`_build_conv_nhwc_loops` (the schedule), then a folded-operand tile's tuning on its task
    loop (``shape.fold_tune``: the C code generator gives the loop's outlined function that gcc
    tuning). Returns the task loop.

    Example:
        >>> # build_conv_nhwc(sch, "conv2d_nhwc", info, shape, "rows", [7, 8], [16, 4], cores=2)
    """
    task = _build_conv_nhwc_loops(sch, name, info, shape, order, x_factors, c_factors, cores,
                                  parallel_fuse=parallel_fuse, epilogue=epilogue, prefetch=prefetch)
    if shape.fold_tune and task is not None:
        sch.annotate(task, COMPILER_TUNE_KEY, shape.fold_tune)
    return task


def _build_conv_nhwc_loops(sch: Any, name: str, info: BlockInfo, shape: ConvNhwcShape, order: str, x_factors: Any,
                           c_factors: Any, cores: int, *, parallel_fuse: Optional[int] = None, epilogue: bool = True,
                           prefetch: Optional[int] = None) -> Any:
    """The parameterized NHWC conv schedule (module note) that `conv_nhwc_rule` (with
    `default_conv_params`) and the tuner's `NhwcConv` rule (with sampled factors) both build.

    ``x_factors``: OW -> (pixel tiles, MR); ``c_factors``: the input-channel loop -> (slices,
    kc/ku, ku) for the sliced reduction, (C/ku, ku) for the unsliced one, or None (no split;
    the (kx, c) fusion of the RGB stem when C < 8). Each is a list of ints / None / sampled
    `ExprRV`s, or a function ``(sch, loop) -> list`` called on the loop it splits (how the tuner
    samples: ``lambda s, l: s.sample_perfect_tile(l, n=2, ...)``). ``order``: ``"rows"``,
    ``"oc"`` or ``"pixels"`` (a sliced reduction treats it as ``"rows"``); ``parallel_fuse``, ``prefetch``: see `ConvNhwcParams`. Returns the task loop (the
    epilogue's).

    Example:
        >>> # shape = analyze_conv_nhwc(sch, "conv2d_nhwc", info, 16)
        >>> # build_conv_nhwc(sch, "conv2d_nhwc", info, shape, "rows", [7, 8], [16, 4], cores=2)
    """
    if order not in ("oc", "rows", "pixels"):
        raise ValueError(f"build_conv_nhwc: order must be 'rows', 'oc' or 'pixels', got {order!r}")
    lanes, nvec = shape.lanes, shape.nvec
    # Step 1. Tiles: ow -> (xo, xi = MR), o -> (oo, on = nvec, ol = lanes).
    blk = sch.get_block(name)
    loops = sch.get_loops(blk)
    ln, ly, lx, lo = loops[:4]
    reduce = [loops[k] for k in info.reduce if k != shape.rc_pos] + [loops[shape.rc_pos]]
    xo, xi = sch.split(lx, _factors(sch, lx, x_factors))
    oo, on, ol = sch.split(lo, [None, nvec, lanes])
    cf = _factors(sch, reduce[-1], c_factors) if c_factors is not None else None
    if cf is not None and len(cf) == 3:
        return _blocked(sch, order, blk, (ln, ly, oo, xo, xi, on, ol), [shape.n, shape.oh, shape.o // shape.nr],
                        reduce, cf, lanes, cores, epilogue, parallel_fuse, prefetch)
    # Step 2. The reduction: (kx, c) fused for the stem, or c -> (rco, rcu unrolled).
    if cf is None and shape.c < 8 and len(reduce) >= 2:
        # A few input channels (the RGB stem): (kx, c) as one loop, contiguous in the input row
        # and in the weight panel. Separately, GCC unrolls the 3-step c loop and carries input
        # values across kx iterations in registers (predictive commoning), spilling the tile.
        sch.reorder(*reduce)  # (ky, kx, c) adjacent whatever the compute's axis order
        reduce = reduce[:-2] + [sch.fuse(reduce[-2], reduce[-1])]
    elif cf is not None:
        rco, rcu = sch.split(reduce[-1], cf)
        reduce = reduce[:-1] + [rco, rcu]
        sch.unroll(rcu)
    # Step 3. Loop order, micro-kernel loop kinds, the parallel loop.
    if order == "oc":
        sch.reorder(ln, oo, ly, xo, *reduce, xi, on, ol)
        outer, outer_ext = [ln, oo, ly], [shape.n, shape.o // shape.nr, shape.oh]
    elif order == "pixels":
        sch.reorder(ln, ly, xo, oo, *reduce, xi, on, ol)
        outer, outer_ext = [ln, ly, xo], [shape.n, shape.oh, _loop_extent(sch, xo)]
    else:
        sch.reorder(ln, ly, oo, xo, *reduce, xi, on, ol)
        outer, outer_ext = [ln, ly, oo], [shape.n, shape.oh, shape.o // shape.nr]
    sch.unroll(xi)
    sch.unroll(on)
    sch.vectorize(ol)
    if order == "pixels":
        # the tile loop is the oc block: _register_tile below the pixel tile
        task = _parallel(sch, outer, outer_ext, cores, parallel_fuse)
        _register_tile(sch, blk, oo, len(reduce), 3, lanes, epilogue)
        return task
    if order == "oc":
        # (n, oc block) parallel, the rows serial inside: each task keeps its panel hot. (Fusing
        # the rows too would give finer tasks, but then no loop variable alone separates the
        # tasks' tiles and CompactBufferAllocation keeps the accumulator tile a shared
        # full-size workspace in memory instead of a per-tile local array.)
        task = fuse_parallel_loops(sch, [ln, oo])
    else:
        task = _parallel(sch, outer, outer_ext, cores, parallel_fuse)
    # Step 4. Accumulators in registers, the epilogue fused into their write-back.
    _register_tile(sch, blk, xo, len(reduce), 3, lanes, epilogue)
    return task


def _factors(sch: Any, loop: Any, factors: Any) -> list:
    return list(factors(sch, loop)) if callable(factors) else list(factors)


def _parallel(sch: Any, loops: list, extents: list, cores: int, fuse: Optional[int]) -> Any:
    """The parallel loop: `_fuse_parallel`'s choice, or the first ``fuse`` loops fused."""
    if fuse is None:
        return _fuse_parallel(sch, loops, extents, cores)
    if not 1 <= fuse <= len(loops):
        raise ValueError(f"build_conv_nhwc: parallel_fuse must be 1..{len(loops)}, got {fuse}")
    return fuse_parallel_loops(sch, loops[:fuse])


#: Share of L1d one weight-panel slice of the blocked reduction may fill (the rest: input pixels,
#: the output tile); a whole panel larger than L1d is sliced.
L1_SLICE_SHARE = 0.75
#: Channel steps unrolled in the micro-kernel. It stands for the front end, not the register file:
#: each loop iteration adds its counter, compare and branch (~3 µops) to a step's FMAs and loads,
#: and 4 steps keep that overhead under ~10% of a 4-wide issue on every CPU of the table.
KU = 4


def wide_tile_rows(ow: int, nvec: int, cpu: CpuModel) -> int:
    """The height of the wide register tile of a row of ``ow`` pixels (`default_conv_params`): the
    tallest divisor of ``ow`` whose ``rows x nvec`` tile still fits ``cpu``'s whole register file
    (`CpuModel.fits_registers`: every register but the step's operands and broadcast, beyond the
    `CpuModel.accumulator_registers` of an ordinary tile) and is taller than the ordinary tile
    (`rules.max_tile_rows`); 0 when there is none. Each weight vector then feeds ``rows`` FMAs per
    load instead of ``max_tile_rows``: 14 x 2 vectors in 32 registers at OW = 14, 28, 56, 112;
    nothing in 16 registers at 2 vectors.

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> [wide_tile_rows(ow, 2, named_cpu("sapphirerapids")) for ow in (7, 14, 28, 56, 112)]
        [0, 14, 14, 14, 14]
        >>> wide_tile_rows(56, 2, named_cpu("haswell")), wide_tile_rows(60, 2, named_cpu("znver4"))
        (0, 15)
    """
    for rows in range(ow, max_tile_rows(nvec, cpu), -1):
        if ow % rows == 0 and cpu.fits_registers(rows, nvec):
            return rows
    return 0


def two_panel_rows(ow: int, nvec: int, cpu: CpuModel) -> int:
    """The height of a register tile over two adjacent ``nvec``-vector weight panels
    (``rows x 2·nvec`` accumulators; `conv_nhwc_rule`'s two-panel tiles): the tallest divisor of
    ``ow`` whose tile fits ``cpu``'s register file with enough independent accumulators to keep
    the FMA pipes busy (`CpuModel.min_accumulators`); 0 when there is none. With 32 registers and
    2-vector panels that is 7 rows (28 accumulators + 4 operand vectors) at OW = 7 and 14.

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> two_panel_rows(7, 2, named_cpu("sapphirerapids")), two_panel_rows(14, 2, named_cpu("sapphirerapids"))
        (7, 7)
        >>> two_panel_rows(7, 2, named_cpu("haswell")), two_panel_rows(12, 1, named_cpu("haswell"))
        (0, 6)
    """
    for rows in range(ow, 0, -1):
        if ow % rows == 0 and cpu.fits_registers(rows, 2 * nvec) and rows * 2 * nvec >= cpu.min_accumulators:
            return rows
    return 0


def two_panel_kc(nr: int, cpu: CpuModel) -> int:
    """Input channels per slice of the two-panel 1x1 tile (`conv_nhwc_rule`): the largest power of
    two whose slice of both panels (``kc x 2·nr`` floats) fills at most half of ``cpu``'s L1d — the
    other half holds the tile's input pixels and the next slice coming in. 64 for 32-float panels
    in 32 to 48 KiB L1d (16 KiB of weights).

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> two_panel_kc(32, named_cpu("sapphirerapids")), two_panel_kc(32, named_cpu("znver4"))
        (64, 64)
        >>> two_panel_kc(16, named_cpu("haswell"))
        128
    """
    kc = 8
    while 2 * kc * 2 * nr * 4 <= cpu.l1d_bytes // 2:
        kc *= 2
    return kc


@dataclass(frozen=True)
class ConvNhwcPolicy:
    """Which special tiles and task splits `conv_nhwc_rule` and `nhwc_window_rule` use where they
    apply (all on by default; their effect: BENCHMARKS.md, "conv_nhwc choices"):

    * ``weight_prefetch``: sliced 1x1 convs in "oc" order prefetch the next slice's weights at each
      slice, with this ``__builtin_prefetch`` locality (None: no prefetch) — inside a model the
      weights come cold and the slices are 4 KB pieces 32 KB apart, which hardware prefetchers skip;
    * ``two_panel_balanced``: two-panel 1x1 convs whose (n, oc block pair) tasks are too few and
      uneven over the cores (5 tasks on 2) use one-panel tiles instead (twice the tasks, even split);
    * ``window_row_tasks``: window reductions with 1 to 4 output rows per core parallelize over
      the rows alone — fusing (row, channel block) leaves no loop variable that alone separates the
      tasks' tiles, and CompactBufferAllocation then keeps the accumulator tile a shared workspace
      in memory instead of a per-row local array;
    * ``small_n_two_panel``: 64-output 14x14 1x1 convs (one task per core in "oc" order) use one
      7 x 4-vector tile over both panels with the rows as tasks;
    * ``split_k``: sliced 1x1 convs whose row is one register tile (OW = 7) with an odd handful of oc blocks split K in this many
      parts by rfactor (`conv_nhwc_splitk`; 0 or 1: off);
    * ``order``: the loop order every conv is forced to (``"rows"``, ``"oc"``, ``"pixels"``; the
      special tiles above, which choose their own, are then off); None (default): the rule's choice.

    A build takes another policy through its pass context (how benchmarks/experiments/small_map_tasks.py
    compares them)::

        with PassContext(config={POLICY_CONFIG: ConvNhwcPolicy(split_k=0)}):
            package = ingot.compile(model)

    Example:
        >>> current_policy() == ConvNhwcPolicy()
        True
    """
    weight_prefetch: Optional[int] = 3
    two_panel_balanced: bool = True
    window_row_tasks: bool = True
    small_n_two_panel: bool = True
    split_k: int = 2
    order: Optional[str] = None


#: The pass-context config key of the `ConvNhwcPolicy` the rules follow.
POLICY_CONFIG = "schedule.conv_nhwc"
register_pass_config(POLICY_CONFIG, ConvNhwcPolicy,
                     "ConvNhwcPolicy: the special tiles and task splits of the NHWC conv / window rules")


def current_policy() -> ConvNhwcPolicy:
    """The `ConvNhwcPolicy` of the current pass context (the default one when unset).

    Example:
        >>> current_policy().split_k
        2
    """
    return PassContext.current().get_config(POLICY_CONFIG, None) or ConvNhwcPolicy()


#: At most this many input channels per slice: a 1x1 slice of 128 x 32 floats is 16 KiB, half of the
#: smallest L1d in the CPU table, so the input pixels of a tile stay in L1 beside it.
MAX_KC = 128


def choose_kc(taps: int, channels: int, nr: int, cpu: CpuModel) -> int:
    """Input channels per slice of the blocked reduction: 0 (no slicing) when a whole weight
    panel (``taps * channels * nr`` floats) fits ``cpu``'s L1d, else the largest divisor of
    ``channels`` (a multiple of 8, at most `MAX_KC`) whose slice fits `L1_SLICE_SHARE` of it.

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> spr = named_cpu("sapphirerapids")
        >>> choose_kc(1, 256, 32, spr), choose_kc(9, 64, 32, spr), choose_kc(9, 512, 32, spr), choose_kc(1, 2048, 32, spr)
        (0, 32, 32, 128)
        >>> choose_kc(9, 32, 16, named_cpu("znver3")), choose_kc(9, 64, 16, named_cpu("znver3"))
        (0, 32)
    """
    if taps * channels * nr * 4 <= cpu.l1d_bytes:
        return 0
    best = 0
    for kc in range(8, min(channels, MAX_KC) + 1, 8):
        if channels % kc == 0 and taps * kc * nr * 4 <= cpu.l1d_bytes * L1_SLICE_SHARE:
            best = kc
    return best


def _input_channel_axis(block: Any, info: BlockInfo, ivars: list) -> int:
    """Iteration-variable position of the reduce axis that is the input's last index."""
    for ld in collect_loads(block.body.value):
        last = ld.indices[-1] if ld.indices else None
        if isinstance(last, Var):
            for k in info.reduce:
                if ivars[k] is last and ld.buffer is not block.body.buffer:
                    dims_o = [ix for ix in ld.indices if ivars[3] in collect_vars(ix)]
                    if not dims_o:
                        return k
    raise ScheduleError(f"conv_nhwc_rule: block {block.name_hint!r}: no reduce axis is the input's contiguous "
                        "channel index")


def _blocked(sch: Any, order: str, blk: Any, tile_loops: tuple, outer_ext: list, reduce: list, cf: list,
             lanes: int, cores: int, epilogue: bool, parallel_fuse: Optional[int] = None,
             prefetch: Optional[int] = None) -> Any:
    """The reduction sliced into channel slices (``cf``: slices, kc/ku, ku; as `blocked_gemm_rule`'s
    k slices): for each task (``"oc"``: an (n, oc block); ``"rows"``: an output row and oc block)
    and channel slice, every pixel tile of the task accumulates that slice into the output block,
    so the KH·KW·kc·NR weight slice stays in L1 instead of the whole panel streaming from L2 per
    tile. The accumulators live in the output across slices (GCC keeps the tile in zmm over a
    slice); the epilogue runs once per task over its output block, after the last slice."""
    from .blocked import _vectorize_init
    from .rules import _fuse_epilogue

    ln, ly, oo, xo, xi, on, ol = tile_loops
    # Step 1. rc -> (rco, rci, rcu); the slices outside the pixel tiles of a task.
    rco, rci, rcu = sch.split(reduce[-1], cf)
    if order == "oc":
        sch.reorder(ln, oo, rco, ly, xo, *reduce[:-1], rci, rcu, xi, on, ol)
    else:
        sch.reorder(ln, ly, oo, rco, xo, *reduce[:-1], rci, rcu, xi, on, ol)
    if not (isinstance(cf[2], int) and cf[2] == 1):
        sch.unroll(rcu)
    block = sch.get(blk)
    weight, panel = _channel_weight(block, block.iter_vars[3].var, block.name_hint)
    if prefetch is not None and (panel is None or panel == _extent_product(sch, on, ol)):
        # Each slice first prefetches the next slice's weights: KH*KW pieces 4 KB apart
        # (32 KB strides) that hardware prefetchers do not follow. A loop annotation lowered by
        # InjectSoftwarePrefetch (a schedule cannot insert statements; the pass sees the region).
        # Not when the tile covers part of a panel (16 registers): its box is not one panel.
        sch.annotate(rco, "software_prefetch", [weight.name, int(prefetch)])
    sch.unroll(xi)
    sch.unroll(on)
    sch.vectorize(ol)
    if order == "oc":
        task = fuse_parallel_loops(sch, [ln, oo])
    elif parallel_fuse == 3:
        # (n, oh, oc block) as one parallel loop: the task is one row's oc block (its slices
        # inside), e.g. 7 rows x 5 blocks = 35 tasks instead of 7 rows split 4/3 over 2 cores
        task = fuse_parallel_loops(sch, [ln, ly, oo])
    else:
        _parallel(sch, [ln, ly], outer_ext[:2], cores, parallel_fuse)
        task = oo
    # Step 2. Zero the task's output block before the slices.
    init = sch.decompose_reduction(blk, rco)
    _vectorize_init(sch, init, lanes)
    # Step 3. The epilogue once per task, after its slices, inlined into one pass.
    if epilogue:
        _fuse_epilogue(sch, blk, task, lanes)
        _inline_chain(sch, blk, lanes)
    return task


def _extent_product(sch: Any, *loops: Any) -> int:
    """The product of the constant extents of ``loops`` (0 when one is not constant)."""
    total = 1
    for lp in loops:
        total *= _loop_extent(sch, lp) or 0
    return total


def _inline_chain(sch: Any, producer: Any, vl: int, *, include_producer: bool = False,
                  unroll_under: Any = None) -> None:
    """Inline every elementwise consumer of ``producer`` (transitively; ``producer`` itself too when
    ``include_producer``) into the last one, then vectorize what is left serial and, with
    ``unroll_under``, unroll its register-tile loops below that loop (see `_register_tile`).
    A block that refuses (one writing a function output) stays."""
    chain, frontier = [sch.get(producer).name_hint] if include_producer else [], [producer]
    while frontier:
        for cons in sch.get_consumers(frontier.pop()):
            chain.append(sch.get(cons).name_hint)
            frontier.append(cons)
    for nm in chain:
        try:
            # compute_inline checks every precondition before it changes anything
            sch.compute_inline(sch.get_block(nm))
        except ScheduleError:
            continue
    for nm in chain:
        try:
            b = sch.get_block(nm)
        except ScheduleError:
            continue  # inlined
        if sch.get(sch.get_loops(b)[-1]).kind == ForKind.SERIAL:
            _vectorize_tail(sch, b, vl)
        if unroll_under is not None:
            _unroll_tile_loops(sch, b, unroll_under)


def _register_tile(sch: Any, blk: Any, tile_loop: Any, n_reduce: int, n_tile: int, vl: int, epilogue: bool) -> None:
    """Accumulators in a local tile (cache_write), the write-back and the elementwise epilogue
    under ``tile_loop``, then inlined into one block that reads the tile and writes the output.
    The block's loops end with ``n_reduce`` reduce loops and ``n_tile`` register-tile loops."""
    from .rules import _fuse_epilogue

    # Step 1. cache_write: the update accumulates into a local buffer (registers after codegen).
    write_back = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(write_back, tile_loop)
    loops = sch.get_loops(blk)
    first_reduce = loops[len(loops) - n_tile - n_reduce]
    init = sch.decompose_reduction(blk, first_reduce)
    if sch.get(sch.get_loops(init)[-1]).kind == ForKind.SERIAL:
        _vectorize_tail(sch, init, vl)
    # Step 2. The epilogue (bias, residual, relu/clip) under the same tile loop.
    if not epilogue:
        _vectorize_tail(sch, write_back, vl)
        return
    _fuse_epilogue(sch, write_back, tile_loop, vl)
    # Step 3. One pass over the tile: inline the write-back and every intermediate epilogue block
    # into the last one (a block writing a function output refuses: it stays and is vectorized).
    _inline_chain(sch, write_back, vl, include_producer=True, unroll_under=tile_loop)


def _unroll_tile_loops(sch: Any, blk: Any, tile_loop: Any) -> None:
    """Unroll the serial loops between ``tile_loop`` and the vector loop of a block reading the
    local tile: with constant indices GCC keeps the tile in registers (no store/reload)."""
    loops = sch.get_loops(blk)
    tile_stmt = sch.get(tile_loop)
    below = False
    for lp in loops:
        if below and sch.get(lp).kind == ForKind.SERIAL and (_loop_extent(sch, lp) or 99) <= 32:
            sch.unroll(lp)
        below = below or sch.get(lp) is tile_stmt


def __getattr__(name: str) -> Any:
    # Compatibility: the window rule moved to `conv_window` (imported here on first use: it
    # builds on this module, which cannot import it at load time).
    if name in ("nhwc_window_rule", "window_accumulators"):
        from . import conv_window

        return getattr(conv_window, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
