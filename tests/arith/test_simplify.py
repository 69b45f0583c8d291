"""Rewrite cases of the simplifier: split/fuse index chains, min/max, comparisons, logic, casts.

Each case checks structural equality with the expected expression, that the result evaluates like
the input on sample points inside the bound ranges, and that simplification is idempotent.
"""
import itertools

import pytest

from ingot import arith
from ingot.ir import (
    And, Cast, Div, IntImm, Let, Max, Min, Mod, Not, Or, Range, Select, SizeVar, Var,
    assert_structural_equal, const, convert,
)
from ingot.tir.op import if_then_else

from arith_testutil import evaluate

x, y, z = Var("x"), Var("y"), Var("z")
i, j, k = Var("i"), Var("j"), Var("k")
n = SizeVar("n")
RANGES = {i: (0, 8), j: (0, 16), k: (0, 4)}
FREE = {x: (-9, 10), y: (-5, 6), z: (0, 3)}
T, F = IntImm("bool", 1), IntImm("bool", 0)


def make_analyzer():
    ana = arith.Analyzer()
    for var, (lo, hi) in RANGES.items():
        ana.bind(var, Range(lo, hi))
    return ana


f = Var("f")
CASES = [
    # split / fuse index chains
    ((i * 16 + j) // 16, i),
    ((i * 16 + j) % 16, j),
    ((i * 16 + j) // 4, i * 4 + j // 4),
    ((i * 16 + j) % 4, j % 4),
    ((i * 4 + k) // 4, i),
    ((i * 4 + k) % 4, k),
    (((i * 4 + k) // 2) % 2, k // 2),
    ((j % 8) // 8, 0),
    (j // 16, 0),
    (j % 16, j),
    ((j + 16) // 16, 1),
    ((j + 16) % 16, j),
    ((k + 4) // 4, 1),
    ((k + 4) % 4, k),
    (x // 4 * 4 + x % 4, x),
    (x // 4 * 4 + x % 4 + 1, x + 1),
    ((x // 4 % 2) * 4 + x % 4, x % 8),
    (x // 8 * 2 + x // 4 % 2, x // 4),
    (f // 16 * 16 + (f // 4 % 4) * 4 + f % 4, f),
    ((i * 16 + j) // 4 * 4 + (i * 16 + j) % 4, i * 16 + j),
    (x // 4 // 8, x // 32),
    ((x % 16) // 4, x // 4 % 4),
    (x % 16 % 4, x % 4),
    ((x * 4) // 8, x // 2),
    ((x * 4 + 8) // 8, x // 2 + 1),
    ((x * 4) % 8, x % 2 * 4),
    ((x * 8 + y * 4) % 8, y % 2 * 4),
    ((x * 6) // 3, x * 2),
    ((x * 6 + y * 3) % 3, 0),
    ((x * 6 + 1) % 3, 1),
    ((x * 16 + y) // 16, x + y // 16),
    (x % 1, 0),
    (x // 1, x),
    (Div(i, 4), i // 4),
    (Mod(i + 4, 4), i % 4),
    (Div(j * 2, 2), j),
    (j // 4 // 4, 0),
    # linear algebra
    (x - x, 0),
    (x + y - x, y),
    ((x + 1) * 2 - 2, x * 2),
    (x * 2 + x * 3, x * 5),
    ((x + y) * (x - y), x * x - y * y),
    (x * 0 + y, y),
    (x * 1, x),
    (3 + x - 3, x),
    (0 - x + x * 2, x),
    (i * 4 + j - i * 4, j),
    # min / max
    (Min(x, x), x),
    (Min(i, 8), i),
    (Max(i, 0), i),
    (Min(i, -1), -1),
    (Max(x + 1, x), x + 1),
    (Min(x + 1, x + 3), x + 1),
    (Min(Min(x, 3), 5), Min(x, 3)),
    (Max(Max(x, 3), 5), Max(x, 5)),
    (Min(3, x), Min(x, 3)),
    (Max(j // 4, 3), 3),
    (Min(j % 4, 3), j % 4),
    (Min(Min(x, y), y), Min(x, y)),
    (Min(i * 16 + j, 128), i * 16 + j),
    # comparisons
    (i < 8, T),
    (i < 7, i < 7),
    (i >= 0, T),
    (i * 16 + j < 128, T),
    (i * 16 + j < 127, i * 16 + j < 127),
    (x + 1 < x + 2, T),
    (x * 2 == 1, F),
    (x * 2 != 1, T),
    (i > j, j < i),
    (x - 1 < y, x < y + 1),
    (j // 4 < 4, T),
    (j % 4 >= 4, F),
    (n >= 0, T),
    # logic
    (And(i < 8, x < y), x < y),
    (Or(i < 8, x < y), T),
    (Not(x < y), y <= x),
    (And(x < y, Not(x < y)), F),
    (Or(x < y, Not(x < y)), T),
    (Not(Not(x < y)), x < y),
    # select / if_then_else
    (Select(i < 8, x, y), x),
    (if_then_else(i >= 8, x, y), y),
    (Select(x < y, z, z), z),
    (Select(x < y, (i * 4 + k) // 4, i), i),
    # casts and let
    (Cast("int64", IntImm("int32", 3)), IntImm("int64", 3)),
    (Cast("int32", Cast("int64", x)), x),
    (Let(z, IntImm("int32", 3), z + 1), 4),
]


@pytest.mark.parametrize("expr, expected", CASES, ids=[str(c[0]) for c in CASES])
def test_rewrite(expr, expected):
    ana = make_analyzer()
    expr, expected = convert(expr), (convert(expected) if not isinstance(expected, int) else expected)
    expected = expected if not isinstance(expected, int) else const(expected, expr.dtype)
    result = ana.simplify(expr)
    assert_structural_equal(result, expected)
    # idempotent
    assert_structural_equal(ana.simplify(result), result)
    # sound on sample points inside the bound ranges
    variables = [v for v in (x, y, z, i, j, k, f, n) if v is not z or not isinstance(expr, Let)]
    ranges = {**FREE, **RANGES, f: (0, 40), n: (0, 5)}
    samples = itertools.islice(itertools.product(*[range(*ranges[v]) for v in variables]), 0, None, 97)
    for point in itertools.islice(samples, 60):
        env = dict(zip(variables, point))
        if not isinstance(expr, Let):
            assert evaluate(result, env) == evaluate(expr, env), (expr, result, env)


def test_at_least_sixty_cases():
    assert len(CASES) >= 60


def test_int64_vars_keep_their_dtype():
    a, b = Var("a", "int64"), Var("b", "int64")
    ana = arith.Analyzer()
    ana.bind(b, Range(IntImm("int64", 0), IntImm("int64", 16)))
    assert_structural_equal(ana.simplify((a * 16 + b) // 16), a)
    out = ana.simplify((a * 16 + b) % 16 + 1)
    assert str(out.dtype) == "int64"
    assert_structural_equal(out, b + IntImm("int64", 1))


def test_float_expressions_are_not_reassociated():
    a, b = Var("a", "float32"), Var("b", "float32")
    ana = arith.Analyzer()
    e = (a + b) - b
    assert_structural_equal(ana.simplify(e), e)
    assert_structural_equal(ana.simplify(const(2.0) * const(3.0) + a), const(6.0) + a)


def test_bind_to_expression_substitutes():
    ana = arith.Analyzer()
    ana.bind(i, Range(0, 8))
    ana.bind(z, i * 4)
    assert_structural_equal(ana.simplify(z // 4), i)
    assert ana.const_int_bound(z).max_value == 28


def test_rebind_conflict_raises_and_override_works():
    ana = arith.Analyzer()
    ana.bind(i, Range(0, 8))
    ana.bind(i, Range(0, 8))  # same range: fine
    with pytest.raises(ValueError, match="already bound"):
        ana.bind(i, Range(0, 4))
    ana.bind(i, Range(0, 4), allow_override=True)
    assert ana.can_prove(i < 4)


def test_constraint_scope_predicate():
    ana = make_analyzer()
    with ana.constraint_scope(i * 4 + k < 10):
        assert ana.can_prove(i * 4 + k <= 9)
        assert ana.can_prove(k + i * 4 < 10)  # term order does not matter
        assert ana.const_int_bound(i * 4 + k).max_value == 9
        assert ana.can_prove(i < 3)
    assert not ana.can_prove(i * 4 + k < 10)
    with ana.constraint_scope(And(x >= 2, x * 4 < 20)):
        assert ana.can_prove(x < 5)
        assert ana.can_prove(x > 1)
        assert_structural_equal(ana.simplify(Max(x, 1)), x)


def test_can_prove_is_sound_for_unknowns():
    ana = arith.Analyzer()
    assert not ana.can_prove(x < y)
    assert not ana.can_prove(x * x >= 1)
    assert ana.can_prove_equal((x + 1) * (x + 1), x * x + x * 2 + 1)
    assert not ana.can_prove_equal(x // 2 * 2, x)


def test_vector_broadcast_ramp_rules():
    from ingot.ir import Broadcast, Ramp

    ana = make_analyzer()
    e = Ramp(i * 4, 1, 4) + Broadcast(j, 4)
    assert_structural_equal(ana.simplify(e), Ramp(i * 4 + j, 1, 4))
    assert_structural_equal(ana.simplify(Broadcast(x, 4) * Broadcast(IntImm("int32", 2), 4)),
                            Broadcast(x * 2, 4))
