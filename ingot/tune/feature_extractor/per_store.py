"""`PerStoreFeature`: TVM-style per-store features of a scheduled program, pooled per candidate.

Note: for every BufferStore (outside reduction ``init``s) of the scheduled program we compute one
vector from its context — arithmetic op counts times the iteration count, the loop structure
(depth, extents, parallel / vectorized / unrolled extents, unroll pragmas), and for each buffer
access (the store and up to ``max_reads`` loads, biggest first) its strides with respect to the
innermost loops, the bytes it touches under the innermost k loops (cache footprint) and its
reuse (iterations under which the address does not move). Counts go through ``log2(1 + x)``.
A candidate's vector is the features of its heaviest store (most FLOPs) followed by sums over
all stores, so every candidate has the same length. Strides and footprints come from
evaluating the flattened index at two points of the loop space (finite differences), which
handles the ``floordiv``/``floormod`` of split/fuse without symbolic analysis. Results are
memoized by the module's structural hash.

Example:
    >>> # f = PerStoreFeature(); x = f.extract_one(sch.mod); x.shape == (f.dim,)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ingot.ir import expr as E
from ingot.ir.functor import Visitor, collect_loads
from ingot.tir.stmt import ForKind

from ..utils import LoopInfo, StoreSite, collect_store_sites, count_float_ops, eval_int
from .base import FeatureExtractor

_FOOTPRINT_LEVELS = (1, 2, 3, 4, 6, 8)
_PER_ACCESS = 4 + len(_FOOTPRINT_LEVELS)
_STORE_BASE = 31
L1_BYTES = 48 * 1024          # per-core data cache of the reference Xeon (the fit levels below)
L2_BYTES = 2 * 1024 * 1024


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


class PerStoreFeature(FeatureExtractor):
    """Per-store features pooled into one vector per candidate (see the module note).

    ``max_reads``: loads described per store (the largest by footprint).

    Example:
        >>> PerStoreFeature().dim
        77
    """

    def __init__(self, max_reads: int = 3, cache_size: int = 20000):
        self.max_reads = int(max_reads)
        self.store_dim = _STORE_BASE + (1 + self.max_reads) * _PER_ACCESS
        self.dim = self.store_dim + 6
        self._cache: dict = {}
        self._cache_size = cache_size

    def extract_one(self, mod: Any, key: "str | None" = None) -> np.ndarray:
        """Features of one scheduled module (``key``: its structural hash when already known)."""
        from ingot.ir import structural_hash
        from ingot.tir.function import PrimFunc

        key = key or structural_hash(mod)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        funcs = [mod] if isinstance(mod, PrimFunc) else [f for _, f in mod.items() if isinstance(f, PrimFunc)]
        stores = []
        for func in funcs:
            for site in collect_store_sites(func):
                if not site.in_init:
                    stores.append(self._store_features(site))
        out = np.zeros(self.dim, "float32")
        if stores:
            mat = np.stack(stores)
            main = int(np.argmax(mat[:, 0]))  # the heaviest store (log flops)
            out[: self.store_dim] = mat[main]
            tail = np.exp2(mat[:, :5]) - 1.0  # raw flops, add, mul, div, int ops
            out[self.store_dim: self.store_dim + 5] = [_log(v) for v in tail.sum(axis=0)]
            out[self.store_dim + 5] = len(stores)
        if len(self._cache) >= self._cache_size:
            self._cache.clear()
        self._cache[key] = out
        return out

    # -- one store ---------------------------------------------------------------------------------
    def _store_features(self, site: StoreSite) -> np.ndarray:
        loops = site.loops
        trips = float(math.prod(l.extent for l in loops)) if loops else 1.0
        c = count_float_ops(site.store.value)
        int_ops = sum(_count_int_ops(i) for i in site.store.indices)
        flops = c["add"] + c["mul"] + c["div"] + c["other"]
        par = [l.extent for l in loops if l.kind == ForKind.PARALLEL]
        vec = [l.extent for l in loops if l.kind == ForKind.VECTORIZED]
        unr = [l.extent for l in loops if l.kind == ForKind.UNROLLED]
        pragma = max([int(l.annotations.get("pragma_auto_unroll_max_step", 0) or 0) for l in loops] + [0])
        block_unroll = max([int(b.annotations.get("meta_schedule.unroll_explicit", 0) or 0) for b in site.blocks] + [0])
        inner = loops[-1].extent if loops else 1
        scope = site.store.buffer.scope if hasattr(site.store.buffer, "scope") else "global"
        base = [
            _log(flops * trips), _log(c["add"] * trips), _log(c["mul"] * trips), _log(c["div"] * trips),
            _log(int_ops * trips), _log(trips), len(loops), _log(math.prod(par) if par else 0),
            _log(math.prod(vec) if vec else 0), _log(math.prod(unr) if unr else 0), _log(pragma),
            _log(block_unroll), _log(inner), float(sum(1 for l in loops if l.kind == ForKind.SERIAL)),
            float(scope not in ("global", "")), float(bool(vec) and loops[-1].kind == ForKind.VECTORIZED),
            _log(_outer_parallel_extent(loops)),
        ]
        base += self._structure(site, loops, flops)
        loads = collect_loads(site.store.value)
        described = [self._access(site.store.buffer, site.store.indices, site, True)]
        described += [self._access(ld.buffer, ld.indices, site, False) for ld in loads]
        base += _cache_fit(loops, flops, [(moves, size) for _, moves, size in described])
        accesses = [described[0][0]]
        reads = sorted((f for f, _, _ in described[1:]), key=lambda v: -v[4])[: self.max_reads]
        accesses += reads
        while len(accesses) < 1 + self.max_reads:
            accesses.append([0.0] * _PER_ACCESS)
        return np.array(base + [x for a in accesses for x in a], "float32")

    def _structure(self, site: StoreSite, loops: "list[LoopInfo]", flops: int) -> list:
        """Register blocking and work split (what decides GEMM-like speed on a CPU).

        The register tile is the loops inside the innermost reduce loop (their iterations
        reuse each loaded value: accumulators = their product); the cache tile is the loops inside
        the outermost reduce loop; loads per FMA of the tile and how evenly the parallel loop
        divides among the cores complete the picture.
        """
        from ingot.ir.functor import collect_vars

        reduce_vars: set = set()
        if site.blocks:
            block = site.blocks[-1]
            for iv in block.iter_vars:
                if iv.kind == "R" and iv.var in site.bindings:
                    reduce_vars |= {id(v) for v in collect_vars(site.bindings[iv.var])}
        r_pos = [k for k, l in enumerate(loops) if id(l.var) in reduce_vars and l.extent > 1]
        inner_r = r_pos[-1] if r_pos else len(loops)
        outer_r = r_pos[0] if r_pos else len(loops)
        reg_tile = math.prod(l.extent for l in loops[inner_r + 1:])
        cache_tile = math.prod(l.extent for l in loops[outer_r + 1:])
        # distinct loads under the register tile: each access moves with some of its loops
        loads = collect_loads(site.store.value)
        per_load = []
        for ld in loads:
            per_load.append(self._moving(ld.buffer, ld.indices, site, loops[inner_r + 1:]))
        loaded = sum(per_load) or 1
        par = [l.extent for l in loops if l.kind == ForKind.PARALLEL]
        par_ext = math.prod(par) if par else 1
        cores = max(1, int(getattr(self, "num_cores", 2)))
        balance = par_ext / (math.ceil(par_ext / cores) * cores)
        inner_r_ext = loops[inner_r].extent if inner_r < len(loops) else 1
        return [_log(reg_tile), _log(cache_tile), _log(inner_r_ext), float(len(loops) - inner_r - 1),
                _log(flops * reg_tile / loaded), float(balance), float(par_ext >= cores),
                float(reg_tile <= 32 * 16)]

    def _moving(self, buffer, indices, site: StoreSite, sub: "list[LoopInfo]") -> int:
        """Elements an access touches while the loops ``sub`` run (product of the extents of the
        loops that move its address)."""
        strides = _row_major_strides(buffer)
        base_env: dict = {}

        def flat(env):
            return sum(eval_int(ix, env, site.bindings) * s for ix, s in zip(indices, strides))

        base = flat(base_env)
        out = 1
        for l in sub:
            if l.extent > 1 and flat({l.var: 1}) != base:
                out *= l.extent
        return out

    def _access(self, buffer, indices, site: StoreSite, is_write: bool) -> tuple:
        """(features, for each loop whether it moves the address, item size in bytes)."""
        loops = site.loops
        strides = _row_major_strides(buffer)
        itemsize = max(1, _itemsize(buffer))

        def flat(env):
            return sum(eval_int(ix, env, site.bindings) * s for ix, s in zip(indices, strides))

        base = flat({})
        per_loop = []
        for l in loops:
            per_loop.append(abs(flat({l.var: 1}) - base) if l.extent > 1 else 0)
        inner_stride = per_loop[-1] if per_loop else 0
        # innermost loop whose extent is > 1 (unit loops from splits say nothing)
        eff = [s for s, l in zip(per_loop, loops) if l.extent > 1]
        eff_stride = eff[-1] if eff else 0
        feats = [float(is_write), _log(inner_stride), float(eff_stride == 1), float(eff_stride == 0)]
        # footprint (elements) under the innermost k loops, and reuse (iterations not moving the address)
        for k in _FOOTPRINT_LEVELS:
            sub = loops[-k:] if k <= len(loops) else loops
            strides_sub = per_loop[-k:] if k <= len(loops) else per_loop
            moving = math.prod(l.extent for l, s in zip(sub, strides_sub) if s != 0)
            feats.append(_log(moving * itemsize))
        return feats, [s != 0 and l.extent > 1 for s, l in zip(per_loop, loops)], itemsize


def _cache_fit(loops: "list[LoopInfo]", flops: int, accesses: "list[tuple[list, int]]") -> list:
    """Roofline-like features of one store: how many innermost loops keep the data they touch
    (all accesses together) within L1 / L2, the arithmetic intensity (FLOPs per byte touched)
    of those loop nests, and the bytes that must come from beyond L1 / L2 (the nest's footprint
    times the iterations of the loops outside it: no reuse assumed across them).

    Example:
        >>> # _cache_fit(site.loops, 2, [(moves_A, 4), (moves_B, 4), (moves_C, 4)])
    """
    n = len(loops)
    # footprint[d]: bytes touched by the loops[d:] (d = n: one iteration)
    footprint = []
    for d in range(n + 1):
        total = 0
        for moves, size in accesses:
            total += size * math.prod(l.extent for l, m in zip(loops[d:], moves[d:]) if m)
        footprint.append(total)
    trips_below = [math.prod(l.extent for l in loops[d:]) for d in range(n + 1)]
    out = []
    for limit in (L1_BYTES, L2_BYTES):
        d = n
        while d > 0 and footprint[d - 1] <= limit:
            d -= 1
        outer = math.prod(l.extent for l in loops[:d])
        out += [float(n - d), _log(flops * trips_below[d] / max(1, footprint[d])), _log(footprint[d] * outer)]
    return out


def _outer_parallel_extent(loops: "list[LoopInfo]") -> int:
    ext = 1
    for l in loops:
        if l.kind != ForKind.PARALLEL:
            break
        ext *= l.extent
    return ext if loops and loops[0].kind == ForKind.PARALLEL else 0


def _row_major_strides(buffer) -> list:
    dims = [E.as_const_int(d) or 1 for d in buffer.shape]
    strides, acc = [], 1
    for d in reversed(dims):
        strides.append(acc)
        acc *= d
    return list(reversed(strides))


def _itemsize(buffer) -> int:
    dtype = buffer.dtype
    bits = getattr(dtype, "bits", None)
    lanes = getattr(dtype, "lanes", 1) or 1
    if bits is None:
        import numpy as _np

        return _np.dtype(str(dtype)).itemsize
    return max(1, bits // 8) * lanes


def _count_int_ops(expr) -> int:
    n = [0]

    class _V(Visitor):
        def generic_visit(self, node):
            if isinstance(node, (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Mod)):
                n[0] += 1
            super().generic_visit(node)

    _V().visit(expr)
    return n[0]
