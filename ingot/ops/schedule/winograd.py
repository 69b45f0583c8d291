"""The default schedule of a Winograd conv kernel (`ingot.ops.winograd.conv2d_nhwc_winograd`).

Note: the kernel's stages carry the block annotation ``winograd`` (input / gemm / output / crop),
so this rule finds them without guessing from names. Two schedules:

**Tile rows** (tried first; when a row of the tile grid has >= `MIN_ROW_TILES` tiles: F(4, 3) and
F(2, 3) at 56×56). The last block (crop + bias/residual/relu inlined into it) is split into rows of
m output rows, one row of tiles each, parallel; every stage is `compute_at` under that loop, so one
row's V (α² × row tiles × C), M and output tiles are computed, used and dropped while in L2
(~150 KB each at 56×56×64, against 1.8-3.2 MB whole-image buffers that also had to be
allocated — page-faulted in — on every call: `CompactBufferAllocation` now makes them per-row
allocations). Inside a row: the input transform per (tile, channel vector) from a padded α×α tile
on the stack, the α² GEMMs as R×P register tiles (R <= 8 tiles, one P-wide weight panel,
accumulated over C, written back per tile), the output transform, the epilogue. Why only wide rows:
each row's GEMMs stream all α² weight panels for that row's tiles only; with 7 tiles per row
(F(4, 3) at 28×28, F(2, 3) at 14×14) the weights are reused 7 times instead of 49 and the whole-image
schedule below wins (measured in `benchmarks/winograd.py`).

**Stage by stage** (otherwise), per stage:

* **input** ``V[ξ, t, c]``: channels split into vectors; for each (tile, channel vector), in
  parallel, the padded α×α×vector input tile is computed into a small local buffer
  (`compute_at` of the padding stage: bounds checks once per tile element, and the tile stays in
  registers/L1), then the transform's two passes (below) or, in the one-pass form, the α²
  positions ξ unrolled — the unrolled copies fold their ``Select`` into straight-line sums
  (`ingot.ops.winograd` module note) and the shared inner sums are common subexpressions for the
  C compiler.
* **gemm** ``M[ξ, t, o]``: the ordinary GEMM rules (`RULES["gemm"]` in `ingot.ops.schedule.default`):
  α² independent GEMMs, ξ is a batch axis.
* **output** ``Y_tile[t, ij, o]``: the same as the input transform, over output-channel vectors,
  with the m² output positions unrolled.
* **crop** and the fused epilogue (bias, residual add, relu): the crop is a gather; it and every
  elementwise block after it but the last are inlined into one pass (parallel, vectorized).

**Separable transforms.** Each transform is two 1-D passes (`ingot.ops.winograd` module note).
Where the one-pass form would keep more partial sums live than the CPU has vector registers
(`separable_transforms`: α² > ``CpuModel.vector_registers``: F(4, 3) on AVX2 and AVX-512), the first pass is computed per (tile, channel vector) into a local α×α (α×m) tile, one
row after the other, and the second walks the tile column by column (`_two_pass`): α values in,
α out at a time, no spills; the tile itself is written and read once (through the stack or L1).
Elsewhere the first pass is inlined into the second and the schedule is the one-pass form.
``WinogradSchedulePolicy.separable`` forces either (benchmarks/winograd.py ``--transforms``).

In both, V and M are α² planes of ``tiles × channels``; when a plane is a multiple of 4 KiB
(F(2, 3) at 56×56, 64 channels: 784·64·4 B = 49 × 4 KiB; a 16-tile row of 64 channels) the α² stores
or loads of one tile map to one L1 set and trip 4K aliasing, so both get ``storage_align`` on the
plane axis (stride ≡ 64 B mod 4 KiB: consecutive planes on consecutive cache sets).

**Run-time batch.** The per-image kernel (`ingot.ops.winograd`, symbolic N) has a leading image axis
in every stage; both schedules keep its loop serial outside the parallel one (`rules.runtime_outer_loops`)
and schedule what is below it as the batch-1 kernel: the tile-row loop is the rows of one image, and
every stage moved under it is one image's.

Each step runs under ``sch.attempt()`` in `schedule_blocks`; a step that a primitive refuses leaves
that stage to the generic rules (correct, slower).

Example:
    >>> # sch = Schedule(te.create_prim_func([x, u, conv2d_nhwc_winograd(x, u)]))
    >>> # winograd_rule(sch, names, Target("llvm -num-cores=2").cpu, RULES["gemm"])  -> [...]
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ingot.cpu_model import CpuModel
from ingot.ir.transform import PassContext, register_pass_config
from ingot.tir.schedule.error import ScheduleError

from ..winograd import STAGE_KEY, TILE_GRID_KEY
from .analysis import analyze_block
from .conv_nhwc import conv_nhwc_rule
from .rules import _extent, _fuse_parallel, _vectorize_tail, parallel_vectorize, runtime_outer_loops

__all__ = ["winograd_stages", "winograd_rule", "separable_transforms", "WinogradSchedulePolicy"]


def winograd_stages(sch: Any, names: "list[str]") -> "dict[str, str]":
    """``{stage: block name}`` of the Winograd blocks among ``names`` (empty when there are none).

    Example:
        >>> # winograd_stages(sch, ["pad_temp", "winograd_input", ...])["input"] -> 'winograd_input'
    """
    stages = {}
    for name in names:
        stage = sch.get(sch.get_block(name)).annotations.get(STAGE_KEY)
        if stage is not None:
            stages[str(getattr(stage, "value", stage))] = name
    return stages


def _transform(sch: Any, name: str, position_axis: int, channel_axis: int, lanes: int, cores: int,
               producer: Optional[str] = None, rows: Optional[str] = None) -> None:
    """A transform stage: parallel over (tile, channel vector), positions unrolled, lanes vectorized;
    ``producer`` (the padding stage) is computed per (tile, channel vector) into a local tile, and
    so is ``rows`` (the first pass of the separable form, `_two_pass`)."""
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    # A run-time batch (`ingot.ops.winograd`, per image): the image loop stays serial outside.
    lead, loops = loops[:-3], loops[-3:]
    if len(loops) != 3 or runtime_outer_loops(sch, lead + loops) != len(lead):
        raise ScheduleError(f"winograd stage {name!r}: expected 3 loops (position, tile, channel) below the "
                            f"run-time batch loop, got {len(lead) + len(loops)}")
    channels = _extent(sch, loops[channel_axis])
    if channels is None or channels % lanes:
        raise ScheduleError(f"winograd stage {name!r}: {channels} channels are not a multiple of {lanes} lanes")
    tile_axis = 3 - position_axis - channel_axis
    co, ci = sch.split(loops[channel_axis], [None, lanes])
    grid = sch.get(block).annotations.get(TILE_GRID_KEY)
    if producer is not None and grid is not None:
        # (n, th, tw) loops: the region of the padded input one tile reads is then an α×α window.
        grid = [int(getattr(g, "value", g)) for g in grid]
        tile_loops = sch.split(loops[tile_axis], grid)
    else:
        tile_loops, grid = [loops[tile_axis]], [_extent(sch, loops[tile_axis])]
    sch.reorder(*tile_loops, co, loops[position_axis], ci)
    if rows is not None:
        _two_pass(sch, rows, co, loops[position_axis], len(lead) + len(tile_loops) + 1)
    else:
        sch.unroll(loops[position_axis])
    if producer is not None:
        sch.compute_at(sch.get_block(producer), co)
        sch.vectorize(sch.get_loops(sch.get_block(producer))[-1])
    _fuse_parallel(sch, [*lead, *tile_loops, co], [None] * len(lead) + [*grid, channels // lanes], cores)
    sch.vectorize(ci)


def _two_pass(sch: Any, rows: str, co: Any, position: Any, outer: int) -> None:
    """The separable form of a transform under its (tile, channel vector) loop ``co`` (``outer``
    loops deep): the first pass ``rows`` (``X[a, j]``: α rows of α or m values) computed there
    into a local tile, a loop over the rows with each row's outputs unrolled (α inputs, α outputs
    live); then the transform's own positions ``position`` (i·columns + j) split into a loop over
    the columns with each column's outputs unrolled, so a column's α values of X are loaded once,
    used and dropped. Only the unrolled index must be a constant for the ``Select`` of a pass to
    fold; the C compiler may still unroll the two α-iteration loops."""
    block = sch.get_block(rows)
    sch.compute_at(block, co)
    own = sch.get_loops(block)[outer:]  # (row, column, channel): compute_at drops the one-tile loop
    if len(own) not in (3, 4):
        raise ScheduleError(f"winograd stage {rows!r}: expected the loops (row, column, [tile,] channel) "
                            f"under the tile's channel vector, got {len(own)}")
    columns = _extent(sch, own[1])
    for loop in own[1:-1]:
        sch.unroll(loop)
    sch.vectorize(own[-1])
    i, j = sch.split(position, [None, columns])
    sch.reorder(j, i)
    sch.unroll(i)


#: Plane alignment (bytes): planes' starts step through the 4 KiB page one cache line apart.
_PAGE_BYTES, _LINE_BYTES = 4096, 64


def _align_planes(sch: Any, block_name: str, buffer_name: str) -> None:
    """``storage_align`` of the α² plane axis (axis 0) of ``buffer_name``, written by ``block_name``."""
    block = sch.get_block(block_name)
    writes = sch.get(block).writes
    index = next((k for k, w in enumerate(writes) if w.buffer.name == buffer_name), None)
    if index is None:
        raise ScheduleError(f"winograd planes: block {block_name!r} does not write {buffer_name!r}")
    item = max(1, writes[index].buffer.dtype.bits // 8)
    axis = len(writes[index].buffer.shape) - 3  # (plane, tiles, channels), after the image axis if any
    sch.storage_align(block, index, axis=axis, factor=_PAGE_BYTES // item, offset=_LINE_BYTES // item)


def _gemm_reader(sch: Any, stages: "dict[str, str]") -> Any:
    """The block that reads the GEMM result M: the separable form's first output pass, else the
    output transform."""
    return sch.get(sch.get_block(stages.get("output_rows", stages["output"])))


def _gemm_writer(sch: Any, output: str, gemm_buffer: str) -> str:
    """The block that writes the GEMM result read by the output stage (the GEMM rule may have
    moved the accumulation into a local cache block and left a write-back block)."""
    for producer in sch.get_producers(sch.get_block(output)):
        node = sch.get(producer)
        if any(w.buffer.name == gemm_buffer for w in node.writes):
            return node.name_hint
    raise ScheduleError(f"winograd planes: no producer of {output!r} writes {gemm_buffer!r}")


def _takes_epilogue(rule: Callable) -> bool:
    try:
        params = inspect.signature(rule).parameters
    except (TypeError, ValueError):  # a builtin or C callable: assume the plain rule signature
        return False
    return "epilogue" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _epilogue(sch: Any, crop: str, blocks_after: "list[str]", lanes: int, cores: int) -> None:
    """Inline the crop and the elementwise chain after it into the last block; schedule that one."""
    chain = [crop] + blocks_after
    for name in chain[:-1]:
        sch.compute_inline(sch.get_block(name))
    parallel_vectorize(sch, chain[-1], lanes, cores)


# -- tile-row blocks ------------------------------------------------------------------------------
#: Register tile of the blocked GEMM: at most this many tiles (rows) per micro-kernel.
_MAX_ROWS = 8
#: Tile rows narrower than this run stage by stage: each row's GEMM streams all α² weight panels
#: for its tiles only, so a 7-tile row (F(4, 3) at 28×28, F(2, 3) at 14×14) reuses each weight 7
#: times against 49 for the whole image, and loses (benchmarks/winograd.py --layers, BENCHMARKS.md).
MIN_ROW_TILES = 14
#: Tile rows per parallel iteration: more rows grow the per-row V/M beyond L2 (slower in
#: benchmarks/winograd.py --layers), so wide rows only, one at a time.
_ROWS_PER_BLOCK = 1


@dataclass(frozen=True)
class WinogradSchedulePolicy:
    """When `winograd_rule` schedules the whole kernel per row of tiles: rows of at least
    ``min_row_tiles`` tiles (default `MIN_ROW_TILES`; 1: always, a huge value: never, stage by stage);
    and whether the transforms run as two 1-D passes: ``separable`` True / False, or None (default:
    where the one-pass form spills, `separable_transforms`).

    A build takes another policy through its pass context (how benchmarks/winograd.py compares
    the two schedules; the kernel cache is bypassed under a pass config)::

        with PassContext(config={WINOGRAD_POLICY_CONFIG: WinogradSchedulePolicy(min_row_tiles=1)}):
            package = ingot.compile(model)

    Example:
        >>> current_winograd_policy().min_row_tiles == MIN_ROW_TILES
        True
    """
    min_row_tiles: int = MIN_ROW_TILES
    separable: Optional[bool] = None


#: The pass-context config key of the `WinogradSchedulePolicy` the rule follows.
WINOGRAD_POLICY_CONFIG = "schedule.winograd"
register_pass_config(WINOGRAD_POLICY_CONFIG, WinogradSchedulePolicy,
                     "WinogradSchedulePolicy: from how many tiles per row winograd_rule schedules tile rows, "
                     "and whether the transforms run as two 1-D passes (separable)")


def current_winograd_policy() -> WinogradSchedulePolicy:
    """The `WinogradSchedulePolicy` of the current pass context (the default one when unset).

    Example:
        >>> with PassContext(config={WINOGRAD_POLICY_CONFIG: WinogradSchedulePolicy(min_row_tiles=1)}):
        ...     current_winograd_policy().min_row_tiles
        1
    """
    return PassContext.current().get_config(WINOGRAD_POLICY_CONFIG, None) or WinogradSchedulePolicy()


def _rows(tiles: int) -> int:
    """The largest divisor of ``tiles`` up to `_MAX_ROWS` (7 for ResNet-50's 7/14/28-tile rows)."""
    return max(r for r in range(1, min(tiles, _MAX_ROWS) + 1) if tiles % r == 0)


def _inner_transform(sch: Any, name: str, position_axis: int, channel_axis: int, lanes: int, depth: int,
                     producer: Optional[str] = None, rows: Optional[str] = None) -> None:
    """A transform stage moved under the tile-row loop: per (tile, channel vector) the α×α input
    tile (``producer``) and the first pass (``rows``, `_two_pass`) into local buffers, positions
    unrolled, lanes vectorized; ``depth`` loops (the tile-row loop, the image loop above it) enclose it."""
    block = sch.get_block(name)
    loops = sch.get_loops(block)[depth:]
    if len(loops) != 3:
        raise ScheduleError(f"winograd stage {name!r}: expected 3 loops under the tile-row loop, got {len(loops)}")
    channels = _extent(sch, loops[channel_axis])
    if channels is None or channels % lanes:
        raise ScheduleError(f"winograd stage {name!r}: {channels} channels are not a multiple of {lanes} lanes")
    tile = loops[3 - position_axis - channel_axis]
    co, ci = sch.split(loops[channel_axis], [None, lanes])
    sch.reorder(tile, co, loops[position_axis], ci)
    if rows is not None:
        _two_pass(sch, rows, co, loops[position_axis], depth + 2)
    else:
        sch.unroll(loops[position_axis])
    if producer is not None:
        sch.compute_at(sch.get_block(producer), co)
        sch.vectorize(sch.get_loops(sch.get_block(producer))[-1])
    sch.vectorize(ci)


def _inner_gemm(sch: Any, name: str, write_back: Any, lanes: int, depth: int) -> None:
    """The α² GEMMs of one tile row: ``R × P`` register tiles (R tiles, one P-wide weight panel)
    accumulated over the input channels in the local cache, ``write_back`` (its copy to M) per tile."""
    block = sch.get_block(name)
    loops = sch.get_loops(block)[depth:]
    if len(loops) != 4:
        raise ScheduleError(f"winograd stage {name!r}: expected 4 loops (position, tile, out channel, "
                            f"channel) under the tile-row loop, got {len(loops)}")
    xi, t, o, rc = loops
    tiles, outs = _extent(sch, t), _extent(sch, o)
    panel = int(sch.get(block).reads[1].buffer.shape[-1])
    if tiles is None or outs is None or outs % panel or panel % lanes:
        raise ScheduleError(f"winograd stage {name!r}: {tiles} tiles / {outs} channels do not tile by "
                            f"{panel}-wide panels of {lanes} lanes")
    t0, t1 = sch.split(t, [None, _rows(tiles)])
    o0, o1, o2 = sch.split(o, [None, panel // lanes, lanes])
    sch.reorder(xi, t0, o0, rc, t1, o1, o2)
    sch.unroll(t1)
    sch.unroll(o1)
    sch.vectorize(o2)
    sch.reverse_compute_at(write_back, o0)
    _vectorize_tail(sch, write_back, lanes)
    init = sch.decompose_reduction(block, rc)
    _vectorize_tail(sch, init, lanes)


def _blocked(sch: Any, stages: "dict[str, str]", pad: Optional[str], after: "list[str]", lanes: int,
             cores: int) -> None:
    """The whole kernel per row of tiles (module note, "tile rows")."""
    # Step 1. The crop and the elementwise chain inlined into the last block; its rows split by m
    # (one row of tiles per iteration) and made parallel.
    chain = [stages["crop"]] + after
    for name in chain[:-1]:
        sch.compute_inline(sch.get_block(name))
    last = sch.get_block(chain[-1])
    loops = sch.get_loops(last)
    if len(loops) != 4:
        raise ScheduleError(f"winograd epilogue {chain[-1]!r}: expected NHWC loops, got {len(loops)}")
    grid = sch.get(sch.get_block(stages["input"])).annotations.get(TILE_GRID_KEY)
    if grid is None:
        raise ScheduleError(f"winograd stage {stages['input']!r} has no {TILE_GRID_KEY!r} annotation")
    grid = [int(getattr(g, "value", g)) for g in grid]
    rows = max(1, _ROWS_PER_BLOCK)
    min_row_tiles = current_winograd_policy().min_row_tiles
    if grid[2] * rows < min_row_tiles:
        raise ScheduleError(f"winograd tile rows: {grid[2]} tiles per row < {min_row_tiles}; stage by stage")
    m = -(-(_extent(sch, loops[1]) or 0) // grid[1]) or 1
    n, y, x, o = loops
    ty, yi = sch.split(y, [None, m * rows])
    # A run-time batch stays a serial loop over images outside the parallel rows (per-image stages).
    row = ty if runtime_outer_loops(sch, [n, ty]) else sch.fuse(n, ty)
    depth = 2 if row is ty else 1
    sch.parallel(row)
    _vectorize_tail(sch, last, lanes)
    # Step 2. The stages of one tile row under it, consumers first (compute_at needs the consumer's
    # loops in place): output transform, GEMM (its local accumulator cache made first, at the top
    # level, so that its write-back moves along), input transform (+ its padded tiles).
    # The separable form's first output pass is placed with the output transform, before M's
    # write-back moves under the row (compute_at needs every consumer of a block in place).
    gemm_buffer = _gemm_reader(sch, stages).reads[0].buffer.name
    write_back = sch.cache_write(sch.get_block(stages["gemm"]), 0, "local")
    sch.compute_at(sch.get_block(stages["output"]), row)
    _inner_transform(sch, stages["output"], 1, 2, lanes, depth, rows=stages.get("output_rows"))
    for block in (write_back, sch.get_block(stages["gemm"]), sch.get_block(stages["input"])):
        sch.compute_at(block, row)
    _inner_gemm(sch, stages["gemm"], write_back, lanes, depth)
    write_back = sch.get(write_back).name_hint
    _inner_transform(sch, stages["input"], 0, 2, lanes, depth, producer=pad, rows=stages.get("input_rows"))
    # Step 3. Pad the planes of the per-row V and M (4K aliasing: their planes are tiles × channels).
    _align_planes(sch, stages["input"], sch.get(sch.get_block(stages["input"])).writes[0].buffer.name)
    _align_planes(sch, write_back, gemm_buffer)


def _alpha(sch: Any, input_stage: str) -> int:
    """α of the kernel: the input transform writes α² positions."""
    return int(round(int(sch.get(sch.get_block(input_stage)).writes[0].buffer.shape[-3]) ** 0.5))


def separable_transforms(cpu: CpuModel, alpha: int, policy: "Optional[WinogradSchedulePolicy]" = None) -> bool:
    """Whether the transforms of an α×α Winograd tile run as two 1-D passes on ``cpu`` (module note):
    the policy's ``separable`` when set, else where the one-pass form's α² partial sums (the inner
    sums every output of a tile shares) outnumber the vector registers: it spills there (F(4, 3):
    36 sums, on AVX2 and AVX-512); F(2, 3)'s 16 fit AVX2's 16 registers (the compiler reloads
    inputs from the local tile instead: as much stack traffic as the two passes).

    Example:
        >>> from ingot.target import Target
        >>> [separable_transforms(Target(f"llvm -mcpu={c}").cpu, a) for c in ("haswell", "sapphirerapids") for a in (4, 6)]
        [False, True, False, True]
    """
    policy = policy or current_winograd_policy()
    if policy.separable is not None:
        return bool(policy.separable)
    return alpha * alpha > cpu.vector_registers


def winograd_rule(sch: Any, names: "list[str]", cpu: CpuModel, gemm_rules: "list[Callable]") -> "list[tuple]":
    """Schedule the Winograd stages among the top-level blocks ``names`` of ``sch`` (module note);
    returns ``[(block, rule name or None, errors or None)]`` for the driver's log, empty when the
    function has no Winograd stages. ``gemm_rules`` are tried in order on the GEMM stage.

    Example:
        >>> # winograd_rule(sch, _top_level_blocks(func), Target("llvm -num-cores=2").cpu, RULES["gemm"])
    """
    lanes, cores = cpu.lanes("float32"), cpu.cores
    stages = winograd_stages(sch, names)
    if not stages:
        return []
    log = []

    def step(block: str, what: str, fn: Callable[[], None]) -> bool:
        try:
            with sch.attempt():
                fn()
        except (ScheduleError, NotImplementedError, ValueError, TypeError) as e:
            log.append((block, None, [f"{what}: {e}".splitlines()[0]]))
            return False
        log.append((block, what, None))
        return True

    pad = next((n for n in names[:names.index(stages["input"])] if n.startswith("pad_temp")), None)
    # First, the one-pass form where it fits the registers: each first pass inlined into its
    # transform (module note, "separable transforms").
    if not separable_transforms(cpu, _alpha(sch, stages["input"])):
        for key in ("input_rows", "output_rows"):
            if key in stages and step(stages[key], "winograd_one_pass",
                                      lambda key=key: sch.compute_inline(sch.get_block(stages[key]))):
                del stages[key]
    after = names[names.index(stages["crop"]) + 1:]
    # Step 0. The whole kernel per row of tiles (all of it or nothing); else stage by stage.
    if step(stages["input"], "winograd_tile_rows", lambda: _blocked(sch, stages, pad, after, lanes, cores)):
        return log + [(stages[k], "winograd_tile_rows", None) for k in ("gemm", "output", "crop")]
    # Step 1. Input transform (with its padding stage, when there is one).
    step(stages["input"], "winograd_input",
         lambda: _transform(sch, stages["input"], 0, 2, lanes, cores, producer=pad, rows=stages.get("input_rows")))
    # Step 2. The α² GEMMs. Per image (a run-time batch: M is [N, α², tiles, O]), M's four axes look
    # like an NHWC conv's output to conv_nhwc_rule, which never takes the batch-1 kernel's
    # [α², tiles, O]: the other rules, as for the constant kernel.
    gemm_block = sch.get(sch.get_block(stages["gemm"]))
    if len(gemm_block.writes[0].buffer.shape) == 4:
        gemm_rules = [rule for rule in gemm_rules if rule is not conv_nhwc_rule]
    info = analyze_block(sch, sch.get_block(stages["gemm"]))
    for rule in gemm_rules:
        # epilogue=False keeps the crop out of the GEMM's tile loop; a rule without the keyword
        # (gemv_rule) fuses no epilogue anyway.
        kwargs = {"epilogue": False} if _takes_epilogue(rule) else {}
        if step(stages["gemm"], rule.__name__,
                lambda rule=rule, kwargs=kwargs: rule(sch, stages["gemm"], info, cpu, **kwargs)):
            break
    # Step 3. Output transform, and the planes of V and M padded (module note: 4K aliasing).

    def output_stage() -> None:
        _transform(sch, stages["output"], 1, 2, lanes, cores, rows=stages.get("output_rows"))
        _align_planes(sch, stages["input"], sch.get(sch.get_block(stages["input"])).writes[0].buffer.name)
        _align_planes(sch, _gemm_writer(sch, stages.get("output_rows", stages["output"]), gemm_buffer), gemm_buffer)

    gemm_buffer = _gemm_reader(sch, stages).reads[0].buffer.name
    step(stages["output"], "winograd_output", output_stage)
    # Step 4. Crop + epilogue as one pass.
    step(stages["crop"], "winograd_epilogue", lambda: _epilogue(sch, stages["crop"], after, lanes, cores))
    return log
