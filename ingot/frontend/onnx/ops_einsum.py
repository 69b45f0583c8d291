"""ONNX ``Einsum`` as permutes, reshapes, sums and batched matmuls (static shapes).

Note: the equation is normalized first (spaces dropped, ``...`` replaced by fresh letters right-
aligned per operand, the implicit output of ``"ij,jk"`` made explicit). Then each operand loses
its repeated letters (a diagonal: the two axes moved last, flattened, and ``take`` of positions
``i * (n + 1)``) and the letters no one else needs (``sum``). Operands are combined left to right:
letters in both and still needed are batch axes, letters in both and no longer needed are
contracted, the rest stay on their side — a ``(batch, left, k) @ (batch, k, right)`` matmul.
Finally the result is permuted into the output order.

Example:
    >>> parse_equation("bij, bjk -> bik", [3, 3])
    (['bij', 'bjk'], 'bik')
    >>> parse_equation("...ii->...i", [3])
    (['Aii'], 'Ai')
"""
from __future__ import annotations

import string
from typing import Any

import numpy as np

from ingot import graph as G

from ._common import as_array, is_static
from .importer import register

_FRESH = string.ascii_uppercase  # einsum letters are lowercase/uppercase; ellipsis dims use fresh ones


def parse_equation(equation: str, ranks: list) -> tuple[list, str]:
    """``(input letter strings, output letter string)`` with ``...`` expanded for the given ranks.

    Example:
        >>> parse_equation("i,i", [1, 1])
        (['i', 'i'], '')
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"equation {equation!r} has {len(terms)} operand(s), the node has {len(ranks)} input(s)")
    used = set(eq) - set(".,->")
    fresh = [c for c in _FRESH if c not in used]
    ell_rank = max([r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t] or [0])
    ell = "".join(fresh[:ell_rank])
    out_terms = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            k = r - len(t.replace("...", ""))
            t = t.replace("...", ell[ell_rank - k:] if k else "")
        if len(t) != r:
            raise ValueError(f"operand {t!r} of {equation!r} has rank {r}, the equation gives it {len(t)} letters")
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {c: "".join(out_terms).count(c) for c in set("".join(out_terms))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return out_terms, out


class _Operand:
    def __init__(self, ctx: Any, value: Any, letters: str):
        self.ctx, self.value, self.letters = ctx, value, letters

    @property
    def shape(self) -> list:
        return list(self.ctx.shape(self.value))

    def emit(self, call: Any, letters: str) -> "_Operand":
        return _Operand(self.ctx, self.ctx.emit(call), letters)

    def permute(self, letters: str) -> "_Operand":
        if letters == self.letters:
            return self
        return self.emit(G.op.permute_dims(self.ctx.expr(self.value), [self.letters.index(c) for c in letters]),
                         letters)

    def diagonal(self) -> "_Operand":
        # Step 1. repeated letters: keep the diagonal (two axes moved last, flattened, gathered).
        op = self
        while len(set(op.letters)) != len(op.letters):
            c = next(c for c in op.letters if op.letters.count(c) > 1)
            p = op.letters.index(c)
            q = op.letters.index(c, p + 1)
            rest = "".join(x for k, x in enumerate(op.letters) if k not in (p, q))
            order = [k for k in range(len(op.letters)) if k not in (p, q)] + [p, q]
            moved = op.emit(G.op.permute_dims(op.ctx.expr(op.value), order), rest + c + c)
            n = moved.shape[-1]
            flat = moved.emit(G.op.reshape(op.ctx.expr(moved.value), moved.shape[:-2] + [n * n]), rest + c)
            idx = G.const(np.arange(n, dtype="int64") * (n + 1))
            op = flat.emit(G.op.take(op.ctx.expr(flat.value), idx, axis=len(rest)), rest + c)
        return op

    def sum_out(self, keep: set) -> "_Operand":
        axes = [k for k, c in enumerate(self.letters) if c not in keep]
        if not axes:
            return self
        letters = "".join(c for c in self.letters if c in keep)
        return self.emit(G.op.sum(self.ctx.expr(self.value), axis=axes), letters)


def _combine(a: _Operand, b: _Operand, needed: set) -> _Operand:
    ctx = a.ctx
    batch = "".join(c for c in a.letters if c in b.letters and c in needed)
    contract = "".join(c for c in a.letters if c in b.letters and c not in needed)
    left = "".join(c for c in a.letters if c not in b.letters)
    right = "".join(c for c in b.letters if c not in a.letters)
    sa, sb = dict(zip(a.letters, a.shape)), dict(zip(b.letters, b.shape))
    for c in batch + contract:
        if sa[c] != sb[c]:
            raise ValueError(f"letter {c!r} has size {sa[c]} in one operand and {sb[c]} in the other "
                             f"(broadcasting in Einsum is not supported)")

    def size(letters: str, s: dict) -> int:
        return int(np.prod([s[c] for c in letters], dtype=np.int64))

    # Step 2. (batch, left, k) @ (batch, k, right), then back to the letters' own axes.
    pa = a.permute(batch + left + contract)
    pb = b.permute(batch + contract + right)
    ma = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(pa.value), [size(batch, sa), size(left, sa), size(contract, sa)])))
    mb = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(pb.value), [size(batch, sb), size(contract, sb), size(right, sb)])))
    prod = ctx.emit(G.op.matmul(ma, mb))
    shape = [sa[c] for c in batch + left] + [sb[c] for c in right]
    return _Operand(ctx, ctx.emit(G.op.reshape(ctx.expr(prod), shape)), batch + left + right)


@register("Einsum", since=12)
def _einsum(ctx: Any, node: Any) -> Any:
    inputs = list(node.inputs)
    equation = str(node.attr("equation"))
    if all(is_static(v) for v in inputs):
        return np.asarray(np.einsum(equation, *[as_array(v) for v in inputs]))
    shapes = [list(ctx.shape(v)) for v in inputs]
    if not all(isinstance(d, int) for s in shapes for d in s):
        raise node.error("Einsum needs static shapes; fix the dims with shape_dict")
    terms, out = parse_equation(equation, [len(s) for s in shapes])
    ops = [_Operand(ctx, v, t).diagonal() for v, t in zip(inputs, terms)]
    # Step 3. fold the operands left to right, summing letters as soon as nothing else needs them.
    acc = None
    for k, op in enumerate(ops):
        later = set(out).union(*[set(o.letters) for o in ops[k + 1:]])
        needed_now = later | (set(acc.letters) if acc is not None else set())
        op = op.sum_out(needed_now)
        if acc is None:
            acc = op
        else:
            acc = _combine(acc.sum_out(later | set(op.letters)), op, later)
    acc = acc.sum_out(set(out))
    if sorted(acc.letters) != sorted(out):
        raise node.error(f"internal: Einsum {equation!r} left letters {acc.letters!r} for output {out!r}")
    if not out:
        return acc.value
    return acc.permute(out).value
