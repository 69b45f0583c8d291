"""`IndexMap`: a function from buffer indices to buffer indices (layout transformations).

Note: an index map is a list of fresh variables (``initial_indices``) and one expression per
output dimension over them (``final_indices``). Its inverse exists when the map is a bijective
iter map over the input shape; it is computed by `inverse_affine_map`, so a packing layout
``(n, k) -> (n // 16, k, n % 16)`` inverts to ``(a, b, c) -> (a * 16 + c, b)``.

Example:
    >>> m = IndexMap.from_func(lambda n, k: (n // 16, k, n % 16))
    >>> [int(x) for x in m.map_shape((64, 32))]
    [4, 32, 16]
    >>> str(m.inverse((64, 32)))
    'IndexMap(lambda i0, i1, i2: (i0 * 16 + i2, i1))'
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ingot.ir.expr import IntImm, PrimExpr, Range, Var, convert
from ingot.ir.functor import substitute

from .iter_map import detect_iter_map
from .iter_map_ops import inverse_affine_map

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer


class IndexMap:
    """``lambda *initial_indices: final_indices``.

    Example:
        >>> i, j = Var("i"), Var("j")
        >>> m = IndexMap([i, j], [j, i])
        >>> [str(x) for x in m.map_indices([Var("a"), 3])]
        ['3', 'a']
    """

    __slots__ = ("initial_indices", "final_indices", "inverse_index_map")

    def __init__(self, initial_indices: Sequence[Var], final_indices: Sequence[Any],
                 inverse_index_map: "IndexMap | None" = None):
        object.__setattr__(self, "initial_indices", tuple(initial_indices))
        object.__setattr__(self, "final_indices", tuple(convert(e) for e in final_indices))
        object.__setattr__(self, "inverse_index_map", inverse_index_map)

    def __setattr__(self, name, value):
        raise AttributeError("IndexMap is immutable")

    @staticmethod
    def from_func(func: Callable[..., Any], ndim: "int | None" = None, index_dtype: str = "int32") -> "IndexMap":
        """Build a map from a Python function of the input indices (one parameter per dimension).

        Example:
            >>> str(IndexMap.from_func(lambda i, j: (j, i)))
            'IndexMap(lambda i, j: (j, i))'
        """
        params = list(inspect.signature(func).parameters.values())
        if ndim is None:
            if any(p.kind == p.VAR_POSITIONAL for p in params):
                raise ValueError("IndexMap.from_func: pass ndim= for a function taking *args")
            names = [p.name for p in params]
        else:
            names = [p.name for p in params if p.kind != p.VAR_POSITIONAL][:ndim]
            names += [f"i{k}" for k in range(len(names), ndim)]
        variables = [Var(name, index_dtype) for name in names]
        final = func(*variables)
        if not isinstance(final, (list, tuple)):
            final = [final]
        return IndexMap(variables, final)

    @property
    def ndim_in(self) -> int:
        return len(self.initial_indices)

    @property
    def ndim_out(self) -> int:
        return len(self.final_indices)

    def map_indices(self, indices: Sequence[Any], analyzer: "Analyzer | None" = None) -> list[PrimExpr]:
        """Apply the map to concrete or symbolic indices (simplified).

        Example:
            >>> m = IndexMap.from_func(lambda n: (n // 4, n % 4))
            >>> [int(x) for x in m.map_indices([13])]
            [3, 1]
        """
        from .analyzer import Analyzer

        if len(indices) != self.ndim_in:
            raise ValueError(f"{self} takes {self.ndim_in} indices, got {len(indices)}")
        ana = analyzer or Analyzer()
        vmap = {var: convert(value) for var, value in zip(self.initial_indices, indices)}
        return [ana.simplify(substitute(e, vmap)) for e in self.final_indices]

    def map_shape(self, shape: Sequence[Any], analyzer: "Analyzer | None" = None) -> list[PrimExpr]:
        """The shape of the output space when the inputs range over ``shape``.

        Example:
            >>> [int(x) for x in IndexMap.from_func(lambda i, j: (j, i)).map_shape((2, 3))]
            [3, 2]
        """
        from .analyzer import Analyzer

        ana = analyzer or Analyzer()
        doms = self._domains(shape)
        out = []
        for expr in self.final_indices:
            rng = ana.int_set(expr, doms).to_range()
            out.append(ana.simplify(rng.extent))
        return out

    def _domains(self, shape: Sequence[Any]) -> dict:
        if len(shape) != self.ndim_in:
            raise ValueError(f"{self} takes {self.ndim_in} dimensions, got shape {list(shape)}")
        return {var: Range.from_min_extent(IntImm(var.dtype, 0), convert(ext))
                for var, ext in zip(self.initial_indices, shape)}

    def is_bijective(self, shape: Sequence[Any]) -> bool:
        """Whether the map is a bijection from ``shape`` onto its image.

        Example:
            >>> IndexMap.from_func(lambda i: (i // 2,)).is_bijective((8,))
            False
        """
        return detect_iter_map(self.final_indices, self._domains(shape), check_level="bijective").success

    def inverse(self, shape: Sequence[Any], analyzer: "Analyzer | None" = None) -> "IndexMap":
        """The inverse map; raises ValueError (saying why) when the map is not bijective over ``shape``.

        Example:
            >>> str(IndexMap.from_func(lambda i, j: (j, i)).inverse((2, 3)))
            'IndexMap(lambda i0, i1: (i1, i0))'
        """
        from .analyzer import Analyzer

        result = detect_iter_map(self.final_indices, self._domains(shape), check_level="bijective")
        if not result.success:
            raise ValueError(f"{self} is not bijective over shape {list(shape)}, so it has no inverse: "
                             + "; ".join(result.errors))
        dtype = self.initial_indices[0].dtype if self.initial_indices else "int32"
        outputs = [Var(f"i{k}", dtype) for k in range(self.ndim_out)]
        ana = analyzer or Analyzer()
        for var, ext in zip(outputs, self.map_shape(shape)):
            ana.bind(var, Range.from_min_extent(IntImm(var.dtype, 0), ext), allow_override=True)
        solved = inverse_affine_map(result.indices, outputs, ana)
        final = [solved.get(var, IntImm(var.dtype, 0)) for var in self.initial_indices]
        return IndexMap(outputs, final, self)

    def __repr__(self) -> str:
        args = ", ".join(v.name for v in self.initial_indices)
        outs = ", ".join(str(e) for e in self.final_indices)
        if len(self.final_indices) == 1:
            outs += ","
        return f"IndexMap(lambda {args}: ({outs}))"

    __str__ = __repr__


__all__ = ["IndexMap"]
