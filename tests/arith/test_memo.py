"""The simplifier's memos (SumForm parse memo, the bind-aware result memo, fast node builders)
must change nothing: every result equals the one computed without them."""
import pytest

from ingot.arith import Analyzer
from ingot.arith import canonical
from ingot.arith.canonical import SumForm, _binary, _imm
from ingot.ir import Range, Var, structural_equal
from ingot.ir import expr as E


@pytest.fixture
def verify_forms(monkeypatch):
    monkeypatch.setattr(canonical, "VERIFY_FORM_CACHE", True)


def test_form_memo_matches_parse(verify_forms):
    i, j, k = Var("i"), Var("j"), Var("k")
    ana = Analyzer()
    ana.bind(i, Range(0, 8))
    ana.bind(j, Range(0, 16))
    exprs = [
        i * 16 + j - k * 3 + 7, (i * 16 + j) // 16 * 16 + (i * 16 + j) % 16, 5 - i * 2 - j,
        -i - j * 4 - 3, (i + 1) * (j - 2) * 3, k * k - i * k + 0, (i * 4 + j) % 4 + (i * 4 + j) // 4,
    ]
    for e in exprs:
        once = ana.simplify(e)
        # Re-parsing a simplifier result goes through the memo: it must be the parse exactly.
        assert structural_equal(SumForm.from_expr(once).to_expr(), once)
        assert structural_equal(ana.simplify(once), once)


def test_rebinding_a_consulted_var_drops_memo():
    i = Var("i")
    ana = Analyzer()
    ana.bind(i, Range(0, 16))
    e = i // 16
    assert str(ana.simplify(e)) == "0"
    ana.bind(i, Range(0, 32), allow_override=True)
    assert str(ana.simplify(e)) == "i // 16"  # the memoized "0" read i's old range


def test_binding_a_fresh_var_keeps_results_right():
    i, j = Var("i"), Var("j")
    ana = Analyzer()
    ana.bind(i, Range(0, 4))
    assert str(ana.simplify(i // 4)) == "0"
    ana.bind(j, Range(0, 8))  # j was never consulted: the memo survives, and stays correct
    assert str(ana.simplify(i // 4)) == "0"
    assert str(ana.simplify((i * 8 + j) // 8)) == "i"


def test_fast_builders_equal_constructors():
    x = Var("x")
    assert structural_equal(_binary(E.Add, x, _imm(x.dtype, 3)), E.Add(x, 3))
    assert structural_equal(_binary(E.Mul, x, x), E.Mul(x, x))
    with pytest.raises(TypeError, match="same dtype"):
        _binary(E.Add, x, Var("y", "int64"))
    assert _imm(x.dtype, 2).span is None and type(_imm(x.dtype, 2)) is E.IntImm


def test_same_key_agrees_with_expr_key(verify_forms):
    from ingot.arith.canonical import expr_key, same_key

    i, j = Var("i"), Var("j")
    pairs = [
        (i * 2 + 1, i * 2 + 1), (i * 2 + 1, i * 2 + 2), (i + j, j + i), (i // 4, i // 4), (i // 4, i % 4),
        (E.IntImm("int64", 3), E.IntImm("int32", 3)), (E.Cast("int64", i), E.Cast("int64", i)),
        (E.Cast("int64", i), E.Cast("int32", i)), (E.Min(i, j), E.Max(i, j)), (i, Var("i")),
    ]
    for a, b in pairs:
        assert same_key(a, b) == (expr_key(a) == expr_key(b)), (str(a), str(b))
