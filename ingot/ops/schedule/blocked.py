"""Cache-blocked GEMM (GotoBLAS/BLIS structure) for large matmul / dense / batch_matmul blocks.

Note: `gemm_rule` keeps the whole reduction inside one register tile, which is fine while one
B panel (K x NR) fits in L1/L2 (up to ~512^3) but streams B from L3 and re-reads A for every
tile for large K. This rule adds the missing cache levels. Default loop order ("panel"):

    for jr in T.parallel(N / NR):                     # threads split the NR-wide column panels
        B_pack[jr, 0:K, 0:NR] = B[...]                # this panel, packed by the thread that reads
                                                      #   it (cache_read + compute_at(jr) + layout)
        for ic in range(M / MC):                      # MC rows of A
            C[ic block, jr panel] = 0                 # decompose_reduction at kc
            for kc in range(K / KC):                  # KC-deep slices
                for ir in range(MC / MR):
                    for ko, ki(unrolled):             # MR x NR register tile (unrolled ii, jn;
                        C[ii, jn*VL:...] += A * B_pack  #  vectorized jl), broadcast A, FMA
            epilogue (bias, relu, gelu ...) on the MC x NR block, while it is in L1/L2

``order="slice"`` is BLIS's textbook order (jc (NC) -> kc -> pack the KC x NC slice of B in
parallel -> ic -> parallel jr -> ir; epilogue chain inlined into one separate pass) and
``order="block"`` is ic -> parallel jr -> kc -> ir with B packed whole at the root.

Why "panel" (figures: docs/performance.md "fp32 GEMM", BENCHMARKS.md):
* One OpenMP parallel region per call. "slice" needs a fork/join per (kc, ic) pair (~26 per
  call at 1024^3): free on a quiet machine, but on a shared one every join waits for a preempted
  thread (its median collapsed where "panel" held). "panel" is also the most work-efficient order
  at 2048^3.
* Each thread packs exactly the B panels it reads (K x NR, one pass, then from L2), and the
  threads never share a panel; the old rule split rows, so both threads streamed all of B once
  per 128-row block, and packed A and B whole in two extra passes through L3.
* A is read in place and re-read from L2/L3 once per column panel (1/16 byte per FLOP at
  NR = 32). Packing A per call (a strided scatter) cost more than it saved.
* KC = 512 where it divides K: fewer read-modify-write passes over C beat keeping the B micro-panel
  (KC x NR x 4 bytes) inside L1; the panel streams from L2.
* With one slice (K = KC) the kc loop is not created: C is zeroed and the epilogue runs per
  register tile.

Tuning: `blocked_gemm_rule` is the one builder of this GEMM. The tuner's `BlockedGemm`
(ingot/tune/schedule_rule/blocked_gemm.py) calls it with ``mc_split``/``k_split`` sampled by
`sample_perfect_tile` and branches on (MR, NVEC) and the order (`benchmarks/gemm.py --sweep`
times points of this space against the default on any target).

The accumulators live in C itself across the kc slices: the C code generator outlines the
parallel loop body into a function with ``restrict`` pointers, so GCC keeps the MR x NR tile in
vector registers over the k loop (loaded once, stored once per kc slice). Every step is a checked
primitive; the driver falls back to `gemm_rule` when one refuses (ragged sizes, other layouts).

Example:
    >>> # blocked_gemm_rule(sch, "T_matmul", info, Target("llvm -num-cores=2").cpu)
"""
from __future__ import annotations

from typing import Any, Optional

from ingot.cpu_model import CpuModel
from ingot.ir.functor import collect_loads, collect_vars
from ingot.tir.schedule.error import ScheduleError

from .analysis import BlockInfo, panel_layout

__all__ = ["blocked_gemm_rule", "choose_kc", "is_large_gemm", "default_gemm_tile", "default_mc", "default_ku", "KC",
           "KC_CHOICES", "MC"]

KC = 256        # the smallest k slice the rule uses (is_large_gemm: K >= KC)
KC_CHOICES = (512, 384, 256)   # slice depths tried in order: the first that divides K
MC = 128        # rows of A per ic block at most: MC x KC x 4 bytes = 256 KiB at KC = 512
KU = 4          # k steps unrolled in the micro-kernel at most (default_ku)
MIN_FLOPS = 2 * 256 ** 3   # below this the plain register-tiled rule is as fast (fits in L2)


