"""`ingot.graph.transform`: graph-level passes (each an `ingot.ir.transform` module pass).

Example:
    >>> from ingot.graph import transform
    >>> pipeline = transform.default_build_pipeline()
"""
from typing import Any

from .bind_params import BindParams, bind_params
from .convert_layout import ConvertLayout
from .eliminate_common_subexpr import EliminateCommonSubexpr
from .dead_code_elimination import DeadCodeElimination
from .fold_constant import FoldConstant
from .fuse_ops import FuseOps, FuseTIR
from .legalize_ops import LegalizeOps
from .pack_weights import PackWeights
from .simplify_inference import SimplifyInference


def default_build_pipeline() -> Any:
    """FoldConstant → SimplifyInference → FoldConstant → EliminateCommonSubexpr →
    DeadCodeElimination → FuseOps → PackWeights → FuseTIR → LegalizeOps → DeadCodeElimination, as
    one `Sequential` (ConvertLayout is opt-in; PackWeights pre-packs constant conv/dense weights).

    Example:
        >>> p = default_build_pipeline()
    """
    from ingot.ir import transform

    return transform.Sequential(
        [FoldConstant(), SimplifyInference(), FoldConstant(), EliminateCommonSubexpr(), DeadCodeElimination(),
         FuseOps(), PackWeights(), FuseTIR(), LegalizeOps(), DeadCodeElimination()],
        name="graph.default_build_pipeline",
    )
