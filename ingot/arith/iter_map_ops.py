"""Operations on detected iter maps: subspace division (blockize/tensorize) and inversion (layouts).

Note: both work on the digit structure `detect_iter_map` finds. `subspace_divide` splits each
binding's mark into the digits that come from the sub-iterators (they must be the lowest digits)
and the rest, so ``vi = io*16 + ii`` with sub-iterator ``ii`` becomes ``(io, 7) × (ii, 16)``.
`inverse_affine_map` runs the digits backwards: each output value is poured into the digits of
its mark, a fused mark hands each digit ``floormod(floordiv(value, scale), extent)`` to the mark it
came from, and an input iterator collects ``sum(digit * lower_factor)``.

Example:
    >>> from ingot.ir import Var, Range
    >>> io, ii = Var("io"), Var("ii")
    >>> (outer, inner), = subspace_divide([io * 16 + ii], {io: Range(0, 4), ii: Range(0, 16)}, [ii])
    >>> str(outer[0]), outer[1], str(inner[0]), inner[1]
    ('io', 4, 'ii', 16)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ingot.ir import expr as E
from ingot.ir.expr import IntImm, PrimExpr, Range, Var, convert

from .iter_map import IterMark, IterSplitExpr, IterSumExpr, _split_to_expr, detect_iter_map

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer


def _input_var(mark: IterMark) -> "Var | None":
    source = mark.source
    if isinstance(source, Var):
        return source
    if isinstance(source, E.Sub) and isinstance(source.a, Var):
        return source.a
    return None


def _components(mark: IterMark) -> "list[IterSplitExpr] | None":
    """The digits of ``mark`` from the lowest up, each a digit of an input iterator (None if nested)."""
    if not mark.is_fused():
        return [IterSplitExpr(mark, 1, mark.extent, 1)]
    out: list[IterSplitExpr] = []
    for arg in sorted(mark.source.args, key=lambda a: a.scale):
        if arg.source.is_fused():
            if arg.lower_factor != 1 or arg.extent != arg.source.extent:
                return None
            inner = _components(arg.source)
            if inner is None:
                return None
            out.extend(inner)
        else:
            out.append(arg)
    return out


def _digits_expr(digits: Sequence[IterSplitExpr], dtype) -> PrimExpr:
    """``sum(digit_k * prod(extent below k))`` over ``digits`` (lowest first)."""
    terms = []
    scale = 1
    for digit in digits:
        term = _split_to_expr(digit.with_scale(1))
        terms.append(term * scale if scale != 1 else term)
        scale *= digit.extent
    result: PrimExpr = IntImm(dtype, 0)
    for term in reversed(terms):  # highest digit first: reads as ``a * 8 + b``
        result = result + term
    return result


def subspace_divide(bindings: Sequence[Any], input_iters: Mapping[Var, Range], sub_iters: Sequence[Var],
                    predicate: Any = True, analyzer: "Analyzer | None" = None
                    ) -> "list[tuple[tuple[PrimExpr, int], tuple[PrimExpr, int]]] | None":
    """Split each binding into an outer part (loops outside ``sub_iters``) and an inner part.

    Each result is ``((outer_expr, outer_extent), (inner_expr, inner_extent))`` with
    ``binding == outer_expr * inner_extent + inner_expr``; None when some binding mixes the two
    subspaces (an inner digit above an outer one) or is not affine.

    Example:
        >>> from ingot.ir import Var, Range
        >>> i, j = Var("i"), Var("j")
        >>> parts = subspace_divide([i * 2 + j // 4, j % 4], {i: Range(0, 3), j: Range(0, 8)}, [j])
        >>> [(str(o[0]), o[1], str(n[0]), n[1]) for o, n in parts]
        [('i', 3, 'j // 4', 2), ('0', 1, 'j % 4', 4)]
    """
    from .analyzer import Analyzer

    ana = analyzer or Analyzer()
    for var, rng in input_iters.items():
        ana.bind(var, rng, allow_override=True)
    result = detect_iter_map(bindings, input_iters, predicate, "surjective", ana)
    if not result.success:
        return None
    inner_vars = {id(v) for v in sub_iters}
    out = []
    for index in result.indices:
        dtype = index.dtype
        zero = IntImm(dtype, 0)
        if not index.args:
            out.append(((index.base, 1), (zero, 1)))
            continue
        split = index.args[0]
        digits = _components(split.source)
        if digits is None or split.scale != 1:
            return None
        # Step 1. the sub-iterator digits must all sit below the outer ones.
        is_inner = [id(_input_var(d.source)) in inner_vars for d in digits]
        n_inner = sum(is_inner)
        if any(is_inner[n_inner:]) or not all(is_inner[:n_inner]):
            return None
        inner_digits, outer_digits = digits[:n_inner], digits[n_inner:]
        inner_extent = _product(d.extent for d in inner_digits)
        outer_extent = _product(d.extent for d in outer_digits)
        inner_expr = _digits_expr(inner_digits, dtype)
        outer_expr = _digits_expr(outer_digits, dtype)
        # Step 2. this binding takes digits [lf, lf*extent) of the mark: which side holds them?
        lf, ext = split.lower_factor, split.extent
        if lf == 1 and lf * ext >= split.source.extent:
            parts = ((outer_expr, outer_extent), (inner_expr, inner_extent))
        elif lf * ext <= inner_extent and inner_extent % (lf * ext) == 0:
            parts = ((zero, 1), (_take(inner_expr, lf, ext, inner_extent), ext))
        elif lf % inner_extent == 0:
            parts = ((_take(outer_expr, lf // inner_extent, ext, outer_extent), ext), (zero, 1))
        else:
            return None
        (o_expr, o_ext), (i_expr, i_ext) = parts
        o_expr = ana.simplify(o_expr + index.base)
        out.append(((o_expr, o_ext), (ana.simplify(i_expr), i_ext)))
    return out


def _take(value: PrimExpr, lower: int, extent: int, total: int) -> PrimExpr:
    if lower != 1:
        value = value // lower
    if lower * extent < total:
        value = value % extent
    return value


def _product(values) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def inverse_affine_map(indices: Sequence[IterSumExpr], outputs: Sequence[Any],
                       analyzer: "Analyzer | None" = None) -> dict[Var, PrimExpr]:
    """For a bijective iter map, each input iterator as an expression of the ``outputs``.

    ``indices`` come from ``detect_iter_map(..., check_level="bijective")``; ``outputs[k]`` stands
    for the value of ``indices[k]``.

    Example:
        >>> from ingot.ir import Var, Range
        >>> n, o0, o1 = Var("n"), Var("o0"), Var("o1")
        >>> res = detect_iter_map([n // 16, n % 16], {n: Range(0, 64)}, check_level="bijective")
        >>> str(inverse_affine_map(res.indices, [o0, o1])[n])
        'o0 * 16 + o1'
    """
    from .analyzer import Analyzer

    ana = analyzer or Analyzer()
    if len(indices) != len(outputs):
        raise ValueError(f"inverse_affine_map: {len(indices)} indices but {len(outputs)} outputs")
    values: dict[int, PrimExpr] = {}
    marks: dict[int, IterMark] = {}

    def pour(mark: IterMark, value: PrimExpr) -> None:
        marks[id(mark)] = mark
        values[id(mark)] = value if id(mark) not in values else values[id(mark)] + value

    # Step 1. every output value goes to the digit of its mark.
    for index, out in zip(indices, outputs):
        out = convert(out)
        if not index.args:
            continue
        if len(index.args) != 1:
            raise ValueError(f"inverse_affine_map needs each index fused into one iterator, got {index}")
        split = index.args[0]
        digit = out - index.base if not (isinstance(index.base, IntImm) and index.base.value == 0) else out
        if split.scale != 1:
            digit = digit // split.scale
        pour(split.source, digit * split.lower_factor if split.lower_factor != 1 else digit)
    # Step 2. fused marks, outermost first, hand their digits down to their components.
    result: dict[Var, PrimExpr] = {}
    for mark in _topological(indices):
        if id(mark) not in values:
            continue
        value = values[id(mark)]
        if mark.is_fused():
            args = sorted(mark.source.args, key=lambda a: a.scale)
            for pos, arg in enumerate(args):
                digit = value // arg.scale if arg.scale != 1 else value
                if pos != len(args) - 1:
                    digit = digit % arg.extent
                pour(arg.source, digit * arg.lower_factor if arg.lower_factor != 1 else digit)
        else:
            var = _input_var(mark)
            if isinstance(mark.source, E.Sub):
                value = value + mark.source.b
            result[var] = ana.simplify(value)
    return result


def _topological(indices: Sequence[IterSumExpr]) -> list[IterMark]:
    """Marks reachable from ``indices``, every fused mark before the marks it is made of."""
    order: list[IterMark] = []
    seen: set[int] = set()

    def visit(mark: IterMark) -> None:
        if id(mark) in seen:
            return
        seen.add(id(mark))
        if mark.is_fused():
            for arg in mark.source.args:
                visit(arg.source)
        order.append(mark)

    for index in indices:
        for arg in index.args:
            visit(arg.source)
    return list(reversed(order))


__all__ = ["subspace_divide", "inverse_affine_map"]
