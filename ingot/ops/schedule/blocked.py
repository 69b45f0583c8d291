"""Cache-blocked GEMM (GotoBLAS structure) for large matmul / dense / batch_matmul blocks.

Note: `gemm_rule` keeps the whole reduction inside one register tile, which is fine while one
B panel (K x NR) fits in L1/L2 (up to ~512^3) but streams B from L3 and A with a 4·K-byte row
stride for large K. This rule adds the two missing levels of GotoBLAS:

    B_pack[j // NR, k, j % NR]   = B[...]         # cache_read + transform_layout (parallel copy)
    A_pack[i // MR, k, i % MR]   = A[...]         # same for the broadcast operand
    for ic in T.parallel(M / MC):                 # MC rows of C per task (A block in L2)
        C[ic block, :] = 0                        # decompose_reduction at kc
        for kc in range(K / KC):                  # KC-deep slices: one B micro-panel = KC x NR
            for jr in range(N / NR):              #   (32 KiB at KC = 256, NR = 32: stays in L1)
                for ir in range(MC / MR):
                    for ko, ki(unrolled):         # C[ii, jn*VL:...] += A_pack * B_pack
                        MR x NR register tile (unrolled ii, jn; vectorized jl)
        epilogue (bias, relu, ...) on the MC x N block, vectorized

The accumulators live in C itself across the kc slices: the C code generator outlines the
parallel loop body into a function with ``restrict`` pointers, so GCC keeps the MR x NR tile in
zmm registers over the k loop (loaded once, stored once per kc slice). Every step is a checked
primitive; the driver falls back to `gemm_rule` when one refuses (ragged sizes, other layouts).

Example:
    >>> # blocked_gemm_rule(sch, "T_matmul", info, lanes=16, cores=2)
"""
from __future__ import annotations

from typing import Any, Optional

from ingot.ir.expr import BufferLoad
from ingot.ir.functor import collect_vars
from ingot.tir.schedule.error import ScheduleError

from .analysis import BlockInfo, panel_layout

__all__ = ["blocked_gemm_rule", "is_large_gemm", "KC", "MC"]

