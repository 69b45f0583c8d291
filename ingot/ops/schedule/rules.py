"""Schedule templates for one block: GEMM micro-kernel, row reduction, elementwise.

Note: each rule takes a `Schedule`, a block name, its `BlockInfo` and the target's `CpuModel`
(`ingot.cpu_model`: vector lanes, registers, caches, cores), and transforms that block's loop nest in
place. Tile sizes come from the CPU model (register tiles from the register file, cache blocks from
the cache sizes), never from the CPU a rule was first measured on. Rules only use checked
primitives, so a transformation a primitive cannot prove correct raises `ScheduleError`; the
driver (`default.py`) runs each rule on a copy of the schedule and falls back to a simpler rule
when it raises. Nothing here decides correctness — the primitives do.

The GEMM template (register tiling, as in BLIS/GotoBLAS micro-kernels):

    for fused_outer in T.parallel(...):           # other spatial axes, i // MR, j // NR
        C_local = alloc (MR, NR) "local"          # cache_write + reverse_compute_at
        init C_local                              # decompose_reduction
        for r... (reduce loops):                  # ci, kh, kw  /  k
            for ii in T.unroll(MR):               # rows of the register tile (choose_mr)
                for jn in T.unroll(NR // VL):     # vectors per row (choose_nr)
                    for jl in T.vectorized(VL):   # one SIMD register
                        C_local[ii, jn*VL+jl] += X * Y
        write back C_local -> C, then the fused elementwise epilogue (bias, relu, residual)

Example:
    >>> # gemm_rule(sch, "C", info, Target("llvm -mcpu=haswell -num-cores=2").cpu)
"""
from __future__ import annotations

from typing import Any, Optional

from ingot.cpu_model import CpuModel
from ingot.tir.schedule.error import ScheduleError
from ingot.tir.stmt import ForKind

from .analysis import BlockInfo

__all__ = ["gemm_rule", "planned_gemm_rows", "PLANNED_ROWS", "reduction_rule", "elementwise_rule", "parallel_vectorize", "choose_mr", "choose_nr",
           "fit_tile", "max_tile_rows"]


#: Rows of a one-vector-wide register tile at most: each row costs a broadcast load per step, and
#: 12 chains already cover every table CPU's FMA units x latency (`CpuModel.min_accumulators`).
MAX_TILE_ROWS = 12


