"""Classify the blocks of a PrimFunc for the default schedules (DLight-style rules).

Note: a rule needs to know, for one block, which loop carries which iteration variable and what
the block computes. `analyze_block` reads that off the IR (never from names):

* ``"gemm"`` — a reduction block whose update is ``C[s...] = C[s...] + X * Y`` (casts allowed)
  where the output indices are distinct spatial iteration variables, its last index ``j`` is
  used by one operand but not by the other (the *broadcast* operand), and some other spatial
  variable ``i`` indexes the broadcast operand: matmul/dense/batch_matmul (``i`` = row) and NCHW
  conv2d as implicit GEMM (``i`` = output channel, ``j`` = output width);
* ``"reduction"`` — any other block with reduce iteration variables (sum/max/mean, the rows of
  softmax and layernorm);
* ``"elementwise"`` — all iteration variables spatial (injective, broadcast, pad, epilogues).

Example:
    >>> from ingot import te
    >>> A = te.placeholder((8, 4), name="A"); B = te.placeholder((4, 16), name="B")
    >>> k = te.reduce_axis((0, 4), name="k")
    >>> C = te.compute((8, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    >>> from ingot.tir.schedule import Schedule
    >>> sch = Schedule(te.create_prim_func([A, B, C]))
    >>> info = analyze_block(sch, sch.get_block("C"))
    >>> info.kind, info.i_index, info.j_index
    ('gemm', 0, 1)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ingot.ir import expr as E
from ingot.ir.expr import BufferLoad, Var
from ingot.ir.functor import collect_vars
from ingot.tir.stmt import BlockRealize, BufferStore

__all__ = ["BlockInfo", "analyze_block", "panel_layout", "plan_symbolic_extents", "PLANNED_EXTENT"]


@dataclass
class BlockInfo:
    """What a rule needs to know about one block.

    ``loop_of_iter[k]`` is the index (in ``sch.get_loops(block)``) of the loop whose variable
    alone is bound to iteration variable ``k``, or None when the binding is not one plain loop.
    ``i_index``/``j_index`` (gemm only) are the iteration-variable positions of the register-tile
    row and vector axes.
    """

    kind: str
    spatial: list = field(default_factory=list)        # iteration-variable positions
    reduce: list = field(default_factory=list)
    loop_of_iter: list = field(default_factory=list)
    extents: list = field(default_factory=list)        # ints, or None when symbolic
    dtype: str = "float32"
    i_index: Optional[int] = None
    j_index: Optional[int] = None
    simple_loops: bool = False                         # one loop per iteration variable, same order
    #: positions whose extent is a run-time size (a model's symbolic batch) that ``extents`` plans
    #: as `PLANNED_EXTENT` (see `plan_symbolic_extents`)
    symbolic: list = field(default_factory=list)


def _strip_casts(e: Any) -> Any:
    while isinstance(e, E.Cast):
        e = e.value
    return e


def _const(e: Any) -> Optional[int]:
    return e.value if isinstance(e, E.IntImm) else None


def analyze_block(sch: Any, block_rv: Any) -> BlockInfo:
    """Classify ``block_rv`` (see the module note) and map its iteration variables to loops.

    Example:
        >>> # info = analyze_block(sch, sch.get_block("T_add")); info.kind  -> 'elementwise'
    """
    block = sch.get(block_rv)
    loops = [sch.get(lp) for lp in sch.get_loops(block_rv)]
    realize = loops[-1].body if loops else None
    iter_vars = list(block.iter_vars)
    spatial = [k for k, iv in enumerate(iter_vars) if iv.kind == "S"]
    reduce = [k for k, iv in enumerate(iter_vars) if iv.kind == "R"]
    kinds_known = all(iv.kind in ("S", "R") for iv in iter_vars)
    loop_vars = {id(lp.loop_var): n for n, lp in enumerate(loops)}
    loop_of_iter: list = [None] * len(iter_vars)
    if isinstance(realize, BlockRealize) and realize.block is block and _const(realize.predicate) in (None, 1):
        for k, value in enumerate(realize.iter_values):
            if isinstance(value, Var) and id(value) in loop_vars:
                n = loop_vars[id(value)]
                if _const(loops[n].min) == 0:
                    loop_of_iter[k] = n
    extents = [_const(iv.dom.extent) for iv in iter_vars]
    simple = (len(loops) == len(iter_vars) and loop_of_iter == list(range(len(iter_vars)))
              and isinstance(realize, BlockRealize) and _const(realize.predicate) == 1)
    store = block.body
    dtype = str(store.buffer.dtype) if isinstance(store, BufferStore) else "float32"
    info = BlockInfo("elementwise" if not reduce else "reduction", spatial, reduce, loop_of_iter, extents, dtype,
                     simple_loops=simple)
    if not kinds_known or not isinstance(store, BufferStore):
        info.kind = "opaque"
        return info
    if reduce and block.init is not None:
        ij = _gemm_axes(block, store)
        if ij is not None:
            info.kind, (info.i_index, info.j_index) = "gemm", ij
    plan_symbolic_extents(info, batch_rows=_batch_rows(block, info))
    return info


def _batch_rows(block: Any, info: BlockInfo) -> bool:
    """Whether a GEMM's row axis is a model's run-time batch: the leading axis, its extent one
    run-time size (a classifier's ``(batch, K)`` input; a product such as ``seq * batch`` is tokens)."""
    if info.kind != "gemm" or info.i_index != 0 or not info.spatial or info.spatial[0] != 0:
        return False
    return isinstance(_strip_casts(block.iter_vars[0].dom.extent), Var)


#: The size a rule plans a run-time outer axis for: tiles and blocking never split that axis (it
#: is the outer, parallel one), so the choice equals the constant model's at batch 1.
PLANNED_EXTENT = 1


def plan_symbolic_extents(info: BlockInfo, batch_rows: bool = False) -> BlockInfo:
    """Give the leading spatial axes of ``info`` whose extent is symbolic (a dynamic batch) the
    planning extent `PLANNED_EXTENT` and list them in ``info.symbolic``, so the rules, which read
    ``extents`` only to choose tiles, blocking and how many outer loops to fuse into the parallel
    loop, schedule such a block as its batch-1 constant version. The loops keep their symbolic
    extents: the rules split only the inner (tile) axes, and the parallel loop starts below the
    symbolic outer loops (`rules.runtime_outer_loops`), so the code is exact for every run-time size. A symbolic axis that is not leading, that a GEMM
    rule tiles (``i_index``/``j_index``: a dynamic sequence length) or that is innermost (the
    vector axis: a softmax row of run-time length) stays None and the rules
    that need constant extents decline the block as before. With ``batch_rows`` (`analyze_block`:
    the GEMM's row axis is the leading axis and its extent one run-time size, a classifier over
    ``(batch, K)``) that row axis is planned as batch 1 too: the rules pick the constant model's
    batch-1 plan (`gemv_rule`, or a one-row register tile), and the row loop stays serial outside
    the parallel one.

    Example:
        >>> info = plan_symbolic_extents(BlockInfo("elementwise", [0, 1, 2], [], [0, 1, 2], [None, 64, None]))
        >>> info.extents, info.symbolic
        ([1, 64, None], [0])
        >>> gemv = BlockInfo("gemm", [0, 1], [2], [0, 1, 2], [None, 10, 64], i_index=0, j_index=1)
        >>> plan_symbolic_extents(gemv, batch_rows=True).extents
        [1, 10, 64]
    """
    tiled = {info.j_index} if batch_rows else {info.i_index, info.j_index}
    spatial = set(info.spatial)
    for k, extent in enumerate(info.extents[:-1]):  # the innermost axis is the vector axis
        if k not in spatial or k in tiled:
            break
        if extent is None:
            info.extents[k] = PLANNED_EXTENT
            info.symbolic.append(k)
    return info


def _gemm_axes(block: Any, store: BufferStore) -> "tuple[int, int] | None":
    """(i, j) iteration-variable positions when ``store`` is ``C[s] = C[s] + X * Y`` (see note)."""
    iter_vars = [iv.var for iv in block.iter_vars]
    pos = {id(v): k for k, v in enumerate(iter_vars)}
    out_idx = [pos.get(id(ix)) if isinstance(ix, Var) else None for ix in store.indices]
    if not out_idx or None in out_idx or len(set(out_idx)) != len(out_idx):
        return None
    if any(block.iter_vars[k].kind != "S" for k in out_idx):
        return None
    value = store.value
    if not isinstance(value, E.Add):
        return None
    acc, prod = value.a, value.b
    if not (isinstance(acc, BufferLoad) and acc.buffer is store.buffer):
        acc, prod = value.b, value.a
    if not (isinstance(acc, BufferLoad) and acc.buffer is store.buffer):
        return None
    prod = _strip_casts(prod)
    if not isinstance(prod, E.Mul):
        return None
    x, y = _strip_casts(prod.a), _strip_casts(prod.b)
    if not (isinstance(x, BufferLoad) and isinstance(y, BufferLoad)):
        return None
    j = out_idx[-1]
    jv = iter_vars[j]
    x_vars, y_vars = collect_vars(x), collect_vars(y)
    if (jv in x_vars) == (jv in y_vars):
        return None
    bcast_vars = y_vars if jv in x_vars else x_vars
    # The row axis: the innermost other output axis the broadcast operand depends on.
    for k in reversed(out_idx[:-1]):
        if iter_vars[k] in bcast_vars:
            return k, j
    return None


def panel_layout(load: Any, var: Var) -> "tuple[int, int] | None":
    """``(dim, P)`` when ``load`` reads ``var`` as a packed panel: index ``dim`` is exactly
    ``var // P`` and the last index is exactly ``var % P`` (the layout of the pre-packed weights
    of `ingot.ops.packed`, and of the copies `blocked_gemm_rule` packs per call); else None.

    Example:
        >>> from ingot import te
        >>> from ingot.ir.expr import BufferLoad
        >>> w = te.placeholder((2, 8, 16), name="w")
        >>> j, k = Var("j", "int32"), Var("k", "int32")
        >>> panel_layout(w[j // 16, k, j % 16], j)
        (0, 16)
    """
    if not isinstance(load, BufferLoad) or len(load.indices) < 2:
        return None
    last = load.indices[-1]
    if not (isinstance(last, E.FloorMod) and last.a is var and _const(last.b) is not None):
        return None
    p = _const(last.b)
    for dim, ix in enumerate(load.indices[:-1]):
        if isinstance(ix, E.FloorDiv) and ix.a is var and _const(ix.b) == p:
            return dim, p
    return None
