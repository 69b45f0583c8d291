"""Iter-map detection: are these indices a quasi-affine fusion/split of the loop iterators?

Note: every index is rewritten into an `IterSumExpr`: a sum of `IterSplitExpr` plus a base. A
split ``(mark, lower_factor, extent, scale)`` stands for
``floormod(floordiv(mark, lower_factor), extent) * scale`` -- one "digit" of a mark -- and an
`IterMark` is either an input iterator or a fusion of digits of other marks (``i*16 + j`` with
``j < 16`` is one mark of extent ``16 * extent(i)``). Rewriting is bottom-up with dict dispatch:
``+``/``-`` merge splits, ``*`` scales them, ``//`` and ``%`` by a constant first fuse the
operand into one split (the fusion must be exact: each digit's scale is the product of the
extents below it) and then pick digits. Fused marks are shared through a structural key, so
``f // 4`` and ``f % 4`` are digits of the same mark.

The mapping is then checked: on each mark, the digits used (by the outputs and by fused marks)
must not overlap ("surjective") and must also tile it exactly with every input iterator used
("bijective"). A predicate ``i0*16 + i1 < 100`` (from a non-divisible split) shrinks the extent
of the mark of ``i0*16 + i1`` to 100. Failure returns empty indices and errors saying why.

Example:
    >>> from ingot.ir import Var, Range
    >>> i, j = Var("i"), Var("j")
    >>> res = detect_iter_map([i * 4 + j], {i: Range(0, 8), j: Range(0, 4)})
    >>> res.success, str(normalize_iter_map_to_expr(res.indices[0]))
    (True, 'i * 4 + j')
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ingot.ir import expr as E
from ingot.ir.expr import IntImm, PrimExpr, Range, Var, convert

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer

_LEVELS = ("bijective", "surjective", "no_check")


class IterMark:
    """An iterator of ``extent`` values: an input variable (``source`` a Var, or ``v - min``) or a
    fusion (``source`` an `IterSumExpr` of digits of other marks).

    Example:
        >>> from ingot.ir import Var
        >>> IterMark(Var("i"), 8).extent
        8
    """

    __slots__ = ("source", "extent")

    def __init__(self, source: "PrimExpr | IterSumExpr", extent: int):
        self.source, self.extent = source, int(extent)

    def is_fused(self) -> bool:
        return isinstance(self.source, IterSumExpr)

    def __repr__(self):
        return f"IterMark({self.source}, extent={self.extent})"


class IterSplitExpr:
    """``floormod(floordiv(source, lower_factor), extent) * scale`` (Python ints for the constants).

    Example:
        >>> from ingot.ir import Var
        >>> s = IterSplitExpr(IterMark(Var("f"), 32), lower_factor=4, extent=8, scale=1)
        >>> str(normalize_iter_map_to_expr(IterSumExpr([s], 0)))
        'f // 4'
    """

    __slots__ = ("source", "lower_factor", "extent", "scale", "dtype")

    def __init__(self, source: IterMark, lower_factor: int, extent: int, scale: int, dtype: Any = "int32"):
        self.source, self.lower_factor, self.extent, self.scale = source, int(lower_factor), int(extent), int(scale)
        self.dtype = E.DataType(dtype)

    def with_scale(self, scale: int) -> "IterSplitExpr":
        return IterSplitExpr(self.source, self.lower_factor, self.extent, scale, self.dtype)

    def digit_key(self) -> tuple:
        return (id(self.source), self.lower_factor, self.extent)

    def __repr__(self):
        return f"IterSplit({self.source}, lf={self.lower_factor}, ext={self.extent}, scale={self.scale})"


class IterSumExpr:
    """``sum(args) + base`` where each arg is an `IterSplitExpr` and ``base`` is free of iterators.

    Example:
        >>> IterSumExpr([], IntImm("int32", 3)).base.value
        3
    """

    __slots__ = ("args", "base", "dtype")

    def __init__(self, args: Sequence[IterSplitExpr], base: Any, dtype: Any = None):
        self.args = tuple(args)
        self.base = convert(base) if not isinstance(base, int) else IntImm(dtype or "int32", base)
        self.dtype = E.DataType(dtype) if dtype is not None else self.base.dtype

    def __repr__(self):
        return f"IterSum({list(self.args)}, base={self.base})"


class IterMapResult:
    """Result of `detect_iter_map`: ``indices`` (empty on failure), ``errors``, ``success``.

    Example:
        >>> from ingot.ir import Var, Range
        >>> i = Var("i")
        >>> detect_iter_map([i // 2], {i: Range(0, 4)}, check_level="bijective").errors
        ['iterator `i` is not fully covered: values with lower factor 1 are never reached']
    """

    __slots__ = ("indices", "errors", "padding_predicate")

    def __init__(self, indices: list, errors: list[str]):
        self.indices, self.errors = indices, errors
        self.padding_predicate = IntImm("bool", 1)

    @property
    def success(self) -> bool:
        return bool(self.indices) or (not self.errors)

    def __repr__(self):
        return f"IterMapResult(success={self.success}, errors={self.errors})"


class _Fail(Exception):
    """Internal: abort the rewrite of one index with a reason."""


class _Detector:
    """Rewrites expressions into IterSumExpr form; one method per expression class."""

    def __init__(self, input_iters: Mapping[Var, Range], analyzer: "Analyzer"):
        self.ana = analyzer
        self.var_map: dict[Var, IterSumExpr] = {}
        self.fused: dict[tuple, IterMark] = {}      # structural key of a fusion -> its mark
        self.limits: dict[tuple, int] = {}          # fusion key -> extent bound from the predicate
        self.input_marks: dict[int, tuple[Var, IterMark]] = {}
        for var, rng in input_iters.items():
            extent = analyzer.simplify(rng.extent)
            if not isinstance(extent, IntImm):
                raise _Fail(f"input iterator {var.name} has non-constant extent {extent}; "
                            "iter-map detection needs constant loop extents")
            lo = analyzer.simplify(rng.min)
            if extent.value == 1:
                self.var_map[var] = IterSumExpr([], lo, var.dtype)  # trivial iterator: a constant
                continue
            source = var if (isinstance(lo, IntImm) and lo.value == 0) else E.Sub(var, lo)
            mark = IterMark(source, extent.value)
            self.input_marks[id(mark)] = (var, mark)
            self.var_map[var] = IterSumExpr([IterSplitExpr(mark, 1, extent.value, 1, var.dtype)], lo, var.dtype)
        self._dispatch: dict[type, Callable[[Any], IterSumExpr]] = {
            E.Var: self._var, E.SizeVar: self._var, E.IntImm: self._const, E.Add: self._add,
            E.Sub: self._sub, E.Mul: self._mul, E.FloorDiv: self._floordiv, E.FloorMod: self._floormod,
        }

    # -- rewriting ---------------------------------------------------------------------------------
    def rewrite(self, expr: PrimExpr) -> IterSumExpr:
        fn = self._dispatch.get(type(expr))
        if fn is not None:
            return fn(expr)
        from ingot.ir.functor import collect_vars

        if any(v in self.var_map for v in collect_vars(expr)):
            raise _Fail(f"`{expr}` ({type(expr).__name__}) over loop iterators is not quasi-affine")
        return IterSumExpr([], expr, expr.dtype)

    def _var(self, expr: Var) -> IterSumExpr:
        return self.var_map.get(expr) or IterSumExpr([], expr, expr.dtype)

    def _const(self, expr: IntImm) -> IterSumExpr:
        return IterSumExpr([], expr, expr.dtype)

    def _merge(self, a: IterSumExpr, b: IterSumExpr, sign: int) -> IterSumExpr:
        args = {arg.digit_key(): arg for arg in a.args}
        order = [arg.digit_key() for arg in a.args]
        for arg in b.args:
            key = arg.digit_key()
            if key in args:
                args[key] = args[key].with_scale(args[key].scale + sign * arg.scale)
            else:
                args[key] = arg.with_scale(sign * arg.scale)
                order.append(key)
        merged = [args[k] for k in order if args[k].scale != 0]
        base = self.ana.simplify(E.Add(a.base, b.base) if sign > 0 else E.Sub(a.base, b.base))
        return IterSumExpr(merged, base, a.dtype)

    def _add(self, expr: E.Add) -> IterSumExpr:
        return self._merge(self.rewrite(expr.a), self.rewrite(expr.b), 1)

    def _sub(self, expr: E.Sub) -> IterSumExpr:
        return self._merge(self.rewrite(expr.a), self.rewrite(expr.b), -1)

    def _mul(self, expr: E.Mul) -> IterSumExpr:
        a, b = self.rewrite(expr.a), self.rewrite(expr.b)
        if a.args and b.args:
            raise _Fail(f"`{expr}` multiplies two loop iterators (not affine)")
        if not a.args and not b.args:
            return IterSumExpr([], self.ana.simplify(E.Mul(a.base, b.base)), expr.dtype)
        if b.args:
            a, b = b, a
        if not isinstance(b.base, IntImm):
            raise _Fail(f"`{expr}` scales loop iterators by the non-constant {b.base}")
        c = b.base.value
        return IterSumExpr([arg.with_scale(arg.scale * c) for arg in a.args if c != 0],
                           self.ana.simplify(E.Mul(a.base, b.base)), expr.dtype)

    def _divisor(self, expr: "E.FloorDiv | E.FloorMod") -> tuple[IterSumExpr, int]:
        a, b = self.rewrite(expr.a), self.rewrite(expr.b)
        if b.args or not isinstance(b.base, IntImm) or b.base.value <= 0:
            raise _Fail(f"`{expr}`: the divisor must be a positive constant")
        return a, b.base.value

    def _floordiv(self, expr: E.FloorDiv) -> IterSumExpr:
        a, c = self._divisor(expr)
        if not a.args:
            return IterSumExpr([], self.ana.simplify(E.FloorDiv(a.base, b_const(c, expr.dtype))), expr.dtype)
        base = self._const_base(a, c, expr)
        split = self.fuse(a)
        if split.scale % c == 0:
            return IterSumExpr([split.with_scale(split.scale // c)], base // c, expr.dtype)
        if c % split.scale == 0:
            c2 = c // split.scale
            if split.extent % c2 == 0:
                return IterSumExpr([IterSplitExpr(split.source, split.lower_factor * c2, split.extent // c2, 1,
                                                  expr.dtype)], base // c, expr.dtype)
            if split.extent <= c2:
                return IterSumExpr([], base // c, expr.dtype)
        raise _Fail(f"`{expr}`: the divisor {c} does not divide the iterator's extent {split.extent} "
                    f"(times scale {split.scale})")

    def _floormod(self, expr: E.FloorMod) -> IterSumExpr:
        a, c = self._divisor(expr)
        if not a.args:
            return IterSumExpr([], self.ana.simplify(E.FloorMod(a.base, b_const(c, expr.dtype))), expr.dtype)
        self._const_base(a, c, expr)
        split = self.fuse(a)
        if split.scale % c == 0:
            return IterSumExpr([], 0, expr.dtype)
        if c % split.scale == 0:
            c2 = c // split.scale
            if split.extent % c2 == 0:
                return IterSumExpr([IterSplitExpr(split.source, split.lower_factor, c2, split.scale, expr.dtype)],
                                   0, expr.dtype)
            if split.extent <= c2:
                return IterSumExpr([split], 0, expr.dtype)
        raise _Fail(f"`{expr}`: the modulus {c} does not divide the iterator's extent {split.extent} "
                    f"(times scale {split.scale})")

    def _const_base(self, a: IterSumExpr, c: int, expr: PrimExpr) -> int:
        if not isinstance(a.base, IntImm) or a.base.value % c != 0:
            raise _Fail(f"`{expr}`: the offset {a.base} of the iterators is not a multiple of {c}")
        return a.base.value

    # -- fusion --------------------------------------------------------------------------------------
    def _fusion_order(self, args: Sequence[IterSplitExpr], where: Any) -> tuple[list[IterSplitExpr], int, int]:
        """Order ``args`` from the lowest digit up; each scale must be the product of the extents below.

        Returns (ordered args, base scale, total extent in units of the base scale).
        """
        if any(arg.scale <= 0 for arg in args):
            raise _Fail(f"`{where}`: a loop iterator appears with a negative coefficient")
        base_scale = min(arg.scale for arg in args)
        remaining = list(args)
        ordered: list[IterSplitExpr] = []
        expected = base_scale
        while remaining:
            matches = [arg for arg in remaining if arg.scale == expected]
            if len(matches) != 1:
                raise _Fail(f"`{where}` is not a fusion of loop iterators: expected exactly one term with "
                            f"coefficient {expected}, found {len(matches)}")
            ordered.append(matches[0])
            remaining.remove(matches[0])
            expected *= matches[0].extent
        return ordered, base_scale, expected // base_scale

    def _fusion_key(self, ordered: Sequence[IterSplitExpr], base_scale: int) -> tuple:
        return tuple((arg.digit_key(), arg.scale // base_scale) for arg in ordered)

    def fuse(self, sum_expr: IterSumExpr, where: Any = None) -> IterSplitExpr:
        """One split equal to the iterator part of ``sum_expr`` (its base is ignored)."""
        if len(sum_expr.args) == 1:
            return sum_expr.args[0]
        ordered, base_scale, extent = self._fusion_order(sum_expr.args, sum_expr if where is None else where)
        key = self._fusion_key(ordered, base_scale)
        mark = self.fused.get(key)
        if mark is None:
            extent = min(extent, self.limits.get(key, extent))
            source = IterSumExpr([arg.with_scale(arg.scale // base_scale) for arg in reversed(ordered)], 0,
                                 sum_expr.dtype)
            mark = self.fused[key] = IterMark(source, extent)
        return IterSplitExpr(mark, 1, mark.extent, base_scale, sum_expr.dtype)

    def add_predicate(self, cond: PrimExpr) -> None:
        """Record ``sum < bound`` constraints; they shrink the extent of the fused mark of ``sum``."""
        cond = self.ana.simplify(cond)
        if isinstance(cond, E.And):
            self.add_predicate(cond.a)
            self.add_predicate(cond.b)
            return
        if isinstance(cond, IntImm) and cond.value:
            return
        if isinstance(cond, E.GT):
            cond = E.LT(cond.b, cond.a)
        elif isinstance(cond, E.GE):
            cond = E.LE(cond.b, cond.a)
        if not isinstance(cond, (E.LT, E.LE)):
            raise _Fail(f"predicate `{cond}` is not of the form `iterators < constant`")
        lhs, rhs = self.rewrite(cond.a), self.rewrite(cond.b)
        if rhs.args or not lhs.args or not isinstance(rhs.base, IntImm) or not isinstance(lhs.base, IntImm):
            raise _Fail(f"predicate `{cond}` is not of the form `iterators < constant`")
        upper = rhs.base.value - lhs.base.value + (1 if isinstance(cond, E.LE) else 0)  # sum < upper
        if len(lhs.args) == 1:
            arg = lhs.args[0]
            if arg.lower_factor != 1 or arg.extent != arg.source.extent or arg.source.is_fused():
                raise _Fail(f"predicate `{cond}` bounds a part of an iterator; only whole iterators or "
                            "fusions of iterators can be bounded")
            limit = -(-upper // arg.scale)
            if limit < arg.source.extent:  # shrink the input iterator itself (a fresh, smaller mark)
                self._shrink_input(arg.source, limit)
            return
        ordered, base_scale, extent = self._fusion_order(lhs.args, cond)
        key = self._fusion_key(ordered, base_scale)
        limit = -(-upper // base_scale)
        if limit < extent:
            self.limits[key] = min(limit, self.limits.get(key, limit))

    def _shrink_input(self, mark: IterMark, limit: int) -> None:
        var, _ = self.input_marks.pop(id(mark))
        smaller = IterMark(mark.source, limit)
        self.input_marks[id(smaller)] = (var, smaller)
        base = self.var_map[var].base
        self.var_map[var] = IterSumExpr([IterSplitExpr(smaller, 1, limit, 1, var.dtype)], base, var.dtype)


def b_const(c: int, dtype: Any) -> IntImm:
    return IntImm(dtype, c)


# -- checking -----------------------------------------------------------------------------------------
def _check_marks(detector: _Detector, results: Sequence[IterSumExpr], level: str) -> list[str]:
    """Digits on each mark must not overlap (surjective) and must tile it exactly (bijective)."""
    uses: dict[int, list[IterSplitExpr]] = {}
    marks: dict[int, IterMark] = {}
    pending: list[IterSplitExpr] = [arg for res in results for arg in res.args]
    visited: set[int] = set()
    while pending:
        split = pending.pop()
        mark = split.source
        uses.setdefault(id(mark), []).append(split)
        marks[id(mark)] = mark
        if mark.is_fused() and id(mark) not in visited:
            visited.add(id(mark))
            pending.extend(mark.source.args)
    errors: list[str] = []
    for mark_id, splits in uses.items():
        mark = marks[mark_id]
        splits = sorted(splits, key=lambda s: s.lower_factor)
        covered = 1
        for split in splits:
            if split.lower_factor < covered:
                errors.append(f"iterator `{_mark_str(mark)}` is used twice (digits overlap at lower factor "
                              f"{split.lower_factor})")
                break
            if level == "bijective" and split.lower_factor != covered:
                errors.append(f"iterator `{_mark_str(mark)}` is not fully covered: values with lower factor "
                              f"{covered} are never reached")
                break
            covered = split.lower_factor * split.extent
        else:
            if level == "bijective" and covered < mark.extent:
                errors.append(f"iterator `{_mark_str(mark)}` is not fully covered: only {covered} of its "
                              f"{mark.extent} values are reached")
            if covered > mark.extent and not mark.is_fused():
                errors.append(f"iterator `{_mark_str(mark)}` has digits beyond its extent {mark.extent}")
    if level == "bijective":
        for var, mark in detector.input_marks.values():
            if id(mark) not in uses:
                errors.append(f"input iterator {var.name} is not used by any index (not bijective)")
    return errors


def _mark_str(mark: IterMark) -> str:
    return str(_mark_to_expr(mark))


# -- public API ---------------------------------------------------------------------------------------
def detect_iter_map(indices: Sequence[Any], input_iters: Mapping[Var, Range], predicate: Any = True,
                    check_level: str = "surjective", analyzer: "Analyzer | None" = None,
                    simplify_trivial_iterators: bool = True) -> IterMapResult:
    """Detect whether ``indices`` are an affine fusion/split of ``input_iters`` (TVM's DetectIterMap).

    ``check_level`` is ``"bijective"`` (every input value maps to a distinct output, all inputs
    used), ``"surjective"`` (outputs independent, no iterator digit used twice) or ``"no_check"``.

    Example:
        >>> from ingot.ir import Var, Range
        >>> f = Var("f")
        >>> res = detect_iter_map([f // 4, f % 4], {f: Range(0, 32)}, check_level="bijective")
        >>> res.success, [str(normalize_iter_map_to_expr(x)) for x in res.indices]
        (True, ['f // 4', 'f % 4'])
    """
    from .analyzer import Analyzer

    level = str(getattr(check_level, "name", check_level)).lower()
    if level not in _LEVELS:
        raise ValueError(f"check_level must be one of {_LEVELS}, got {check_level!r}")
    ana = analyzer or Analyzer()
    try:
        detector = _Detector(input_iters, ana)
        detector.add_predicate(convert(predicate))
        results = []
        for index in indices:
            index = convert(index)
            summed = detector.rewrite(ana.simplify(index) if not isinstance(index, IntImm) else index)
            if len(summed.args) > 1 or (summed.args and summed.args[0].scale != 1):
                split = detector.fuse(summed, index)
                summed = IterSumExpr([split], summed.base, summed.dtype)
            results.append(summed)
    except _Fail as err:
        return IterMapResult([], [str(err)])
    if level != "no_check":
        errors = _check_marks(detector, results, level)
        if errors:
            return IterMapResult([], errors)
    return IterMapResult(results, [])


def _mark_to_expr(mark: IterMark) -> PrimExpr:
    if mark.is_fused():
        return normalize_iter_map_to_expr(mark.source)
    return mark.source


def _split_to_expr(split: IterSplitExpr) -> PrimExpr:
    value = _mark_to_expr(split.source)
    dtype = value.dtype
    if split.lower_factor != 1:
        value = E.FloorDiv(value, IntImm(dtype, split.lower_factor))
    if split.lower_factor * split.extent < split.source.extent:
        value = E.FloorMod(value, IntImm(dtype, split.extent))
    if split.scale != 1:
        value = E.Mul(value, IntImm(dtype, split.scale))
    return value


def normalize_iter_map_to_expr(expr: "IterSumExpr | IterSplitExpr") -> PrimExpr:
    """The ordinary expression of an `IterSumExpr`/`IterSplitExpr` (a digit prints as ``//``/``%``).

    Example:
        >>> from ingot.ir import Var, Range
        >>> i, j = Var("i"), Var("j")
        >>> res = detect_iter_map([(i * 4 + j) % 8], {i: Range(0, 4), j: Range(0, 4)})
        >>> str(normalize_iter_map_to_expr(res.indices[0]))
        '(i * 4 + j) % 8'
    """
    if isinstance(expr, IterSplitExpr):
        return _split_to_expr(expr)
    result: "PrimExpr | None" = None
    for arg in expr.args:
        term = _split_to_expr(arg)
        result = term if result is None else E.Add(result, term)
    if result is None:
        return expr.base
    if not (isinstance(expr.base, IntImm) and expr.base.value == 0):
        result = E.Add(result, expr.base)
    return result


def iter_map_simplify(indices: Sequence[Any], input_iters: Mapping[Var, Range], predicate: Any = True,
                      check_level: str = "surjective", analyzer: "Analyzer | None" = None) -> list[PrimExpr]:
    """Indices rewritten through iter-map detection (plain simplification when detection fails).

    Example:
        >>> from ingot.ir import Var, Range
        >>> i, j = Var("i"), Var("j")
        >>> [str(x) for x in iter_map_simplify([(i * 8 + j) // 8, (i * 8 + j) % 8],
        ...                                    {i: Range(0, 4), j: Range(0, 8)})]
        ['i', 'j']
    """
    from .analyzer import Analyzer

    ana = analyzer or Analyzer()
    for var, rng in input_iters.items():
        ana.bind(var, rng, allow_override=True)
    result = detect_iter_map(indices, input_iters, predicate, check_level, ana)
    if not result.success:
        return [ana.simplify(convert(i)) for i in indices]
    return [ana.simplify(normalize_iter_map_to_expr(s)) for s in result.indices]


__all__ = [
    "IterMark", "IterSplitExpr", "IterSumExpr", "IterMapResult", "detect_iter_map",
    "normalize_iter_map_to_expr", "iter_map_simplify",
]
