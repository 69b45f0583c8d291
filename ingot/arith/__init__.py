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
from .int_set import IntSet, neg_inf, pos_inf, relax_region, union_region

__all__ = [
    "Analyzer", "ConstIntBound", "IntSet", "SumForm", "expr_key", "neg_inf", "pos_inf",
    "relax_region", "union_region",
]
