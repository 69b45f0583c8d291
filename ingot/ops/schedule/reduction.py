"""Row reductions with vector accumulators (softmax max/sum, layernorm mean/variance, sum/max).

Note: `reduction_rule` keeps a reduction over the innermost axis serial — one scalar accumulator
per row, a dependency chain of R adds. This rule splits the row into ``R / VL`` vectors and uses
`rfactor` so that VL partial results (one per lane) are accumulated independently, then combined
once per row — TVM's rfactor-based row reduction on CPU:

    for rows in T.parallel(...):                      # spatial axes, fused
        for ko in range(R / VL):                      # rf block: VL independent accumulators
            for ki in T.vectorized(VL):
                C_rf[row, ki] = op(C_rf[row, ki], X[row, ko * VL + ki])
        for ki in range(VL):                          # write-back: combine the VL lanes
            C[row] = op(C[row], C_rf[row, ki])

The rf block is computed at the row loop, so ``C_rf`` is compacted to VL elements per row (one
register). Floating-point sums are reassociated (VL interleaved partial sums: the usual
vectorized-reduction rounding, like numpy's pairwise sum); max/min are exact. VL is the widest
power of two (≥ 4) that divides R, so there is no predicate; other rows keep `reduction_rule`.

Example:
    >>> from ingot import te, ops
    >>> from ingot.tir.schedule import Schedule
    >>> from ingot.ops.schedule.analysis import analyze_block
    >>> x = te.placeholder((8, 64), name="x")
    >>> y = ops.sum(x, axis=1)
    >>> sch = Schedule(te.create_prim_func([x, y]))
    >>> from ingot.cpu_model import named_cpu
    >>> row_reduction_rule(sch, y.op.name, analyze_block(sch, sch.get_block(y.op.name)), named_cpu("skylake-avx512"))
    >>> "T.vectorized(16)" in sch.mod["main"].script()
    True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ingot.cpu_model import CpuModel
from ingot.ir.transform import PassContext, register_pass_config
from ingot.tir.schedule.error import ScheduleError

from .analysis import BlockInfo
from .rules import _extent, _fuse_parallel

__all__ = ["row_reduction_rule", "row_vector_lanes", "gemv_rule", "row_norm_rule"]


def row_vector_lanes(extent: "int | None", lanes: int) -> "int | None":
    """The vector width for a row of ``extent``: the widest power of two ≤ ``lanes`` (and ≥ 4)
    that divides it with at least two vectors per row, else None.

    Example:
        >>> row_vector_lanes(768, 16), row_vector_lanes(1000, 16), row_vector_lanes(7, 16)
        (16, 8, None)
    """
    if extent is None:
        return None
    vl = lanes
    while vl >= 4:
        if extent % vl == 0 and extent >= 2 * vl:
            return vl
        vl //= 2
    return None


def _reads_rows(block: Any, kv: Any) -> bool:
    """Whether every input load that uses the reduce variable ``kv`` uses it in its last index
    only (the row is contiguous in memory), and at least one load does."""
    from ingot.ir.functor import collect_loads, collect_vars

    found = False
    for ld in collect_loads(block.body.value):
        if ld.buffer is block.body.buffer or not ld.indices:
            continue
        if any(kv in collect_vars(ix) for ix in ld.indices[:-1]):
            return False
        found = found or kv in collect_vars(ld.indices[-1])
    return found


def row_reduction_rule(sch: Any, name: str, info: BlockInfo, cpu: CpuModel) -> None:
    """Vector-accumulator row reduction of the module note on block ``name``. Raises
    `ScheduleError` (the driver then uses `reduction_rule`) unless the block has one reduce axis,
    innermost, with a static extent that `row_vector_lanes` accepts, and a combiner `rfactor`
    knows (sum, product, max, min).

    Example:
        >>> # row_reduction_rule(sch, "T_softmax_maxelem", info, Target("llvm -num-cores=2").cpu)
    """
    lanes, cores = cpu.lanes(info.dtype), cpu.cores
    if info.kind not in ("reduction", "gemm") or not info.simple_loops or len(info.reduce) != 1:
        raise ScheduleError(f"row_reduction_rule: block {name!r} is not a single-axis reduction")
    r = info.reduce[0]
    if r != len(info.extents) - 1:
        raise ScheduleError(f"row_reduction_rule: block {name!r} reduces an outer axis (reduction_rule "
                            "vectorizes over the inner spatial axis instead)")
    block_node = sch.get(sch.get_block(name))
    if not _reads_rows(block_node, block_node.iter_vars[r].var):
        raise ScheduleError(f"row_reduction_rule: block {name!r} does not read its inputs contiguously along the "
                            "reduce axis (a column reduction: reduction_rule vectorizes over the outputs)")
    vl = row_vector_lanes(info.extents[r], lanes)
    if vl is None:
        raise ScheduleError(f"row_reduction_rule: block {name!r}: row of {info.extents[r]} has no vector split")
    # Step 1. k -> (ko, ki); rfactor ki into the last axis of a partial-result buffer.
    block = sch.get_block(name)
    ndim = len(sch.get(block).body.indices)
    loops = sch.get_loops(block)
    _, ki = sch.split(loops[r], [None, vl])
    rf = sch.rfactor(ki, ndim)
    # Step 2. Parallel rows on the write-back block, the rf block computed per row under it.
    write_back = sch.get_block(name)
    spatial = sch.get_loops(write_back)[:-1]
    s_ext = [info.extents[k] for k in info.spatial]
    if not spatial:
        raise ScheduleError(f"row_reduction_rule: block {name!r} has no spatial loop to attach the partials to")
    sch.compute_at(rf, spatial[-1])
    # compute_at regenerates the rf block's loops under the row: vectorize its lane loop now
    sch.vectorize(sch.get_loops(rf)[-1])
    _fuse_parallel(sch, spatial, s_ext, cores)


#: Largest batch (rows M) that `gemv_rule` takes; larger M keeps `gemm_rule`.
GEMV_MAX_ROWS = 4

#: Output rows `gemv_rule` computes together (the first that divides N): 4 independent FMA chains
#: per loaded x vector, enough to hide the FMA latency while x stays in one register (the gain:
#: BENCHMARKS.md, "Schedule choices").
GEMV_ROW_GROUPS = (4, 2)


@dataclass(frozen=True)
class GemvPolicy:
    """How many output rows `gemv_rule` computes together: the first of ``row_groups`` that divides
    N (default `GEMV_ROW_GROUPS`; ``()``: one row at a time, the plain row reduction); and
    ``row_layout``: whether PackWeights (`ingot.graph.transform.pack_weights`) leaves small-batch
    denses (M <= `GEMV_MAX_ROWS`) whose N fits no 2-vector panel in `gemv_rule`'s row layout
    (``linear(x, W[N, K])``, a matmul's weight transposed) — False packs them into one-vector
    panels for `gemm_rule` instead.

    A build takes another policy through its pass context (how benchmarks/gemv.py compares them;
    the kernel cache is bypassed under a pass config)::

        with PassContext(config={GEMV_POLICY_CONFIG: GemvPolicy(row_groups=())}):
            package = ingot.compile(model)

    Example:
        >>> current_gemv_policy().row_groups == GEMV_ROW_GROUPS
        True
    """
    row_groups: tuple = GEMV_ROW_GROUPS
    row_layout: bool = True


#: The pass-context config key of the `GemvPolicy` the rule follows.
GEMV_POLICY_CONFIG = "schedule.gemv"
register_pass_config(GEMV_POLICY_CONFIG, GemvPolicy,
                     "GemvPolicy: the output rows gemv_rule computes together, and whether PackWeights keeps its layout")


def current_gemv_policy() -> GemvPolicy:
    """The `GemvPolicy` of the current pass context (the default one when unset).

    Example:
        >>> with PassContext(config={GEMV_POLICY_CONFIG: GemvPolicy(row_groups=(2,))}):
        ...     current_gemv_policy().row_groups
        (2,)
    """
    return PassContext.current().get_config(GEMV_POLICY_CONFIG, None) or GemvPolicy()


def gemv_rule(sch: Any, name: str, info: BlockInfo, cpu: CpuModel) -> None:
    """Dense with the weight in ``[N, K]`` layout (``linear``: ``Y[i, j] = sum_k X[i, k] * W[j, k]``)
    as row reductions: each output is a dot product of two contiguous rows, vectorized over K
    (VL lane accumulators, combined once), outputs in groups of `GemvPolicy.row_groups` rows (independent
    FMA chains sharing each x vector; `row_reduction_rule` when no group divides N), fused and
    parallel.

    Why: `gemm_rule` vectorizes over the output axis ``j``, which is right for ``matmul``
    (``B[k, j]`` is contiguous in ``j``) but, for ``W[j, k]``, makes every vector lane load from a
    different weight row ``K`` floats apart — a 16-way gather per FMA. With a batch of 1 (ResNet's
    FC layer, any batch-1 ``linear`` whose N is not panel-aligned so that `PackWeights` keeps the
    original operator) that made it far slower than the same product as a ``matmul`` (BENCHMARKS.md,
    "Schedule choices"). Raises
    `ScheduleError` (the driver then tries `gemm_rule`) unless M <= `GEMV_MAX_ROWS`, every input load that reads the
    reduce axis reads it in its last index only (so ``matmul``'s ``B[k, j]`` is left to
    `gemm_rule`) and the K extent has a vector split.

    Example:
        >>> from ingot import te
        >>> from ingot.ops import nn
        >>> from ingot.tir.schedule import Schedule
        >>> from ingot.ops.schedule.analysis import analyze_block
        >>> x, w = te.placeholder((1, 256), name="x"), te.placeholder((100, 256), name="w")
        >>> y = nn.dense(x, w)
        >>> sch = Schedule(te.create_prim_func([x, w, y]))
        >>> from ingot.cpu_model import named_cpu
        >>> gemv_rule(sch, y.op.name, analyze_block(sch, sch.get_block(y.op.name)), named_cpu("haswell"))
        >>> "T.vectorized(8)" in sch.mod["main"].script()
        True
    """
    lanes, cores = cpu.lanes(info.dtype), cpu.cores
    if info.kind != "gemm" or not info.simple_loops or len(info.reduce) != 1:
        raise ScheduleError(f"gemv_rule: block {name!r} is not a dense-like reduction over one axis")
    rows = info.extents[info.i_index] if info.i_index is not None else None
    if rows is None or rows > GEMV_MAX_ROWS:
        # with MR >= 8 rows the register tile reuses each gathered weight vector MR times
        raise ScheduleError(f"gemv_rule: block {name!r} has {rows} rows (> {GEMV_MAX_ROWS}): gemm_rule's "
                            "register tile amortizes the weight loads")
    block_node = sch.get(sch.get_block(name))
    if not _reads_rows(block_node, block_node.iter_vars[info.reduce[0]].var):
        raise ScheduleError(f"gemv_rule: block {name!r} reads an operand across the reduce axis (matmul "
                            "layout: gemm_rule vectorizes over the contiguous output axis)")
    n = info.extents[info.spatial[-1]] if info.spatial else None
    group = next((g for g in current_gemv_policy().row_groups if isinstance(n, int) and n % g == 0 and n > g), None)
    vl = row_vector_lanes(info.extents[info.reduce[0]], lanes)
    if group is None or vl is None or info.reduce[0] != len(info.extents) - 1:
        row_reduction_rule(sch, name, info, cpu)
        return
    # Step 1. k -> (ko, ki); rfactor ki into VL lane accumulators per output.
    block = sch.get_block(name)
    ndim = len(sch.get(block).body.indices)
    _, ki = sch.split(sch.get_loops(block)[info.reduce[0]], [None, vl])
    rf = sch.rfactor(ki, ndim)
    # Step 2. Outputs in groups of `group` rows; the rf block computed per group, ko outside the
    # rows: `group` independent FMA chains that share each x vector, each thread its own
    # contiguous run of weight rows (static parallel schedule over the groups).
    write_back = sch.get_block(name)
    spatial = sch.get_loops(write_back)[:-1]
    jo, _ = sch.split(spatial[-1], [None, group])
    sch.compute_at(rf, jo)
    ji, ko, kl = sch.get_loops(rf)[-3:]
    sch.reorder(ko, ji)
    sch.unroll(ji)
    sch.vectorize(kl)
    s_ext = [info.extents[k] for k in info.spatial[:-1]] + [n // group]
    _fuse_parallel(sch, spatial[:-1] + [jo], s_ext, cores)
    # Step 3. The accumulators' init before the ko loop (registers across it, not `if ko == 0`).
    sch.decompose_reduction(rf, sch.get_loops(rf)[-3])


def _row_norm_group(sch: Any, name: str) -> "tuple[str, list[str]]":
    """The sink (the one block downstream of ``name`` with no consumer) and, in program order,
    every other block the sink depends on inside the function; raises `ScheduleError` when the
    blocks downstream of ``name`` do not end in exactly one sink."""
    down, todo = set(), [sch.get_block(name)]
    while todo:
        b = todo.pop()
        for c in sch.get_consumers(b):
            n = sch.get(c).name_hint
            if n not in down:
                down.add(n)
                todo.append(c)
    sinks = [n for n in down if not sch.get_consumers(sch.get_block(n))]
    if len(sinks) != 1:
        raise ScheduleError(f"row_norm_rule: block {name!r} feeds {len(sinks)} outputs (needs one normalized row output)")
    group, todo = set(), [sch.get_block(sinks[0])]
    while todo:
        for p in sch.get_producers(todo.pop()):
            n = sch.get(p).name_hint
            if n not in group:
                group.add(n)
                todo.append(p)
    root = sch.mod[sch.func_working_on or "main"]
    from .default import _top_level_blocks

    order = [n for n in _top_level_blocks(root) if n in group]
    if len(order) != len(group):
        raise ScheduleError(f"row_norm_rule: a producer of {sinks[0]!r} is not a top-level block (already placed)")
    return sinks[0], order


def _place_partials(sch: Any, rf: Any, row_loop: Any) -> None:
    """Order the loops of partial-sum block ``rf`` under ``row_loop`` as (reduce..., unrolled
    partial vectors, lanes): the lane loop (the one indexing the partial buffer's last axis)
    vectorized, the other spatial loops unrolled, the init hoisted before the reduce loops."""
    from ingot.ir.expr import Var

    node = sch.get(rf)
    loops = sch.get_loops(rf)
    inner = loops[[sch.get(lp) for lp in loops].index(sch.get(row_loop)) + 1:]
    binding = _loop_bindings(sch, rf)
    lane_var = node.body.indices[-1]
    kinds, lane = {}, None
    for lp in inner:
        iv = binding.get(sch.get(lp).loop_var)
        kinds[lp] = iv.kind if iv is not None else "S"
        if iv is not None and isinstance(lane_var, Var) and iv.var is lane_var:
            lane = lp
    if lane is None:
        raise ScheduleError(f"row_norm_rule: block {node.name_hint!r} has no lane loop")
    red = [lp for lp in inner if kinds[lp] == "R"]
    spat = [lp for lp in inner if kinds[lp] != "R" and lp is not lane]
    sch.reorder(*red, *spat, lane)
    for lp in spat:
        sch.unroll(lp)
    sch.vectorize(lane)
    if red:
        sch.decompose_reduction(rf, red[0])


def _loop_bindings(sch: Any, block: Any) -> dict:
    """loop variable -> the iteration variable bound to exactly that loop variable."""
    from ingot.ir.expr import Var

    from ingot.tir.schedule.analysis import child_block_realizes

    name = sch.get(block).name_hint
    found = [r for r in child_block_realizes(sch.get(sch.get_loops(block)[-1])) if r.block.name_hint == name]
    if not found:
        raise ScheduleError(f"row_norm_rule: block {name!r} is not directly under its innermost loop")
    realize = found[0]
    return {v: iv for iv, v in zip(realize.block.iter_vars, realize.iter_values) if isinstance(v, Var)}


def row_norm_rule(sch: Any, name: str, info: BlockInfo, cpu: CpuModel) -> None:
    """One parallel row loop for a row normalization (layer_norm, softmax-like chains): the
    per-row statistics and the normalized row are all computed per row, under the output's row
    loop, instead of one parallel region and one full-size pass over memory per stage.

    Applies when ``name`` is a row reduction whose consumers end in one output block (the *sink*)
    with the row axis innermost, and every block the sink depends on is either a row reduction
    over the sink's last axis (`row_vector_lanes` splits it: VL lane accumulators by `rfactor`,
    their init hoisted before the row loop) or a per-row scalar stage (last extent 1, e.g. the
    mean and ``1/sqrt(var + eps)``). The sink is vectorized along the row and parallel over the
    fused rows; the row (3 KB for BERT's 768 floats) is read from memory once and re-read from L1::

        for row in T.parallel(R):
            S1_rf[0:VL] = 0;  for ko: S1_rf[:] += x[row, ko*VL:(ko+1)*VL] ...   # each statistic
            mean, rstd = ...                                                    # per-row scalars
            for co: for ci in T.vectorized(VL): y[row, co*VL+ci] = ...          # normalized row

    Raises `ScheduleError` (the driver then schedules each block alone) otherwise.

    Example:
        >>> from ingot import te
        >>> from ingot.ops import nn
        >>> from ingot.tir.schedule import Schedule
        >>> from ingot.ops.schedule.analysis import analyze_block
        >>> x, g = te.placeholder((4, 64), name="x"), te.placeholder((64,), name="g")
        >>> y = nn.layer_norm(x, g, g)
        >>> sch = Schedule(te.create_prim_func([x, g, y]))
        >>> name = "T_layer_norm_sum"
        >>> from ingot.cpu_model import named_cpu
        >>> row_norm_rule(sch, name, analyze_block(sch, sch.get_block(name)), named_cpu("haswell").with_cores(2))
        >>> sch.mod["main"].script().count("T.parallel")
        1
    """
    lanes, cores = cpu.lanes(info.dtype), cpu.cores
    from .analysis import analyze_block

    if info.kind not in ("reduction", "gemm") or len(info.reduce) != 1 or info.reduce[0] != len(info.extents) - 1:
        raise ScheduleError(f"row_norm_rule: block {name!r} is not a reduction over its innermost axis")
    # Step 1. The group: one sink, per-row reductions and per-row scalar stages.
    sink, group = _row_norm_group(sch, name)
    sink_info = analyze_block(sch, sch.get_block(sink))
    if sink_info.reduce or not sink_info.simple_loops or len(sink_info.extents) < 2:
        raise ScheduleError(f"row_norm_rule: output block {sink!r} is not a row-major spatial block")
    row = sink_info.extents[-1]
    vl = row_vector_lanes(row, lanes)
    if vl is None or any(e is None for e in sink_info.extents):
        raise ScheduleError(f"row_norm_rule: output block {sink!r}: row of {row} has no vector split")
    reductions = []
    for n in group:
        bi = analyze_block(sch, sch.get_block(n))
        s_ext = [bi.extents[k] for k in bi.spatial]
        if s_ext != sink_info.extents[:-1] + [1]:
            raise ScheduleError(f"row_norm_rule: block {n!r} ({s_ext}) is not one value per row of {sink!r}")
        if not bi.reduce:
            continue  # a per-row scalar stage
        node = sch.get(sch.get_block(n))
        if (len(bi.reduce) != 1 or bi.reduce[0] != len(bi.extents) - 1 or bi.extents[-1] != row
                or not bi.simple_loops or not _reads_rows(node, node.iter_vars[-1].var)):
            raise ScheduleError(f"row_norm_rule: block {n!r} is neither a contiguous row reduction of "
                                f"{row} nor a per-row scalar")
        reductions.append(n)
    # Step 2. Each reduction -> VL lane partials (rfactor), still at the top level.
    # U vectors of partials per reduction: U independent add chains hide the FMA latency (one
    # chain of R / VL dependent adds made the row latency bound).
    unroll = next(u for u in (4, 2, 1) if row % (vl * u) == 0)
    rfs = []
    for n in reductions:
        block = sch.get_block(n)
        ndim = len(sch.get(block).body.indices)
        _, ui, li = sch.split(sch.get_loops(block)[-1], [None, unroll, vl])
        rf = sch.rfactor(li, ndim)            # VL lanes; combined by VL scalar adds per row
        rfs.append(sch.get(rf).name_hint)
        if unroll > 1:
            # U x VL partials (U independent vector add chains), combined into the VL lanes by
            # vector adds: one chain of R / VL adds, or U * VL scalar adds, was the row's cost.
            ui = sch.get_loops(rf)[-2]  # rows..., ko, ui, li: rfactor keeps the loops in order
            if _extent(sch, ui) != unroll:
                raise ScheduleError(f"row_norm_rule: block {n!r}: unexpected loops after rfactor")
            rfs.append(sch.get(sch.rfactor(ui, ndim)).name_hint)
    # Step 3. The sink: vectorized along the row, parallel over the fused rows.
    sblock = sch.get_block(sink)
    loops = sch.get_loops(sblock)
    _, ci = sch.split(loops[-1], [None, vl])
    sch.vectorize(ci)
    _fuse_parallel(sch, loops[:-1], sink_info.extents[:-1], cores)
    target = sch.get_loops(sch.get_block(sink))[-3]
    # Step 4. Every producer under the row loop, consumers first (compute_at needs the consumer placed).
    # program order: n_rf_rf (the U x VL partials), n_rf (the VL lanes), n
    by_block = {n: sorted((r for r in rfs if r.startswith(n + "_")), key=len, reverse=True) for n in reductions}
    order = [b for n in group for b in (by_block[n] + [n] if n in reductions else [n])]
    for n in reversed(order):
        sch.compute_at(sch.get_block(n), target)
    # Step 5. Lane loops vectorized; each partial's init before its ko loop (registers across it).
    for n in rfs:
        _place_partials(sch, sch.get_block(n), target)
