"""Randomized soundness: simplify(e) evaluates like e at every point of the bound ranges,
const_int_bound contains every value, and can_prove never proves something false."""
import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingot import arith
from ingot.ir import IntImm, Max, Min, Range, Select, Var

from arith_testutil import evaluate

a, b, c = Var("a"), Var("b"), Var("c")
RANGES = {a: (-4, 5), b: (0, 12), c: (1, 4)}  # c is a positive divisor
POINTS = list(itertools.product(*[range(lo, hi) for lo, hi in RANGES.values()]))[::3]


def _const(lo=-6, hi=6):
    return st.integers(lo, hi).map(lambda v: IntImm("int32", v))


leaves = st.one_of(st.sampled_from([a, b, c]), _const())


def _extend(children):
    binary = st.tuples(st.sampled_from(["add", "sub", "mul", "min", "max"]), children, children)
    divs = st.tuples(st.sampled_from(["floordiv", "floormod"]), children,
                     st.one_of(st.integers(1, 16).map(lambda v: IntImm("int32", v)), st.just(c)))
    select = st.tuples(st.just("select"), st.tuples(children, children), st.tuples(children, children))
    return st.one_of(binary, divs, select).map(_build)


def _build(t):
    op, x, y = t
    if op == "select":
        (p, q), (u, v) = x, y
        return Select(p < q, u, v)
    return {
        "add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y, "min": lambda: Min(x, y),
        "max": lambda: Max(x, y), "floordiv": lambda: x // y, "floormod": lambda: x % y,
    }[op]()


exprs = st.recursive(leaves, _extend, max_leaves=8)


def _analyzer():
    ana = arith.Analyzer()
    for var, (lo, hi) in RANGES.items():
        ana.bind(var, Range(lo, hi))
    return ana


def _envs():
    for point in POINTS:
        yield dict(zip(RANGES, point))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs)
def test_simplify_preserves_value(e):
    if not isinstance(e, Var) and not hasattr(e, "dtype"):
        return
    ana = _analyzer()
    s = ana.simplify(e)
    bound = ana.const_int_bound(e)
    for env in _envs():
        expected = evaluate(e, env)
        assert evaluate(s, env) == expected, (str(e), str(s), env)
        assert bound.min_value <= expected <= bound.max_value, (str(e), bound, env)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs, exprs, st.sampled_from(["lt", "le", "eq", "ne"]))
def test_can_prove_is_sound(x, y, cmp):
    cond = {"lt": lambda: x < y, "le": lambda: x <= y, "eq": lambda: (x == y).asobject()
            if hasattr(x == y, "asobject") else x == y, "ne": lambda: (x != y).asobject()
            if hasattr(x != y, "asobject") else x != y}[cmp]()
    if isinstance(cond, IntImm):
        return
    ana = _analyzer()
    if ana.can_prove(cond):
        for env in _envs():
            assert evaluate(cond, env) == 1, (str(cond), env)
    s = ana.simplify(cond)
    for env in _envs():
        assert evaluate(s, env) == evaluate(cond, env), (str(cond), str(s), env)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 5))
def test_split_fuse_roundtrip(outer, inner, factor):
    # fuse (i, j) into f, split f by factor, then rebuild i and j from (fo, fi).
    fo, fi = Var("fo"), Var("fi")
    ana = arith.Analyzer()
    extent = outer * inner
    ana.bind(fo, Range(0, -(-extent // factor)))
    ana.bind(fi, Range(0, factor))
    fused = fo * factor + fi
    i_expr, j_expr = ana.simplify(fused // inner), ana.simplify(fused % inner)
    rebuilt = ana.simplify(i_expr * inner + j_expr)
    assert ana.can_prove_equal(rebuilt, fused)
    for vo in range(-(-extent // factor)):
        for vi in range(factor):
            env = {fo: vo, fi: vi}
            assert evaluate(i_expr, env) == (vo * factor + vi) // inner
            assert evaluate(j_expr, env) == (vo * factor + vi) % inner
