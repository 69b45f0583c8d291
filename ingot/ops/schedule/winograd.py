"""The default schedule of a Winograd conv kernel (`ingot.ops.winograd.conv2d_nhwc_winograd`).

Note: the kernel's stages carry the block annotation ``winograd`` (input / gemm / output / crop),
so this rule finds them without guessing from names. Per stage:

* **input** ``V[ξ, t, c]``: channels split into vectors; for each (tile, channel vector), in
  parallel, the padded α×α×vector input tile is computed into a small local buffer
  (`compute_at` of the padding stage: bounds checks once per tile element, and the tile stays in
  registers/L1), then the α² positions ξ are unrolled — the unrolled copies fold their ``Select``
  into straight-line sums (`ingot.ops.winograd` module note) and the shared inner sums are common
  subexpressions for the C compiler.
* **gemm** ``M[ξ, t, o]``: the ordinary GEMM rules (`RULES["gemm"]` in `ingot.ops.schedule.default`):
  α² independent GEMMs, ξ is a batch axis.
* **output** ``Y_tile[t, ij, o]``: the same as the input transform, over output-channel vectors,
  with the m² output positions unrolled.
* **crop** and the fused epilogue (bias, residual add, relu): the crop is a gather; it and every
  elementwise block after it but the last are inlined into one pass (parallel, vectorized).

Each step runs under ``sch.attempt()`` in `schedule_blocks`; a step that a primitive refuses leaves
that stage to the generic rules (correct, slower).

Example:
    >>> # sch = Schedule(te.create_prim_func([x, u, conv2d_nhwc_winograd(x, u)]))
    >>> # winograd_rule(sch, lanes=16, cores=2)  -> ['winograd_input', 'winograd_gemm', ...]
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ingot.tir.schedule.error import ScheduleError

from ..winograd import STAGE_KEY, TILE_GRID_KEY
from .analysis import analyze_block
from .rules import _extent, _fuse_parallel, parallel_vectorize

__all__ = ["winograd_stages", "winograd_rule"]


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
               producer: Optional[str] = None) -> None:
    """A transform stage: parallel over (tile, channel vector), positions unrolled, lanes vectorized;
    ``producer`` (the padding stage) is computed per (tile, channel vector) into a local tile."""
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    if len(loops) != 3:
        raise ScheduleError(f"winograd stage {name!r}: expected 3 loops (position, tile, channel), got {len(loops)}")
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
    if producer is not None:
        sch.compute_at(sch.get_block(producer), co)
        sch.vectorize(sch.get_loops(sch.get_block(producer))[-1])
    _fuse_parallel(sch, [*tile_loops, co], [*grid, channels // lanes], cores)
    sch.unroll(loops[position_axis])
    sch.vectorize(ci)


def _epilogue(sch: Any, crop: str, blocks_after: "list[str]", lanes: int, cores: int) -> None:
    """Inline the crop and the elementwise chain after it into the last block; schedule that one."""
    chain = [crop] + blocks_after
    for name in chain[:-1]:
        sch.compute_inline(sch.get_block(name))
    parallel_vectorize(sch, chain[-1], lanes, cores)


def winograd_rule(sch: Any, names: "list[str]", lanes: int, cores: int,
                  gemm_rules: "list[Callable]") -> "list[tuple]":
    """Schedule the Winograd stages among the top-level blocks ``names`` of ``sch`` (module note);
    returns ``[(block, rule name or None, errors or None)]`` for the driver's log, empty when the
    function has no Winograd stages. ``gemm_rules`` are tried in order on the GEMM stage.

    Example:
        >>> # winograd_rule(sch, _top_level_blocks(func), 16, 2, RULES["gemm"])
    """
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

    # Step 1. Input transform (with its padding stage, when there is one).
    pad = next((n for n in names[:names.index(stages["input"])] if n.startswith("pad_temp")), None)
    step(stages["input"], "winograd_input",
         lambda: _transform(sch, stages["input"], 0, 2, lanes, cores, producer=pad))
    # Step 2. The α² GEMMs.
    info = analyze_block(sch, sch.get_block(stages["gemm"]))
    for rule in gemm_rules:
        if step(stages["gemm"], rule.__name__,
                lambda rule=rule: rule(sch, stages["gemm"], info, lanes, cores, epilogue=False)):
            break
    # Step 3. Output transform.
    step(stages["output"], "winograd_output", lambda: _transform(sch, stages["output"], 1, 2, lanes, cores))
    # Step 4. Crop + epilogue as one pass.
    after = names[names.index(stages["crop"]) + 1:]
    step(stages["crop"], "winograd_epilogue", lambda: _epilogue(sch, stages["crop"], after, lanes, cores))
    return log