def max_tile_rows(nvec: int, cpu: CpuModel) -> int:
    """The most rows an ``MR`` x ``nvec``-vector register tile may have on ``cpu``: its
    accumulators within `CpuModel.accumulator_registers`, and the whole tile (accumulators, the
    step's operand vectors, one broadcast) within the register file (`CpuModel.fits_registers`).

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> max_tile_rows(2, named_cpu("skylake-avx512")), max_tile_rows(2, named_cpu("haswell"))
        (12, 6)
        >>> max_tile_rows(1, named_cpu("skylake-avx512")), max_tile_rows(1, named_cpu("haswell"))
        (12, 12)
    """
    rows = max(1, min(MAX_TILE_ROWS, cpu.accumulator_registers // max(1, nvec)))
    while rows > 1 and not cpu.fits_registers(rows, nvec):
        rows -= 1
    return rows


def choose_mr(extent: Optional[int], nvec: int, cpu: CpuModel) -> int:
    """Rows of the register tile: as many as ``cpu``'s registers allow (`max_tile_rows`),
    preferring a divisor of ``extent`` (no predicate).

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> avx512 = named_cpu("skylake-avx512")
        >>> choose_mr(1024, 2, avx512), choose_mr(96, 1, avx512), choose_mr(1, 2, avx512)
        (8, 12, 1)
        >>> choose_mr(1024, 2, named_cpu("haswell"))
        4
    """
    limit = max_tile_rows(nvec, cpu)
    if extent is None:
        return min(4, limit)
    if extent <= limit:
        return extent
    for mr in range(limit, 3, -1):
        if extent % mr == 0:
            return mr
    return min(limit, 8)


def fit_tile(extent: int, nvec: int, cpu: CpuModel) -> "tuple[int, int]":
    """(MR, vectors) of a register tile over a row axis of ``extent`` with at most ``nvec``
    vectors per row: ``nvec`` when `choose_mr` finds a height dividing ``extent`` on ``cpu``,
    else fewer vectors (a divisor of ``nvec``), whose tile may be taller — with 16 registers a
    2-vector tile is at most 6 rows, and ResNet's 14- and 7-wide maps need 7. Raises
    `ScheduleError` when no height divides ``extent``.

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> fit_tile(14, 2, named_cpu("sapphirerapids")), fit_tile(14, 2, named_cpu("znver3"))
        ((7, 2), (7, 1))
        >>> fit_tile(56, 2, named_cpu("znver3"))
        (4, 2)
    """
    for nv in [d for d in range(nvec, 0, -1) if nvec % d == 0]:
        mr = choose_mr(extent, nv, cpu)
        if extent % mr == 0:
            return mr, nv
    raise ScheduleError(f"no register-tile height up to {max_tile_rows(1, cpu)} rows divides {extent} on {cpu.name}")


def choose_nr(extent: Optional[int], lanes: int) -> "tuple[int, int]":
    """(vectors per row, lanes) of the register tile for a vector axis of ``extent``.

    Example:
        >>> choose_nr(1024, 16), choose_nr(56, 16), choose_nr(8, 16), choose_nr(7, 16), choose_nr(18, 16)
        ((2, 16), (1, 8), (1, 8), (1, 1), (1, 16))
    """
    if extent is None:
        return 1, lanes
    if extent >= 2 * lanes and extent % (2 * lanes) == 0:
        return 2, lanes
    if extent % lanes == 0:
        return 1, lanes
    # A ragged axis (56, 28 in ResNet/MobileNet) would need a predicated last vector, which the
    # C backend scalarizes through the stack: use the widest power-of-two vector dividing it.
    vl = lanes
    while vl > 4 and extent % vl:
        vl //= 2
    if extent % vl == 0:
        return 1, vl
    if extent >= lanes:
        return 1, lanes
    # GCC vector types need a power-of-two lane count: use the largest that fits the axis.
    vl = 1
    while vl * 2 <= extent:
        vl *= 2
    return (1, vl) if vl >= 4 and extent % vl == 0 else (1, 1)


#: Rows a rule plans a GEMM row axis of run-time length for when that axis is a sequence (see
#: `planned_gemm_rows`): 128 tokens, the length BERT/GPT-2 are benchmarked at, so the tiles, the
#: cache blocks and the rule (`blocked_gemm_rule` vs `gemm_rule`) are the constant model's at that
#: length; the row tile then has a tail (a split predicate), exact for every run-time length.
PLANNED_ROWS = 128


def planned_gemm_rows(sch: Any, name: str, info: BlockInfo) -> Optional[int]:
    """The row extent a GEMM rule plans block ``name`` for: its constant ``i`` extent, or
    `PLANNED_ROWS` when ``i`` has a run-time extent and is a sequence — below a static spatial axis
    (an attention head's query rows: (batch, heads, seq, d)), below a run-time axis that the vector
    operand reads too (a batch of matmuls), or alone with an extent that is a product of run-time
    sizes (a dense over flattened (seq * batch) tokens). Otherwise None: a lone run-time row axis is
    a batch (the batch-1 plan, `analysis.plan_symbolic_extents`), and a run-time ``i`` right below
    another run-time axis that only the broadcast operand reads ((seq, batch, K) or (batch, seq, K)
    rows) is ambiguous — which of the two is the sequence is not in the kernel.

    Example:
        >>> # planned_gemm_rows(sch, "T_matmul", info) -> 128 for a (batch, 12, seq, 64) attention matmul
    """
    i = info.i_index
    if info.extents[i] is not None:
        return info.extents[i]
    block = sch.get(sch.get_block(name))
    before = [k for k in info.spatial if k < i]
    if not before:
        extent = block.iter_vars[i].dom.extent
        return PLANNED_ROWS if _is_product_of_sizes(extent) else None
    k = before[-1]
    if k not in info.symbolic:
        return PLANNED_ROWS  # a static axis (heads) above the rows
    vec_vars = _vector_operand_vars(block, info)
    if vec_vars is not None and block.iter_vars[k].var in vec_vars:
        return PLANNED_ROWS  # a batch of independent GEMMs above the rows
    return None


def _is_product_of_sizes(e: Any) -> bool:
    from ingot.ir import expr as E

    while isinstance(e, E.Cast):
        e = e.value
    return isinstance(e, E.Mul) and all(isinstance(x, (E.Var, E.Mul, E.Cast)) for x in (e.a, e.b))


def _vector_operand_vars(block: Any, info: BlockInfo) -> "set | None":
    """The variables the operand indexed by j reads (None when no single operand is)."""
    from ingot.ir.expr import BufferLoad
    from ingot.ir.functor import collect_loads, collect_vars

    jv = block.iter_vars[info.j_index].var
    out = block.body.buffer
    found = [collect_vars(ld) for ld in collect_loads(block.body.value)
             if isinstance(ld, BufferLoad) and ld.buffer is not out and jv in collect_vars(ld)]
    return found[0] if len(found) == 1 else None


def runtime_outer_loops(sch: Any, loops: list) -> int:
    """How many leading ``loops`` have a run-time extent (a model's symbolic batch), at most all
    but the last. The parallel loop starts below them: fusing them into it would split each
    register tile's accumulator index over two buffer dimensions (``fused // OH``, ``fused % OH``),
    and CompactBufferAllocation, which proves iterations disjoint one dimension at a time, would
    then keep the accumulator a full-size buffer instead of a per-tile local array. A serial loop
    over images around the constant model's parallel loop costs one fork per image.

    Example:
        >>> # runtime_outer_loops(sch, sch.get_loops(blk)) -> 1 for a (batch, 56, 56, 64) conv
    """
    n = 0
    while n < len(loops) - 1 and _extent(sch, loops[n]) is None:
        n += 1
    return n


def fuse_parallel_loops(sch: Any, loops: list) -> Any:
    """Fuse ``loops`` (directly nested, outermost first) below their run-time outer loops
    (`runtime_outer_loops`) and make the result parallel; returns it.

    Example:
        >>> # task = fuse_parallel_loops(sch, [ln, oo])   # oo alone when ln's extent is the batch
    """
    loops = loops[runtime_outer_loops(sch, loops):]
    outer = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    sch.parallel(outer)
    return outer


def _fuse_parallel(sch: Any, loops: list, extents: list, cores: int) -> Any:
    """Fuse the leading loops until there are >= 4 * cores iterations (or all are fused) and
    make the result parallel, below the run-time outer loops (`runtime_outer_loops`). Returns the
    parallel loop (or None when there is no loop)."""
    if not loops:
        return None
    skip = runtime_outer_loops(sch, loops)
    loops, extents = loops[skip:], extents[skip:]
    n, total = 0, 1
    while n < len(loops):
        n += 1
        if extents[n - 1] is None:
            break
        total *= extents[n - 1]
        if total >= 4 * cores:
            break
    outer = sch.fuse(*loops[:n]) if n > 1 else loops[0]
    sch.parallel(outer)
    return outer


def _extent(sch: Any, loop: Any) -> Optional[int]:
    e = sch.get(loop).extent
    return getattr(e, "value", None) if type(e).__name__ == "IntImm" else None


def parallel_vectorize(sch: Any, name: str, lanes: int, cores: int) -> None:
    """The safe baseline for any block whose loops are all spatial: vectorize the innermost loop
    (split by ``lanes``), fuse the outer ones and make them parallel.

    Example:
        >>> # parallel_vectorize(sch, "T_add", lanes=16, cores=2)
    """
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    if not loops:
        return
    extents = [_extent(sch, lp) for lp in loops]
    # A short innermost axis (7, 14 ...) is fused with its neighbour (contiguous in memory for
    # row-major outputs) so that the vectorized loop gets enough elements.
    while len(loops) > 1 and extents[-1] is not None and extents[-1] < lanes and extents[-2] is not None:
        loops = loops[:-2] + [sch.fuse(loops[-2], loops[-1])]
        extents = extents[:-2] + [extents[-2] * extents[-1]]
    inner = loops[-1]
    if lanes > 1 and extents[-1] is not None and extents[-1] >= lanes:
        outer_in, inner = sch.split(inner, [None, lanes])
        loops = loops[:-1] + [outer_in]
        extents = extents[:-1] + [None if extents[-1] is None else -(-extents[-1] // lanes)]
        sch.vectorize(inner)
    elif extents[-1] is not None and extents[-1] >= 4 and extents[-1] & (extents[-1] - 1) == 0:
        loops, extents = loops[:-1], extents[:-1]
        sch.vectorize(inner)  # a short power-of-two axis is one narrower vector
    elif extents[-1] is None and len(loops) > 1:
        # A row of run-time length (softmax over a dynamic sequence): split by the lanes, every
        # lane would be guarded and the C backend scalarizes such a vector through the stack; the
        # plain loop is left to the C compiler, which vectorizes it with a remainder loop (softmax
        # of BERT at seq 128: 4.8 -> 0.7 ms CPU, loaded host).
        loops, extents = loops[:-1], extents[:-1]
    _fuse_parallel(sch, loops, extents, cores)


def elementwise_rule(sch: Any, name: str, info: BlockInfo, cpu: CpuModel) -> None:
    """Parallel outer loops, vectorized innermost loop (see `parallel_vectorize`).

    Example:
        >>> # elementwise_rule(sch, "T_relu", info, Target("llvm -num-cores=2").cpu)
    """
    parallel_vectorize(sch, name, cpu.lanes(info.dtype), cpu.cores)


def reduction_rule(sch: Any, name: str, info: BlockInfo, cpu: CpuModel) -> None:
    """Spatial loops outside (fused, parallel), reduce loops inside. When the innermost
    iteration variable is spatial and indexes the output contiguously (a column sum), it stays
    innermost and is vectorized — lanes are independent outputs, so the order of the floating
    point sum is unchanged. A row reduction (reduce innermost) stays serial: vectorizing it would
    reassociate the sum (it needs rfactor).

    Example:
        >>> # reduction_rule(sch, "T_sum", info, Target("llvm -num-cores=2").cpu)
    """
    lanes, cores = cpu.lanes(info.dtype), cpu.cores
    if not info.simple_loops:
        raise ScheduleError(f"reduction_rule: block {name!r} is not one loop per iteration variable")
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    spatial = [loops[k] for k in info.spatial]
    reduce = [loops[k] for k in info.reduce]
    s_ext = [info.extents[k] for k in info.spatial]
    vec_loop = None
    last = len(info.extents) - 1
    if info.spatial and info.spatial[-1] == last and s_ext[-1] is not None and s_ext[-1] >= lanes and info.reduce:
        # column reduction: [spatial..., reduce..., vector]
        o, vec_loop = sch.split(spatial[-1], [None, lanes])
        spatial, s_ext = spatial[:-1] + [o], s_ext[:-1] + [-(-s_ext[-1] // lanes)]
        sch.reorder(*spatial, *reduce, vec_loop)
    elif reduce:
        sch.reorder(*spatial, *reduce)
    if vec_loop is not None:
        sch.vectorize(vec_loop)
    _fuse_parallel(sch, spatial, s_ext, cores)


def gemm_rule(sch: Any, name: str, info: BlockInfo, cpu: CpuModel, *, epilogue: bool = True,
              mr: Optional[int] = None, nvec: Optional[int] = None, k_unroll: int = 1,
              local_layout: Any = None, lanes: Optional[int] = None) -> None:
    """The register-tiled micro-kernel of the module note on a ``"gemm"`` block.

    ``mr``/``nvec`` override the tile (rows, vectors per row; by default `choose_nr` and
    `choose_mr` fit it to ``cpu``'s registers); ``lanes`` overrides the vector width; ``k_unroll`` splits the innermost
    reduce loop and unrolls the inner part; ``local_layout`` (an index map) re-lays out the local
    accumulator tile so that the vector axis is innermost when it is not the output's last axis. With ``epilogue`` the elementwise consumers of the
    output (bias, relu, residual) are moved under the tile loop too.

    Example:
        >>> # gemm_rule(sch, "T_matmul", info, Target("llvm -mcpu=haswell -num-cores=2").cpu)
    """
    lanes, cores = lanes or cpu.lanes(info.dtype), cpu.cores
    if info.kind != "gemm" or not info.simple_loops:
        raise ScheduleError(f"gemm_rule: block {name!r} is not a plain GEMM-like reduction")
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    i, j = info.i_index, info.j_index
    ext_i, ext_j = planned_gemm_rows(sch, name, info), info.extents[j]
    if ext_j is None and nvec is None and mr is None and local_layout is None:
        _gemm_runtime_columns(sch, name, info, ext_i, cpu)
        return
    nv, vl = choose_nr(ext_j, lanes)
    if nvec is not None:
        nv = nvec
    mr = mr or choose_mr(ext_i, nv, cpu)
    # Step 1. tile i by MR and j by NR = nv * vl.
    io, ii = sch.split(loops[i], [None, mr])
    jo, jn, jl = sch.split(loops[j], [None, nv, vl])
    others = [loops[k] for k in info.spatial if k not in (i, j)]
    o_ext = [info.extents[k] for k in info.spatial if k not in (i, j)]
    reduce = [loops[k] for k in info.reduce]
    if k_unroll > 1 and reduce:
        ko, ki = sch.split(reduce[-1], [None, k_unroll])
        reduce = reduce[:-1] + [ko, ki]
    # Step 2. order: outer spatial, tile loops, reduce loops, the register tile.
    sch.reorder(*others, io, jo, *reduce, ii, jn, jl)
    if k_unroll > 1 and reduce:
        sch.unroll(reduce[-1])
    sch.unroll(ii)
    sch.unroll(jn)
    if vl > 1 and ext_j is not None:
        # (a run-time j: each lane is guarded, which the C backend scalarizes through the stack;
        # the unvectorized lane loop is cheaper: attention's Q.K^T at seq 128 18.5 -> 10.7 ms CPU)
        sch.vectorize(jl)
    # a planned run-time row count (gl.m) counts as unknown for the parallel fusion
    outer_ext = o_ext + [None if info.extents[info.i_index] is None else -(-ext_i // mr),
                         None if ext_j is None else -(-ext_j // (nv * vl))]
    _fuse_parallel(sch, [*others, io, jo], outer_ext, cores)
    # the innermost tile loop: the loop just above the first reduce loop
    tile_loop = sch.get_loops(block)[len(sch.get_loops(block)) - 3 - len(reduce) - 1]
    # Step 3. accumulators in registers: a local cache of the output, written back per tile.
    write_back = sch.cache_write(block, 0, "local")
    if local_layout is not None:
        sch.transform_layout(block, ("write", 0), local_layout)
    sch.reverse_compute_at(write_back, tile_loop)
    _vectorize_tail(sch, write_back, vl)
    first_reduce = sch.get_loops(block)[len(sch.get_loops(block)) - 3 - len(reduce)]
    init = sch.decompose_reduction(block, first_reduce)
    _vectorize_tail(sch, init, vl)
    # Step 4. fuse the elementwise epilogue (bias, relu, residual) under the same tile loop.
    if epilogue:
        _fuse_epilogue(sch, write_back, tile_loop, vl)


def _gemm_runtime_columns(sch: Any, name: str, info: BlockInfo, ext_i: Optional[int], cpu: CpuModel) -> None:
    """`gemm_rule` for a vector axis j of run-time length (attention's Q.K^T over a dynamic
    sequence): a tile of MR rows (guarded once per row, outside the j loop) accumulates directly
    in the output, one k step at a time, over the whole run-time j loop, which stays a plain loop
    the C compiler vectorizes with a remainder (split by lanes, every lane would be guarded and
    scalarized through the stack)::

        for io in T.parallel(...):                  # with the outer spatial loops
            C[io*MR : io*MR+MR, :] = 0
            for k: for ii in T.unroll(MR): for j in range(seq): C[i, j] += A[i, k] * B[k, j]
    """
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    i, j = info.i_index, info.j_index
    mr = choose_mr(ext_i, 1, cpu)
    io, ii = sch.split(loops[i], [None, mr])
    others = [loops[k] for k in info.spatial if k not in (i, j)]
    o_ext = [info.extents[k] for k in info.spatial if k not in (i, j)]
    reduce = [loops[k] for k in info.reduce]
    sch.reorder(*others, io, *reduce, ii, loops[j])
    sch.unroll(ii)
    outer_ext = o_ext + [None if info.extents[i] is None else -(-ext_i // mr)]
    _fuse_parallel(sch, [*others, io], outer_ext, cpu.cores)
    if reduce:
        sch.decompose_reduction(block, reduce[0])


def _vectorize_tail(sch: Any, block: Any, vl: int) -> None:
    """Vectorize (split by ``vl``) the innermost loop of a moved block; unroll the one above."""
    loops = sch.get_loops(block)
    if not loops or sch.get(loops[-1]).kind != ForKind.SERIAL:
        return  # decompose_reduction keeps the loop kinds of the update (already vectorized)
    ext = _extent(sch, loops[-1])
    if vl > 1 and ext is not None and ext >= vl and ext % vl == 0:
        o, inner = sch.split(loops[-1], [None, vl])
        sch.vectorize(inner)
    elif ext is not None and vl > 1 and ext < vl and ext & (ext - 1) == 0 and ext >= 4:
        sch.vectorize(loops[-1])


def _fuse_epilogue(sch: Any, producer: Any, tile_loop: Any, vl: int) -> None:
    """reverse_compute_at each chain of elementwise consumers under ``tile_loop``; a consumer that
    a primitive refuses stays where it is (the driver schedules it as elementwise)."""
    frontier = [producer]
    seen = set()
    while frontier:
        blk = frontier.pop()
        for cons in sch.get_consumers(blk):
            key = sch.get(cons).name_hint
            if key in seen:
                continue
            seen.add(key)
            if any(iv.kind != "S" for iv in sch.get(cons).iter_vars):
                continue
            try:
                # all-or-nothing: a refusal leaves sch (IR, handles, trace) as it was
                sch.reverse_compute_at(cons, tile_loop)
            except (ScheduleError, ValueError):
                # ValueError: region analysis cannot bound the tile's region in the consumer's
                # coordinates (rows fused from run-time axes): it stays a separate pass
                continue
            _vectorize_tail(sch, cons, vl)
            frontier.append(cons)

