"""The affine fast path of the lowering passes' `Analyzer.bounds` (`ingot.tir.transform._arith`)
gives exactly what interval arithmetic gives, and leaves every other index to it."""
from __future__ import annotations

import random

from ingot.ir import Var
from ingot.ir.expr import FloorDiv, IntImm, Range
from ingot.ir.structural import structural_equal
from ingot.tir.transform._arith import Analyzer


def _random_affine(rng, relaxed, outer):
    terms = []
    for v in relaxed + outer:
        if rng.random() < 0.8:
            terms.append(v * rng.choice([-7, -3, -1, 1, 2, 4, 16, 56]))
    if outer and rng.random() < 0.5:
        terms.append(FloorDiv(outer[0], IntImm("int32", rng.choice([2, 4, 8]))))
    expr = IntImm("int32", rng.randint(-20, 20))
    rng.shuffle(terms)
    for t in terms:
        expr = expr + t
    return expr


def test_affine_bounds_equal_interval_arithmetic():
    rng = random.Random(17)
    for _ in range(200):
        relaxed = [Var(f"r{k}") for k in range(rng.randint(1, 3))]
        outer = [Var(f"o{k}") for k in range(rng.randint(0, 2))]
        ana = Analyzer()
        for v in outer:
            ana.bind(v, Range(0, rng.randint(1, 9)))
        relax = {v: Range.from_min_extent(rng.randint(-3, 3), rng.randint(1, 8)) for v in relaxed}
        expr = _random_affine(rng, relaxed, outer)
        fast = ana._affine_bounds(expr, relax)
        full = ana._int_set_bounds(expr, relax)
        assert fast is not None and full is not None, expr
        for a, b in zip(fast, full):
            sa, sb = ana.simplify(a), ana.simplify(b)
            assert str(sa) == str(sb) and structural_equal(sa, sb), (str(expr), str(a), str(b))


def test_non_affine_index_takes_interval_arithmetic():
    i, j = Var("i"), Var("j")
    ana = Analyzer()
    ana.bind(i, Range(0, 4))
    relax = {j: Range(0, 16)}
    assert ana._affine_bounds((i * 16 + j) // 4, relax) is None  # a relaxed variable inside an atom
    assert ana._affine_bounds(i * j, relax) is None
    assert ana._affine_bounds(j, {j: Range(0, i + 1)}) is None  # a symbolic range
    lo, hi = ana.bounds((i * 16 + j) // 4, relax)
    assert (str(lo), str(hi)) == ("i * 4", "i * 4 + 3")
