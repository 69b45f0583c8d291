"""The lowering passes' analysis shortcuts (`ingot.tir.transform._arith`) give exactly what the
full analysis gives: the fixed-point memo of `Analyzer.simplify` never serves a result simplified
under other variable ranges, and the affine fast path of `Analyzer.bounds` equals interval
arithmetic."""
from __future__ import annotations

import random

import pytest

from ingot import arith
from ingot.ir import Var
from ingot.ir.expr import FloorDiv, IntImm, Range
from ingot.ir.structural import structural_equal
from ingot.tir.transform._arith import Analyzer


def _fresh_simplify(expr, ranges):
    ana = arith.Analyzer()
    for var, rng in ranges.items():
        ana.bind(var, rng)
    return ana.simplify(expr)


def test_simplified_expression_is_served_back_under_the_same_ranges():
    i, j = Var("i"), Var("j")
    ana = Analyzer()
    ana.bind(i, Range(0, 64))
    ana.bind(j, Range(0, 16))
    once = ana.simplify((i * 16 + j) // 16 * 16 + j)
    assert str(once) == "i * 16 + j"
    other = Analyzer()  # another pass's analyzer, same ranges: the memo serves the same object
    other.bind(i, Range(0, 64))
    other.bind(j, Range(0, 16))
    assert other.simplify(once) is once


@pytest.mark.parametrize("rebind", [False, True])
def test_changed_ranges_are_not_served_a_stale_result(rebind):
    i, j = Var("i"), Var("j")
    wide = Analyzer()
    wide.bind(i, Range(0, 64))
    wide.bind(j, Range(0, 64))
    result = wide.simplify(j // 16 * 16 + i)  # j // 16 is not 0 while j < 64
    assert "j // 16" in str(result)
    if rebind:  # the same analyzer, told less about j afterwards
        narrow = wide
        narrow.bind(j, Range(0, 16))
    else:
        narrow = Analyzer()
        narrow.bind(i, Range(0, 64))
        narrow.bind(j, Range(0, 16))
    again = narrow.simplify(result)
    assert str(again) == "i"
    assert structural_equal(again, _fresh_simplify(result, {i: Range(0, 64), j: Range(0, 16)}))


def test_an_unbound_variable_later_bound_is_simplified_again():
    i = Var("i")
    ana = Analyzer()
    result = ana.simplify(i // 8)
    assert str(result) == "i // 8"
    ana.bind(i, Range(0, 8))
    assert str(ana.simplify(result)) == "0"


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
