"""Sampling: `sample_perfect_tile`, `sample_categorical`, `sample_compute_location`.

Note: sampling instructions draw from the schedule's seeded random state (numpy PCG64) and
record their *decision* in the trace. Replaying with the recorded decision gives the same
program; replaying with another valid decision gives another valid program (the tuner's
mutators do that). A given decision is validated, so a mutated trace cannot produce a wrong tiling.

* `sample_perfect_tile`: uniform over the ordered factorizations of the loop's constant extent
  into ``n`` factors whose innermost factor is at most ``max_innermost_factor``.
* `sample_categorical`: one of ``candidates`` with probabilities ``probs``; decision = index.
* `sample_compute_location`: where a block could be computed: decision -1 (root: stay where it
  is), -2 (inline; offered only when the block is a complete block whose body is one store to a
  buffer that is not a function parameter), or an index into the candidate loops: the loops
  above the block's consumers that enclose all of them and do not enclose the block itself,
  outermost first.

Example:
    >>> # v1, v2 = sch.sample_perfect_tile(j, n=2, max_innermost_factor=16)
    >>> # trace: v1, v2 = sch.sample_perfect_tile(loop=l0, n=2, max_innermost_factor=16, decision=[32, 4])
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Sequence

from ingot.ir.expr import as_const_int
from ingot.tir.stmt import BufferStore

from ..analysis import child_block_realizes, enclosing_loops, is_ancestor, scope_block
from ..instruction import BlockRV, ExprRV, InstructionKind, LoopRV
from ..state import INLINE_MARK, ROOT_MARK

SAMPLE_PERFECT_TILE = InstructionKind("sample_perfect_tile", inputs=("loop",), attrs=("n", "max_innermost_factor"),
                                      is_sampling=True, returns_list=True)
SAMPLE_CATEGORICAL = InstructionKind("sample_categorical", attrs=("candidates", "probs"), is_sampling=True)
SAMPLE_COMPUTE_LOCATION = InstructionKind("sample_compute_location", inputs=("block",), is_sampling=True)


@functools.lru_cache(maxsize=4096)
def perfect_tilings(extent: int, n: int, max_innermost_factor: int) -> tuple[tuple[int, ...], ...]:
    """All ordered ``n``-factor factorizations of ``extent`` whose last factor is ≤ the bound.

    Example:
        >>> perfect_tilings(8, 2, 4)
        ((8, 1), (4, 2), (2, 4))
    """
    def rec(rest: int, k: int) -> list[tuple[int, ...]]:
        if k == 1:
            return [(rest,)]
        out = []
        for d in range(1, rest + 1):
            if rest % d == 0:
                out.extend((d,) + tail for tail in rec(rest // d, k - 1))
        return out

    if n == 1:
        return ((extent,),) if extent <= max_innermost_factor else ()
    result = []
    for inner in range(1, min(extent, max_innermost_factor) + 1):
        if extent % inner == 0:
            result.extend(head + (inner,) for head in rec(extent // inner, n - 1))
    return tuple(sorted(result, key=lambda t: t[::-1]))


def sample_perfect_tile(sch: Any, loop: LoopRV, n: int, max_innermost_factor: int = 16,
                        decision: Optional[Sequence[int]] = None) -> list[ExprRV]:
    """Sample ``n`` factors whose product is the loop's extent (innermost ≤ ``max_innermost_factor``).

    Example:
        >>> # i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
    """
    sref = sch._loop(loop, "sample_perfect_tile")
    extent = as_const_int(sref.stmt.extent)
    if extent is None:
        sch._raise(f"sample_perfect_tile: loop {sref.stmt.loop_var.name!r} has the symbolic extent "
                   f"{sref.stmt.extent}", "perfect tiles need a constant extent; split with a None factor instead",
                   sref.func_name, [sref.stmt])
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"sample_perfect_tile: n must be a positive int, got {n!r}")
    if not isinstance(max_innermost_factor, int) or max_innermost_factor < 1:
        raise ValueError(f"sample_perfect_tile: max_innermost_factor must be a positive int, got {max_innermost_factor!r}")
    if decision is not None:
        decision = [int(d) for d in decision]
        prod = 1
        for d in decision:
            prod *= d
        if len(decision) != n or prod != extent or any(d < 1 for d in decision):
            sch._raise(f"sample_perfect_tile: decision {decision} is not a perfect {n}-tiling of extent {extent}",
                       "the factors must be positive, n of them, multiplying to the extent", sref.func_name,
                       [sref.stmt])
    else:
        choices = perfect_tilings(extent, n, max_innermost_factor)
        if not choices:
            sch._raise(f"sample_perfect_tile: extent {extent} cannot be one factor <= {max_innermost_factor}",
                       "use n >= 2 or a larger max_innermost_factor", sref.func_name, [sref.stmt])
        decision = list(choices[int(sch.rng.integers(len(choices)))])
    outputs = [sch._new_rv(ExprRV, d) for d in decision]
    sch._record(SAMPLE_PERFECT_TILE, [loop], [n, max_innermost_factor], outputs, decision)
    return outputs


def sample_categorical(sch: Any, candidates: Sequence[int], probs: Sequence[float],
                       decision: Optional[int] = None) -> ExprRV:
    """Pick one of ``candidates`` (ints) with probabilities ``probs``; the decision is the index.

    Example:
        >>> # v = sch.sample_categorical(candidates=[0, 16, 64], probs=[0.2, 0.4, 0.4])
    """
    candidates = [int(c) for c in candidates]
    probs = [float(p) for p in probs]
    if len(candidates) != len(probs) or not candidates:
        raise ValueError(f"sample_categorical: {len(candidates)} candidates but {len(probs)} probabilities")
    if any(p < 0 for p in probs) or sum(probs) <= 0:
        raise ValueError(f"sample_categorical: probabilities must be non-negative with a positive sum, got {probs}")
    if decision is None:
        total = sum(probs)
        decision = int(sch.rng.choice(len(candidates), p=[p / total for p in probs]))
    elif not 0 <= int(decision) < len(candidates):
        raise ValueError(f"sample_categorical: decision {decision} is not an index into {len(candidates)} candidates")
    decision = int(decision)
    out = sch._new_rv(ExprRV, candidates[decision])
    sch._record(SAMPLE_CATEGORICAL, [], [candidates, probs], [out], decision)
    return out


def compute_location_candidates(sch: Any, sref: Any) -> tuple[list[Any], bool]:
    """(candidate loop srefs outermost first, whether inlining is offered) for a block sref."""
    block = sref.stmt
    scope = scope_block(sref)
    written = {id(w.buffer) for w in block.writes}
    consumers = [r for r in child_block_realizes(scope.stmt.body)
                 if r.block is not block and any(id(x.buffer) in written for x in r.block.reads)]
    func = sch.mod[sref.func_name]
    can_inline = (
        bool(consumers) and all(iv.kind == "S" for iv in block.iter_vars) and block.init is None
        and isinstance(block.body, BufferStore) and len(block.writes) == 1
        and not any(p is block.writes[0].buffer for p in func.params)
    )
    if not consumers:
        return [], can_inline
    common: Optional[list[Any]] = None
    for r in consumers:
        loops = enclosing_loops(sch.state.sref_of(sref.func_name, r.block))
        if common is None:
            common = loops
        else:
            k = 0
            while k < min(len(common), len(loops)) and common[k] is loops[k]:
                k += 1
            common = common[:k]
    candidates = [c for c in (common or []) if not is_ancestor(c, sref)]
    return candidates, can_inline


def sample_compute_location(sch: Any, block: BlockRV, decision: Optional[int] = None) -> LoopRV:
    """Sample where ``block`` could be computed: a loop, or the root/inline markers.

    Example:
        >>> # loc = sch.sample_compute_location(b0)   # sch.get(loc) is a For, "root" or "inline"
    """
    sref = sch._block(block, "sample_compute_location")
    loops, can_inline = compute_location_candidates(sch, sref)
    choices = [-1] + ([-2] if can_inline else []) + list(range(len(loops)))
    if decision is None:
        decision = choices[int(sch.rng.integers(len(choices)))]
    decision = int(decision)
    if decision not in choices:
        sch._raise(f"sample_compute_location: decision {decision} is not available for block "
                   f"{sref.stmt.name_hint!r}", f"available: {choices} (-1 root, -2 inline, k: k-th candidate loop)",
                   sref.func_name, [sref.stmt])
    value = ROOT_MARK if decision == -1 else INLINE_MARK if decision == -2 else loops[decision]
    out = sch._new_rv(LoopRV, value)
    sch._record(SAMPLE_COMPUTE_LOCATION, [block], [], [out], decision)
    return out
