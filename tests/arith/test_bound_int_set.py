"""const_int_bound, IntSet and region relaxation."""
import pytest

from ingot import arith
from ingot.ir import Cast, IntImm, Max, Min, Range, Select, SizeVar, Var, assert_structural_equal

i, j, k, x = Var("i"), Var("j"), Var("k"), Var("x")


def _ana():
    ana = arith.Analyzer()
    ana.bind(i, Range(0, 8))
    ana.bind(j, Range(0, 16))
    return ana


@pytest.mark.parametrize("expr, lo, hi", [
    (i * 16 + j, 0, 127),
    (i - j, -15, 7),
    (i * -2, -14, 0),
    ((i * 16 + j) // 4, 0, 31),
    (j % 5, 0, 4),
    (x % 8, 0, 7),
    (Min(i, j), 0, 7),
    (Max(i, 3), 3, 7),
    (Select(i < 4, i, 100), 0, 100),
    (Cast("int8", j), 0, 15),
    (Cast("int8", j * 100), -128, 127),
    (i * j, 0, 105),
    (SizeVar("n") + 1, 1, 2**31 - 1),
])
def test_const_int_bound(expr, lo, hi):
    b = _ana().const_int_bound(expr)
    assert (b.min_value, b.max_value) == (lo, hi)


def test_unbounded_var_uses_dtype_and_sentinels():
    b = arith.Analyzer().const_int_bound(Var("w", "int64"))
    assert b.min_value == arith.ConstIntBound.NEG_INF and b.max_value == arith.ConstIntBound.POS_INF
    b32 = arith.Analyzer().const_int_bound(x)
    assert (b32.min_value, b32.max_value) == (-(2**31), 2**31 - 1)


def test_symbolic_range_bind():
    n = SizeVar("n")
    ana = arith.Analyzer()
    ana.bind(n, Range(1, 65))
    ana.bind(k, Range(0, n))
    assert ana.const_int_bound(k).max_value == 63


def test_int_set_relaxes_inner_loop():
    s = _ana().int_set(i * 4 + k, {k: Range(0, 4)})
    assert_structural_equal(s.min_value, i * 4)
    assert_structural_equal(s.max_value, i * 4 + 3)
    assert not s.is_single_point()


def test_int_set_div_mod():
    ana = arith.Analyzer()
    io, ii = Var("io"), Var("ii")
    s = ana.int_set((io * 16 + ii) // 4, {ii: Range(0, 16)})
    assert_structural_equal(s.min_value, io * 4)
    assert_structural_equal(s.max_value, io * 4 + 3)
    m = ana.int_set((io * 16 + ii) % 4, {ii: Range(0, 16)})
    assert (m.min_value.value, m.max_value.value) == (0, 3)
    full = ana.int_set(io * 16 + ii, {ii: Range(0, 16), io: Range(0, 4)})
    assert (full.min_value.value, full.max_value.value) == (0, 63)


def test_int_set_with_int_set_domain_and_point():
    ana = arith.Analyzer()
    s = ana.int_set(x * 2 + 1, {x: arith.IntSet.interval(3, 5)})
    assert (s.min_value.value, s.max_value.value) == (7, 11)
    p = ana.int_set(i + 1)
    assert p.is_single_point()


def test_int_set_operations():
    a = arith.IntSet.interval(0, 7)
    b = arith.IntSet.interval(4, 12)
    u, n = a.union(b), a.intersect(b)
    assert (u.min_value.value, u.max_value.value) == (0, 12)
    assert (n.min_value.value, n.max_value.value) == (4, 7)
    r = u.to_range()
    assert (r.min.value, r.extent.value) == (0, 13)
    e = arith.IntSet.everything()
    assert e.min_value is arith.neg_inf and e.max_value is arith.pos_inf
    with pytest.raises(ValueError, match="unbounded"):
        e.to_range()
    assert a.union(e).is_everything()


def test_relax_region():
    io, ii, jo, ji = Var("io"), Var("ii"), Var("jo"), Var("ji")
    region = [Range.from_min_extent(io * 4 + ii, 1), Range.from_min_extent(jo * 8 + ji, 2)]
    out = arith.relax_region(region, {ii: Range(0, 4), ji: Range(0, 8)})
    assert_structural_equal(out[0].min, io * 4)
    assert out[0].extent.value == 4
    assert_structural_equal(out[1].min, jo * 8)
    assert out[1].extent.value == 9


def test_relax_region_unbounded_raises():
    with pytest.raises(ValueError, match="unbounded"):
        w = Var("w", "int64")
        arith.relax_region([Range.from_min_extent(w * w, IntImm("int64", 1))], {w: arith.IntSet.everything()})


def test_union_region():
    io = Var("io")
    out = arith.union_region([[Range.from_min_extent(io * 4, 4)], [Range.from_min_extent(io * 4 + 2, 4)]])
    assert_structural_equal(out[0].min, io * 4)
    assert out[0].extent.value == 6
    sym = arith.union_region([[Range(0, 4)], [Range.from_min_extent(x, 1)]])
    assert isinstance(sym[0].min, Min)
    with pytest.raises(ValueError, match="rank"):
        arith.union_region([[Range(0, 4)], [Range(0, 4), Range(0, 2)]])
