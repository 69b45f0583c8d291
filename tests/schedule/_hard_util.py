"""Helpers for the tests of the hard schedule primitives: IR builders for expected functions,
trace round trips through JSON, and numeric checks through `ingot.build` against numpy."""
from __future__ import annotations

import json

import numpy as np

from ingot.ir import IterVar, Range, Var, assert_structural_equal
from ingot.tir import Block, BlockRealize, For, ForKind, PrimFunc, SeqStmt
from ingot.tir.analysis import infer_block_access_regions
from ingot.tir.schedule import Schedule, Trace


def block(name, iters, body, init=None, alloc=(), predicate=True, kinds=None):
    """A realized block: ``iters`` is [(var_name, extent, binding)], kinds a string like "SSR"."""
    ivs, vals = [], []
    for k, (vname, extent, value) in enumerate(iters):
        kind = kinds[k] if kinds else "S"
        ivs.append(IterVar(Range.from_min_extent(0, extent), Var(vname), kind))
        vals.append(value)
    vars_ = [iv.var for iv in ivs]
    b = Block(ivs, [], [], name, body(*vars_), init=init(*vars_) if init else None, alloc_buffers=alloc)
    reads, writes = infer_block_access_regions(b)
    return BlockRealize(vals, predicate, b.replace(reads=tuple(reads), writes=tuple(writes)))


def loops(spec, body_fn, kind=ForKind.SERIAL):
    """Nested serial loops: ``spec`` [(name, extent)]; ``body_fn(*loop_vars)`` builds the body."""
    vars_ = [Var(n) for n, _ in spec]
    body = body_fn(*vars_)
    for v, (_, extent) in reversed(list(zip(vars_, spec))):
        body = For(v, 0, extent, kind, body)
    return body


def func(params, *stmts, alloc=()):
    root = BlockRealize([], True, Block([], [], [], "root", SeqStmt.flatten(*stmts), alloc_buffers=alloc))
    return PrimFunc(params, root, {"global_symbol": "main", "tir.noalias": True})


def roundtrip(sch, original):
    """Replay ``sch``'s trace (through JSON text) on a fresh schedule of ``original``; compare."""
    text = json.dumps(sch.trace.as_json())
    fresh = Schedule(original)
    Trace.from_json(text).apply_to_schedule(fresh)
    assert_structural_equal(fresh.mod, sch.mod)
    # The printed trace is valid Python too.
    assert str(sch.trace)
    return fresh


def assert_same_numbers(original, scheduled, seed=0, rtol=1e-5, atol=1e-5):
    """Build both with ingot.build and compare their outputs on random inputs."""
    import ingot

    rng = np.random.default_rng(seed)
    f0 = original
    f1 = scheduled["main"] if hasattr(scheduled, "functions") or not isinstance(scheduled, PrimFunc) else scheduled
    args = [rng.standard_normal([int(d) for d in p.shape]).astype(str(p.dtype)) for p in f0.params]
    out0 = [a.copy() for a in args]
    out1 = [a.copy() for a in args]
    ingot.build(f0)["main"](*out0)
    ingot.build(f1)["main"](*out1)
    for x, y in zip(out0, out1):
        np.testing.assert_allclose(y, x, rtol=rtol, atol=atol)
