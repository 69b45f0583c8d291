"""`ingot.arith`: integer analysis (TVM's ``tvm.arith``).

The simplifier, constant bounds, interval sets, region relaxation and iter-map detection that
schedules and lowering passes rely on. Imports only `ingot.ir`.

Example:
    >>> from ingot import arith
    >>> from ingot.ir import Var, Range
    >>> ana = arith.Analyzer(); i, j = Var("i"), Var("j")
    >>> ana.bind(i, Range(0, 8)); ana.bind(j, Range(0, 16))
    >>> str(ana.simplify((i * 16 + j) // 16))
    'i'
"""
from .analyzer import Analyzer
from .canonical import SumForm, expr_key
from .const_int_bound import ConstIntBound
from .index_map import IndexMap
from .int_set import IntSet, neg_inf, pos_inf, relax_region, union_region
from .iter_map import (
    IterMapResult, IterMark, IterSplitExpr, IterSumExpr, detect_iter_map, iter_map_simplify,
    normalize_iter_map_to_expr,
)
from .iter_map_ops import inverse_affine_map, subspace_divide

__all__ = [
    "Analyzer", "ConstIntBound", "IndexMap", "IntSet", "IterMapResult", "IterMark", "IterSplitExpr",
    "IterSumExpr", "SumForm", "detect_iter_map", "expr_key", "inverse_affine_map", "iter_map_simplify",
    "neg_inf", "normalize_iter_map_to_expr", "pos_inf", "relax_region", "subspace_divide", "union_region",
]