KC = 256        # depth of a k slice: the B micro-panel KC x NR x 4 bytes = 32 KiB (L1)
MC = 128        # rows of C per parallel task: the A block MC x KC x 4 bytes = 128 KiB (L2)
KU = 4          # k steps unrolled in the micro-kernel
MIN_FLOPS = 2 * 256 ** 3   # below this the plain register-tiled rule is as fast (fits in L2)


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
    loads = []

    def visit(e: Any) -> None:
        if isinstance(e, BufferLoad):
            loads.append(e)
            return
        for f in getattr(e, "_fields", ()):
            child = getattr(e, f)
            if hasattr(child, "_fields"):
                visit(child)

    visit(block.body.value)
    out = block.body.buffer
    found: dict = {}
    for ld in loads:
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
    ``dim`` becomes (``dim // width`` outermost, …, ``dim % width`` innermost): a panel layout."""
    from .rules import parallel_vectorize

    copy = sch.cache_read(sch.get_block(name), read_index, "global")

    def index_map(*idx: Any) -> tuple:
        rest = [x for d, x in enumerate(idx) if d != dim]
        return (idx[dim] // width, *rest, idx[dim] % width)

    sch.transform_layout(copy, ("write", 0), index_map)
    copy_name = sch.get(copy).name_hint
    parallel_vectorize(sch, copy_name, lanes if dim == ndim - 1 else 1, cores)


def blocked_gemm_rule(sch: Any, name: str, info: BlockInfo, lanes: int, cores: int, *, epilogue: bool = True,
                      mr: int = 8, nvec: int = 2, kc: Optional[int] = None, mc: Optional[int] = None,
                      pack_a: bool = True) -> None:
    """The GotoBLAS-structured schedule of the module note on a large ``"gemm"`` block (see
    `is_large_gemm`). Needs M % MR == 0, N % (nvec·lanes) == 0 and K % KC == 0 (else it raises
    `ScheduleError` and the driver uses `gemm_rule`).

    Example:
        >>> # blocked_gemm_rule(sch, "T_matmul", info, lanes=16, cores=2)
    """
    if not is_large_gemm(info) or not info.simple_loops:
        raise ScheduleError(f"blocked_gemm_rule: block {name!r} is not a large plain GEMM")
    i, j, r = info.i_index, info.j_index, info.reduce[0]
    m, n, k = info.extents[i], info.extents[j], info.extents[r]
    vi, vdim, bi, bdim = _operand_reads(sch, name, info)
    prepacked = vdim < 0
    if prepacked:
        # The graph packed the weights at compile time (PackWeights): the tile width is the panel.
        if -vdim % lanes:
            raise ScheduleError(f"blocked_gemm_rule: block {name!r}: weight panel width {-vdim} is not a multiple "
                                f"of {lanes} lanes")
        nvec = -vdim // lanes
    nr = nvec * lanes
    kc = kc or KC
    mc = mc or min(MC, max(mr, (m // max(1, 2 * cores)) // mr * mr))
    while mc > mr and m % mc:
        mc -= mr
    if m % mr or n % nr or k % kc or k % KU or m % mc:
        raise ScheduleError(f"blocked_gemm_rule: block {name!r}: sizes {m}x{n}x{k} are not multiples of the "
                            f"tiles (MR={mr}, NR={nr}, KC={kc})")
    # Step 1. Pack the vector operand into NR-wide panels, the broadcast one into MR-row panels.
    block = sch.get(sch.get_block(name))
    vbuf, bbuf = block.reads[vi].buffer, block.reads[bi].buffer
    if not prepacked:
        _pack(sch, name, vi, vdim, len(vbuf.shape), nr, lanes, cores)
    if pack_a:
        bi = next(n_ for n_, rg in enumerate(sch.get(sch.get_block(name)).reads) if rg.buffer is bbuf)
        _pack(sch, name, bi, bdim, len(bbuf.shape), mr, lanes, cores)
    # Step 2. Tiles: i -> (ic, ir, ii), j -> (jr, jn, jl), k -> (kc, ko, ki).
    blk = sch.get_block(name)
    loops = sch.get_loops(blk)
    ic, ir, ii = sch.split(loops[i], [None, mc // mr, mr])
    jr, jn, jl = sch.split(loops[j], [None, nvec, lanes])
    kco, ko, ki = sch.split(loops[r], [None, kc // KU, KU])
    others = [loops[x] for x in info.spatial if x not in (i, j)]
    o_ext = [info.extents[x] for x in info.spatial if x not in (i, j)]
    sch.reorder(*others, ic, kco, jr, ir, ko, ki, ii, jn, jl)
    sch.unroll(ki)
    sch.unroll(ii)
    sch.unroll(jn)
    sch.vectorize(jl)
    # Step 3. Parallel over (batch, ic); C zeroed per MC block before the k slices.
    outer = sch.fuse(*others, ic) if others else ic
    sch.parallel(outer)
    init = sch.decompose_reduction(blk, kco)
    _vectorize_init(sch, init, lanes)
    # Step 4. Elementwise consumers (bias, relu, residual) per MC block, after its k slices.
    if epilogue:
        from .rules import _fuse_epilogue

        _fuse_epilogue(sch, blk, outer, lanes)
    del o_ext


def _vectorize_init(sch: Any, init: Any, lanes: int) -> None:
    """decompose_reduction copies the update's loop kinds onto the init nest (its innermost loop
    is already vectorized); nothing else to do unless it came out serial."""
    from ingot.tir.stmt import ForKind

    loops = sch.get_loops(init)
    if loops and sch.get(loops[-1]).kind == ForKind.SERIAL:
        from .rules import _vectorize_tail

        _vectorize_tail(sch, init, lanes)
