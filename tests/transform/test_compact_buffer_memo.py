"""CompactBufferAllocation bounds each distinct access once (`_region`'s memo): accesses that look
alike but use different variable objects (same names) must still be bounded apart, and repeated
accesses give the region the pass computed before the memo."""
from __future__ import annotations

from ingot.ir import Var, decl_buffer
from ingot.ir.expr import BufferLoad
from ingot.ir.functor import collect_vars
from ingot.tir import BufferStore, For, ForKind, SeqStmt
from ingot.tir.transform._arith import Analyzer
from ingot.tir.transform.compact_buffer import _region


def test_same_named_variables_are_bounded_apart():
    local = decl_buffer((64,), "float32", "local")
    out = decl_buffer((8,), "float32", "out")
    a, b = Var("i"), Var("i")  # two variables, one name: the structural hash alone cannot tell them apart
    body = SeqStmt([BufferStore(out, BufferLoad(local, [a]), [a]), BufferStore(out, BufferLoad(local, [b]), [b])])
    [(lo, hi)] = _region(Analyzer(), local, body)
    # A memo keyed on names would bound the second access as the first: [a, a].
    for bound in (lo, hi):
        used = collect_vars(bound)
        assert any(v is a for v in used) and any(v is b for v in used), bound


def test_repeated_accesses_give_the_unmemoized_region():
    local = decl_buffer((16, 16), "float32", "local")
    out = decl_buffer((16, 16), "float32", "out")
    i, j, k = Var("i"), Var("j"), Var("k")
    load = BufferLoad(local, [i * 4 + j, k])
    inner = For(k, 0, 4, ForKind.SERIAL, SeqStmt([BufferStore(local, load, [i * 4 + j, k]),
                                                   BufferStore(out, load, [i * 4 + j, k])]))
    stmt = For(j, 0, 4, ForKind.SERIAL, inner)
    ana = Analyzer()
    [(lo0, hi0), (lo1, hi1)] = _region(ana, local, stmt)
    assert (str(lo0), str(hi0), str(lo1), str(hi1)) == ("i * 4", "i * 4 + 3", "0", "3")
