"""Iter-map detection, normalization, subspace_divide, inverse maps and IndexMap."""
import itertools

import pytest

from ingot import arith
from ingot.ir import IntImm, Range, Var, assert_structural_equal

from arith_testutil import evaluate

i, j, k, f = Var("i"), Var("j"), Var("k"), Var("f")


def _norm(res):
    return [arith.normalize_iter_map_to_expr(s) for s in res.indices]


@pytest.mark.parametrize("indices, iters, predicate", [
    ([i * 4 + j], {i: (0, 8), j: (0, 4)}, True),                               # fused
    ([f // 4, f % 4], {f: (0, 32)}, True),                                     # split
    ([f // 12, f // 4 % 3, f % 4], {f: (0, 24)}, True),                       # split in three
    ([(i * 4 + j) // 8, (i * 4 + j) % 8], {i: (0, 8), j: (0, 4)}, True),       # fuse then split
    ([k * 32 + i * 4 + j, 3], {i: (0, 8), j: (0, 4), k: (0, 2)}, True),        # fuse three + constant
    ([j, i], {i: (0, 8), j: (0, 4)}, True),                                    # transpose
    ([i * 16 + j], {i: (0, 7), j: (0, 16)}, lambda: i * 16 + j < 100),        # non-divisible split
    ([(i * 16 + j) // 10, (i * 16 + j) % 10], {i: (0, 7), j: (0, 16)}, lambda: i * 16 + j < 100),
    ([i], {i: (0, 64)}, lambda: i < 50),
    ([i + 2], {i: (0, 8)}, True),                                              # offset
])
def test_bijective_positive(indices, iters, predicate):
    iters = {v: Range(lo, hi) for v, (lo, hi) in iters.items()}
    pred = predicate() if callable(predicate) else predicate
    res = arith.detect_iter_map(indices, iters, pred, check_level="bijective")
    assert res.success, res.errors
    assert res.errors == []
    # Normalizing back gives the same values everywhere.
    for point in itertools.product(*[range(int(r.extent)) for r in iters.values()]):
        env = dict(zip(iters, point))
        for original, normalized in zip(indices, _norm(res)):
            if isinstance(original, int):
                continue
            assert evaluate(normalized, env) == evaluate(original, env)


def test_normalized_forms_are_clean():
    res = arith.detect_iter_map([f // 4, f % 4], {f: Range(0, 32)}, check_level="bijective")
    assert_structural_equal(_norm(res), [f // 4, f % 4])
    res = arith.detect_iter_map([i * 16 + j], {i: Range(0, 7), j: Range(0, 16)}, i * 16 + j < 100)
    assert res.indices[0].args[0].source.extent == 100
    assert_structural_equal(_norm(res)[0], i * 16 + j)


@pytest.mark.parametrize("indices, iters, level, reason", [
    ([i + j], {i: 8, j: 4}, "bijective", "not a fusion"),
    ([i, i], {i: 8}, "bijective", "used twice"),
    ([i // 2], {i: 8}, "bijective", "not fully covered"),
    ([i * j], {i: 8, j: 4}, "surjective", "multiplies two loop iterators"),
    ([i], {i: 8, j: 4}, "bijective", "j is not used"),
    ([i % 3], {i: 8}, "surjective", "does not divide"),
    ([i * 4 + j], {i: 8, j: 5}, "surjective", "not a fusion"),
    ([f // 4, f % 8], {f: 32}, "surjective", "used twice"),
    ([i - j], {i: 8, j: 4}, "surjective", "negative coefficient"),
])
def test_negative(indices, iters, level, reason):
    res = arith.detect_iter_map(indices, {v: Range(0, e) for v, e in iters.items()}, check_level=level)
    assert not res.success
    assert res.indices == []
    assert any(reason in err for err in res.errors), res.errors


def test_surjective_allows_partial_use():
    res = arith.detect_iter_map([i // 2], {i: Range(0, 8)}, check_level="surjective")
    assert res.success
    res = arith.detect_iter_map([f // 8, f % 4], {f: Range(0, 32)}, check_level="surjective")
    assert res.success


def test_predicate_not_affine_fails():
    res = arith.detect_iter_map([i], {i: Range(0, 8)}, (i % 2) == 0)
    assert not res.success and "predicate" in res.errors[0]


def test_iter_map_simplify():
    out = arith.iter_map_simplify([(i * 8 + j) // 8, (i * 8 + j) % 8], {i: Range(0, 4), j: Range(0, 8)})
    assert_structural_equal(out, [i, j])
    # Fallback on failure: plain simplification.
    out = arith.iter_map_simplify([i * j + 0], {i: Range(0, 4), j: Range(0, 8)})
    assert_structural_equal(out, [i * j])


def test_subspace_divide_split_loop():
    io, ii = Var("io"), Var("ii")
    parts = arith.subspace_divide([io * 16 + ii], {io: Range(0, 4), ii: Range(0, 16)}, [ii])
    (outer, inner), = parts
    assert_structural_equal(outer[0], io)
    assert_structural_equal(inner[0], ii)
    assert (outer[1], inner[1]) == (4, 16)


def test_subspace_divide_2d_tile():
    io, ii, jo, ji = Var("io"), Var("ii"), Var("jo"), Var("ji")
    iters = {io: Range(0, 2), jo: Range(0, 3), ii: Range(0, 4), ji: Range(0, 8)}
    parts = arith.subspace_divide([io * 4 + ii, jo * 8 + ji], iters, [ii, ji])
    assert [(str(o[0]), o[1], str(n[0]), n[1]) for o, n in parts] == [
        ("io", 2, "ii", 4), ("jo", 3, "ji", 8)]


def test_subspace_divide_fused_and_failure():
    a, b = Var("a"), Var("b")
    # b is outer, a is inner, but a is the high digit: cannot divide.
    assert arith.subspace_divide([a * 8 + b], {a: Range(0, 4), b: Range(0, 8)}, [a]) is None
    # Only outer loops: inner part is trivial.
    parts = arith.subspace_divide([a * 8 + b], {a: Range(0, 4), b: Range(0, 8)}, [])
    assert str(parts[0][0][0]) == "a * 8 + b" and parts[0][0][1] == 32 and parts[0][1][1] == 1
    # Non-divisible split with predicate: extents come from the loops.
    parts = arith.subspace_divide([a * 16 + b], {a: Range(0, 7), b: Range(0, 16)}, [b], a * 16 + b < 100)
    assert [(str(o[0]), o[1], str(n[0]), n[1]) for o, n in parts] == [("a", 7, "b", 16)]


def test_inverse_affine_map():
    n, o0, o1, o2 = Var("n"), Var("o0"), Var("o1"), Var("o2")
    res = arith.detect_iter_map([i * 4 + j], {i: Range(0, 8), j: Range(0, 4)}, check_level="bijective")
    inv = arith.inverse_affine_map(res.indices, [o0])
    assert_structural_equal(inv[i], o0 // 4)
    assert_structural_equal(inv[j], o0 % 4)
    res = arith.detect_iter_map([n // 16, k, n % 16], {n: Range(0, 64), k: Range(0, 4)}, check_level="bijective")
    inv = arith.inverse_affine_map(res.indices, [o0, o1, o2])
    assert_structural_equal(inv[n], o0 * 16 + o2)
    assert_structural_equal(inv[k], o1)


class TestIndexMap:
    def test_packing_map_inverse(self):
        m = arith.IndexMap.from_func(lambda n, k: (n // 16, k, n % 16))
        assert [int(e) for e in m.map_shape((64, 32))] == [4, 32, 16]
        assert m.is_bijective((64, 32))
        inv = m.inverse((64, 32))
        a, b, c = inv.initial_indices
        n, k = m.initial_indices
        assert_structural_equal(inv.final_indices, (a * 16 + c, b))
        # Round trip on every point.
        for vn in range(0, 64, 5):
            for vk in range(0, 32, 7):
                assert [int(e) for e in inv.map_indices(m.map_indices([vn, vk]))] == [vn, vk]

    def test_map_indices_symbolic(self):
        m = arith.IndexMap.from_func(lambda n, k: (n // 16, k, n % 16))
        io, ii = Var("io"), Var("ii")
        ana = arith.Analyzer()
        ana.bind(ii, Range(0, 16))
        out = m.map_indices([io * 16 + ii, 3], ana)
        assert_structural_equal(out, [io, IntImm("int32", 3), ii])

    def test_non_bijective_inverse_raises(self):
        m = arith.IndexMap.from_func(lambda i: (i // 2,))
        assert not m.is_bijective((8,))
        with pytest.raises(ValueError, match="not bijective"):
            m.inverse((8,))
        with pytest.raises(ValueError, match="takes 1"):
            m.map_indices([1, 2])

    def test_transpose_and_fuse(self):
        m = arith.IndexMap.from_func(lambda i, j: (j * 4 + i,))
        inv = m.inverse((4, 8))
        (o,) = inv.initial_indices
        assert_structural_equal(inv.final_indices, (o % 4, o // 4))
        assert str(m) == "IndexMap(lambda i, j: (j * 4 + i,))"