def default_gemm_tile(m: int, cpu: CpuModel) -> "tuple[int, int]":
    """(MR, NVEC) of the blocked GEMM's register tile on ``cpu``: two vectors per row (NR = the
    packed panel width) and as many rows as give twice the FMA chains the pipes need
    (`CpuModel.min_accumulators`: 16 accumulators, 8 x 2) within the register budget; when that
    height does not divide M (6 rows with 16 registers), the largest power of two below it (M is
    mostly a multiple of one). The rule refuses an M that neither divides.

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> default_gemm_tile(1024, named_cpu("sapphirerapids")), default_gemm_tile(1024, named_cpu("znver3"))
        ((8, 2), (4, 2))
        >>> default_gemm_tile(96, named_cpu("znver3")), default_gemm_tile(260, named_cpu("sapphirerapids"))
        ((6, 2), (8, 2))
    """
    from .rules import max_tile_rows

    nvec = 2
    rows = min(max_tile_rows(nvec, cpu), max(1, 2 * cpu.min_accumulators // nvec))
    if m % rows:
        power = 1 << (rows.bit_length() - 1)
        rows = power if m % power == 0 else rows
    return rows, nvec


def default_ku(mr: int, nvec: int, cpu: CpuModel) -> int:
    """k steps unrolled in the micro-kernel: at most `KU`, and few enough that the unrolled steps'
    operands (``nvec`` vectors, and without AVX-512's embedded broadcast one broadcast register
    each) fit beside the ``mr * nvec`` accumulators — GCC loads the unrolled steps' operands
    early, and more than the register file holds makes it re-load them from memory.

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> default_ku(8, 2, named_cpu("sapphirerapids")), default_ku(4, 2, named_cpu("znver3"))
        (4, 2)
    """
    per_step = nvec + (0 if cpu.has("avx512f") else 1)
    ku = KU
    while ku > 1 and mr * nvec + ku * per_step > cpu.vector_registers:
        ku //= 2
    return ku


def default_mc(kc: int, cpu: CpuModel) -> int:
    """Rows of A per ic block: at most `MC`, the MC x KC block within half of ``cpu``'s L2
    (the other half holds the thread's B panel and C block).

    Example:
        >>> from ingot.cpu_model import named_cpu
        >>> default_mc(512, named_cpu("znver3")), default_mc(512, named_cpu("haswell"))
        (128, 64)
    """
    mc = MC
    while mc > 8 and mc * kc * 4 > cpu.l2_bytes // 2:
        mc //= 2
    return mc


def is_large_gemm(info: BlockInfo) -> bool:
    """Whether ``info`` (a ``"gemm"`` block) is big enough for the cache-blocked rule: one
    reduce axis of at least ``KC``, M and N of at least 64, 2·M·N·K ≥ ``MIN_FLOPS``.

    Example:
        >>> from ingot.ops.schedule.analysis import BlockInfo
        >>> is_large_gemm(BlockInfo("gemm", [0, 1], [2], [0, 1, 2], [1024, 1024, 1024], i_index=0, j_index=1))
        True
    """
    if info.kind != "gemm" or len(info.reduce) != 1 or None in info.extents:
        return False
    m, n, k = info.extents[info.i_index], info.extents[info.j_index], info.extents[info.reduce[0]]
    return m >= 64 and n >= 64 and k >= KC and 2 * m * n * k >= MIN_FLOPS


def _operand_reads(sch: Any, name: str, info: BlockInfo) -> "tuple[int, int, int, int]":
    """(read index, dimension of j) of the vector operand and (read index, dimension of i) of
    the broadcast operand, from the block's loads. A vector operand already packed into
    ``[N / P, K, P]`` panels (`analysis.panel_layout`) reports ``-P`` as its dimension."""
    block = sch.get(sch.get_block(name))
    iv = [v.var for v in block.iter_vars]
    jv, ivar = iv[info.j_index], iv[info.i_index]
    out = block.body.buffer
    found: dict = {}
    for ld in collect_loads(block.body.value, nested=False):
        if ld.buffer is out:
            continue
        for dim, ix in enumerate(ld.indices):
            used = collect_vars(ix)
            if jv in used and ix is jv:
                found["vec"] = (ld.buffer, dim)
            if ivar in used and ix is ivar:
                found["bc"] = (ld.buffer, dim)
        packed = panel_layout(ld, jv)
        if packed is not None and ivar not in collect_vars(ld):
            # pre-packed weights (ingot.ops.packed): already [N / P, K, P] panels; -P marks them
            found["vec"] = (ld.buffer, -packed[1])
    if "vec" not in found or "bc" not in found:
        raise ScheduleError(f"blocked_gemm_rule: block {name!r}: operands are not indexed by plain i / j")
    names = [r.buffer for r in block.reads]
    try:
        vi = next(n for n, b in enumerate(names) if b is found["vec"][0])
        bi = next(n for n, b in enumerate(names) if b is found["bc"][0])
    except StopIteration:
        raise ScheduleError(f"blocked_gemm_rule: block {name!r}: operand missing from its read regions") from None
    return vi, found["vec"][1], bi, found["bc"][1]


def _pack(sch: Any, name: str, read_index: int, dim: int, ndim: int, width: int, lanes: int, cores: int) -> None:
    """cache_read operand ``read_index`` of block ``name`` and re-layout the copy so that axis
    ``dim`` becomes (``dim // width`` outermost, …, ``dim % width`` innermost): a panel layout,
    packed whole by a parallel copy at the root (used by `conv_oc_rule`; the GEMM rule packs per
    panel or k slice, `_pack_slice`)."""
    from .rules import parallel_vectorize

    copy = sch.cache_read(sch.get_block(name), read_index, "global")

    def index_map(*idx: Any) -> tuple:
        rest = [x for d, x in enumerate(idx) if d != dim]
        return (idx[dim] // width, *rest, idx[dim] % width)

    sch.transform_layout(copy, ("write", 0), index_map)
    copy_name = sch.get(copy).name_hint
    parallel_vectorize(sch, copy_name, lanes if dim == ndim - 1 else 1, cores)


def choose_kc(k: int) -> Optional[int]:
    """Depth of a k slice for reduction extent ``k``: the first of `KC_CHOICES` dividing ``k``
    (None when none does: the rule then refuses and the driver uses `gemm_rule`).

    Example:
        >>> choose_kc(1024), choose_kc(768), choose_kc(264)
        (512, 384, None)
    """
    return next((c for c in KC_CHOICES if k % c == 0), None)


def _pack_slice(sch: Any, name: str, read_index: int, dim: int, nr: int, lanes: int, at: Any) -> None:
    """Pack the vector operand (read ``read_index`` of block ``name``, j along axis ``dim``) into
    NR-wide panels ``[N / NR, ..., NR]``, computing under loop ``at`` only what the loops below it
    read: one KC x N slice under the kc loop ("slice" order), one K x NR panel under the parallel
    jr loop ("panel" order), or the whole operand at the root (``at`` None). The steps are
    cache_read, compute_at, then transform_layout (after compute_at, whose region analysis needs
    plain output indices). Outside a parallel loop the copy's j loop is split by NR and made the
    outermost, parallel one: the same static split as the compute's jr loop, so each thread packs
    the panels it reads."""
    from ingot.tir.stmt import ForKind

    copy = sch.cache_read(sch.get_block(name), read_index, "global")
    if at is not None:
        sch.compute_at(copy, at)

    def index_map(*idx: Any) -> tuple:
        rest = [x for d, x in enumerate(idx) if d != dim]
        return (idx[dim] // nr, *rest, idx[dim] % nr)

    sch.transform_layout(copy, ("write", 0), index_map)
    # Step 1. Find the copy's loop over j (the one its iteration variable ``dim`` is bound to)
    # among the loops compute_at created under ``at``.
    loops = sch.get_loops(copy)
    if at is not None:
        avar = sch.get(at).loop_var
        loops = loops[[sch.get(lp).loop_var for lp in loops].index(avar) + 1:]
    jvars = collect_vars(_binding(sch, copy, dim))
    mine = [lp for lp in loops if sch.get(lp).loop_var in jvars]
    if len(mine) != 1:
        raise ScheduleError(f"blocked_gemm_rule: block {name!r}: the packing copy {sch.get(copy).name_hint!r} "
                            f"has no single loop over axis {dim} of its operand")
    jloop = mine[0]
    # Step 2. j -> (jp, jv): jp outermost (parallel unless already inside the parallel jr loop);
    # jv innermost, vectorized when j is the operand's contiguous axis (else a scalar gather
    # along k stays as it is).
    jp, jv = sch.split(jloop, [None, nr])
    sch.reorder(jp, *[lp for lp in loops if lp is not jloop], jv)
    if dim == len(sch.get(copy).reads[0].buffer.shape) - 1:
        _, v = sch.split(jv, [None, lanes])
        sch.vectorize(v)
    if at is None or sch.get(at).kind != ForKind.PARALLEL:
        sch.parallel(jp)


def _choose_nc(n: int, kc: int, nr: int, cpu: CpuModel) -> int:
    """NC (columns per jc block): N, or the largest divisor of N in NR steps whose packed KC x NC
    slice gives each of ``cpu.cores`` threads at most half of its L2."""
    per_col = kc * 4 / max(1, cpu.cores)
    share = cpu.l2_bytes // 2
    if n * per_col <= share:
        return n
    nc = int(share // per_col) // nr * nr
    while nc > nr and n % nc:
        nc -= nr
    return max(nc, nr)


def _binding(sch: Any, block_rv: Any, k: int) -> Any:
    """The loop expression bound to iteration variable ``k`` of ``block_rv``."""
    loops = sch.get_loops(block_rv)
    realize = sch.get(loops[-1]).body if loops else None
    while realize is not None and not hasattr(realize, "iter_values"):
        realize = getattr(realize, "body", None)
    if realize is None:
        raise ScheduleError("blocked_gemm_rule: packing copy has no block realize under its loops")
    return realize.iter_values[k]


def blocked_gemm_rule(sch: Any, name: str, info: BlockInfo, cpu: CpuModel, *, epilogue: bool = True,
                      mr: Optional[int] = None, nvec: Optional[int] = None, kc: Optional[int] = None,
                      mc: Optional[int] = None,
                      order: Optional[str] = None, nc: Optional[int] = None, ku: Optional[int] = None,
                      mc_split: Any = None, k_split: Any = None) -> None:
    """The cache-blocked schedule of the module note on a large ``"gemm"`` block (see
    `is_large_gemm`): the one builder of this GEMM, used by the rule-based default (no tile
    arguments: exactly the schedule the module note describes) and by the tuner's `BlockedGemm`
    (sampled tile factors). Needs M % MR == 0, N % (nvec·lanes) == 0 and a slice depth of
    `KC_CHOICES` dividing K (else it raises `ScheduleError` and the driver uses `gemm_rule`).

    Parameters: ``mr`` x ``nvec`` vectors is the register tile (NR = nvec·lanes; default
    `default_gemm_tile` for ``cpu``; pre-packed weights fix NR to their panel width); ``order``:
    "panel" (default), "slice" or "block" (module note); ``mc``/``kc``/``nc``: the cache blocks
    (defaults `default_mc`, `choose_kc`, `_choose_nc`, from ``cpu``'s caches);
    ``ku``: the unrolled k steps of the micro-kernel (default `default_ku`). With ``epilogue``, elementwise consumers
    (bias, relu, residual) run per register tile when K is one slice, per MC x NR block after its
    last slice in "panel" order (per jr panel of an MC block in "block" order), and as one
    inlined pass after the GEMM in "slice" order.

    Tile factors instead of sizes (the tuner's interface): ``mc_split`` = the (ic, ir) factors of
    the M / MR row-tile loop (MC = ir·MR) and ``k_split`` = the (kc, ko, ki) factors of the k loop
    (KC = ko·ki, ki unrolled), each a sequence of ints or ExprRVs, or a function ``loop ->
    factors`` called on the loop to split (``lambda lp: sch.sample_perfect_tile(lp, n=2)``; the
    row-tile loop only exists inside this builder). Then the instructions no longer depend on the
    values, so a trace replays under any decision: the kc loop always exists (extent 1 is the
    one-slice case) and C is zeroed / the epilogue runs per MC x NR block.

    Example:
        >>> # cpu = Target("llvm -mcpu=haswell -num-cores=2").cpu
        >>> # blocked_gemm_rule(sch, "T_matmul", info, cpu)              # the default
        >>> # blocked_gemm_rule(sch, "T_matmul", info, cpu, mr=4, nvec=4, mc=64, kc=256, ku=8)
        >>> # blocked_gemm_rule(sch, "T_matmul", info, cpu,
        >>> #                   k_split=lambda lp: sch.sample_perfect_tile(lp, n=3, max_innermost_factor=8))
    """
    lanes = cpu.lanes(info.dtype)
    runtime_rows = info.kind == "gemm" and info.extents[info.i_index] is None
    if runtime_rows:
        if mc_split is not None:
            raise ScheduleError(f"blocked_gemm_rule: block {name!r}: rows of run-time length take no mc_split")
        fused, info = _runtime_rows(sch, name, info)
    if not is_large_gemm(info) or not info.simple_loops:
        raise ScheduleError(f"blocked_gemm_rule: block {name!r} is not a large plain GEMM")
    order = order or "panel"
    if order not in ("panel", "slice", "block"):
        raise ScheduleError(f"blocked_gemm_rule: block {name!r}: order must be 'panel', 'slice' or 'block', "
                            f"got {order!r}")
    i, j, r = info.i_index, info.j_index, info.reduce[0]
    m, n, k = info.extents[i], info.extents[j], info.extents[r]
    if mr is None or nvec is None:
        tile = default_gemm_tile(m, cpu)
        mr, nvec = mr or tile[0], nvec or tile[1]
    ku = ku or default_ku(mr, nvec, cpu)
    vi, vdim, bi, bdim = _operand_reads(sch, name, info)
    prepacked = vdim < 0
    if prepacked:
        # The graph packed the weights at compile time (PackWeights): the tile width is the panel.
        if -vdim % lanes:
            raise ScheduleError(f"blocked_gemm_rule: block {name!r}: weight panel width {-vdim} is not a multiple "
                                f"of {lanes} lanes")
        if -vdim != nvec * lanes and (mc_split is not None or k_split is not None):
            # the tuner branches on NVEC: a branch whose NR is not the panel width is not this layout
            raise ScheduleError(f"blocked_gemm_rule: block {name!r}: weights pre-packed in {-vdim}-wide panels, "
                                f"not NR = {nvec} x {lanes}; use nvec={-vdim // lanes}")
        nvec = -vdim // lanes
    nr = nvec * lanes
    del bi, bdim
    # Sizes given as factors are the caller's (a sampler only offers perfect tilings); the others
    # get the defaults, checked here.
    if k_split is None:
        kc = kc or choose_kc(k)
        bad_k = kc is None or k % kc or kc % ku
    else:
        kc, bad_k = kc or choose_kc(k) or KC, False  # kc: only the NC estimate of "slice" order
    if mc_split is None:
        mc = mc or min(default_mc(kc or KC, cpu), m)
        while mc > mr and m % mc:
            mc -= mr
    if bad_k or m % mr or n % nr or (mc_split is None and m % mc):
        raise ScheduleError(f"blocked_gemm_rule: block {name!r}: sizes {m}x{n}x{k} are not multiples of the "
                            f"tiles (MR={mr}, NR={nr}, KC in {KC_CHOICES}, KU={ku}); use gemm_rule")
    # Step 1. Tiles: i -> (ic, ir, ii), j -> (jr, jn, jl), k -> (kc, ko, ki); BLIS order
    # (batch, kc, ic, jr, ir, ko, ki, ii, jn, jl) with jr parallel.
    blk = sch.get_block(name)
    loops = sch.get_loops(blk)
    if runtime_rows:
        # Step 0. One row loop over the run-time rows (the run-time axes above i fused into it);
        # one ic block (MC = all rows: the planned rows' A block fits in L2), the tail tile guarded.
        row = sch.fuse(*[loops[x] for x in fused]) if len(fused) > 1 else loops[i]
        ic = None
        ir, ii = sch.split(row, [None, mr])
    elif mc_split is None:
        ic, ir, ii = sch.split(loops[i], [None, mc // mr, mr])
    else:
        io, ii = sch.split(loops[i], [None, mr])
        ic, ir = sch.split(io, _factors(mc_split, io, 2, name))
    nc = nc or _choose_nc(n, kc, nr, cpu)
    if order == "slice" and nc < n:
        # jc: NC-column blocks, so that one thread's share of a packed KC x NC slice fits in L2
        jc, jr, jn, jl = sch.split(loops[j], [None, nc // nr, nvec, lanes])
    else:
        jc = None
        jr, jn, jl = sch.split(loops[j], [None, nvec, lanes])
    if k_split is not None:  # sampled: the kc loop exists whatever its extent (replayable trace)
        kco, ko, ki = sch.split(loops[r], _factors(k_split, loops[r], 3, name))
    elif k == kc:  # one slice: no kc loop (the init and the epilogue then go per tile)
        kco = None
        ko, ki = sch.split(loops[r], [None, ku])
    else:
        kco, ko, ki = sch.split(loops[r], [None, kc // ku, ku])
    others = [loops[x] for x in info.spatial if x not in (i, j) and not (runtime_rows and x in fused)]
    kl = [kco] if kco is not None else []
    icl = [ic] if ic is not None else []
    if order == "slice":
        sch.reorder(*others, *([jc] if jc is not None else []), *kl, *icl, jr, ir, ko, ki, ii, jn, jl)
    elif order == "block":
        sch.reorder(*others, *icl, jr, *kl, ir, ko, ki, ii, jn, jl)
    else:
        sch.reorder(*others, jr, *icl, *kl, ir, ko, ki, ii, jn, jl)
    sch.unroll(ki)
    sch.unroll(ii)
    sch.unroll(jn)
    sch.vectorize(jl)
    sch.parallel(jr)
    # Step 2. Pack one KC x N slice of the vector operand per kc iteration (pre-packed weights
    # are read as they are).
    if not prepacked:
        at = {"slice": kco, "panel": jr, "block": None}[order]
        _pack_slice(sch, name, vi, vdim, nr, lanes, at)
    # Step 3. C zeroed before the k slices (the init nest keeps the update's loop kinds); with
    # one slice, per register tile right before its k loop (so the epilogue can follow the tile).
    init = sch.decompose_reduction(blk, ko if kco is None else kco)
    _vectorize_init(sch, init, lanes)
    # Step 4. Elementwise consumers: per tile (under ir) when one slice covers K, else one inlined pass.
    if epilogue:
        if kco is None or order != "slice":
            from .rules import _fuse_epilogue

            at = ir if kco is None else (ic if order == "panel" and ic is not None else jr)
            _fuse_epilogue(sch, blk, at, lanes)
        else:
            _inline_epilogue(sch, blk)


def _runtime_rows(sch: Any, name: str, info: BlockInfo) -> "tuple[list, BlockInfo]":
    """For a GEMM whose row axis ``i`` has a run-time extent: the iteration positions fused into one
    row loop — ``i`` and the run-time spatial axes right above it that the vector operand does not
    read ((seq, batch) or (batch, seq) token rows: contiguous rows of the broadcast operand and the
    output, whichever of the two is the long one) — and ``info`` with those axes planned as one row
    axis of `rules.PLANNED_ROWS` (the others as extent 1). Raises `ScheduleError` when the rows are
    a lone run-time batch (`rules.planned_gemm_rows`: the batch-1 plan applies)."""
    import dataclasses

    from .rules import PLANNED_ROWS, _vector_operand_vars, planned_gemm_rows

    i = info.i_index
    block = sch.get(sch.get_block(name))
    vec_vars = _vector_operand_vars(block, info)
    fused = [i]
    k = i - 1
    while (k >= 0 and k in info.spatial and k in info.symbolic and vec_vars is not None
           and block.iter_vars[k].var not in vec_vars):
        fused.insert(0, k)
        k -= 1
    if len(fused) == 1 and planned_gemm_rows(sch, name, info) is None:
        raise ScheduleError(f"blocked_gemm_rule: block {name!r}: its rows are a run-time batch (planned as 1)")
    extents = list(info.extents)
    for x in fused:
        extents[x] = 1
    extents[i] = PLANNED_ROWS
    return fused, dataclasses.replace(info, extents=extents, symbolic=list(info.symbolic))


def _factors(spec: Any, loop: Any, n: int, name: str) -> list:
    """The ``n`` split factors ``spec`` gives for ``loop``: a sequence, or a function of the loop."""
    factors = list(spec(loop) if callable(spec) else spec)
    if len(factors) != n:
        raise ScheduleError(f"blocked_gemm_rule: block {name!r}: expected {n} tile factors, got {len(factors)}")
    return factors


def _inline_epilogue(sch: Any, producer: Any) -> None:
    """compute_inline each elementwise consumer of ``producer`` (and of those, transitively) that
    feeds exactly one other block, so that the chain bias -> relu -> ... becomes one block; a
    block a primitive refuses (an output, a reduction, several consumers) stays as it is."""
    frontier = list(sch.get_consumers(producer))
    seen = set()
    while frontier:
        cons = frontier.pop()
        key = sch.get(cons).name_hint
        if key in seen:
            continue
        seen.add(key)
        nxt = sch.get_consumers(cons)
        if len(nxt) != 1 or any(iv.kind != "S" for iv in sch.get(cons).iter_vars):
            continue
        try:
            sch.compute_inline(cons)  # checks every precondition before it changes anything
        except ScheduleError:
            continue
        frontier.append(nxt[0])


def _vectorize_init(sch: Any, init: Any, lanes: int) -> None:
    """decompose_reduction copies the update's loop kinds onto the init nest (its innermost loop
    is already vectorized); nothing else to do unless it came out serial."""
    from ingot.tir.stmt import ForKind

    loops = sch.get_loops(init)
    if loops and sch.get(loops[-1]).kind == ForKind.SERIAL:
        from .rules import _vectorize_tail

        _vectorize_tail(sch, init, lanes)
