"""`ingot.graph.transform`: graph-level passes (each an `ingot.ir.transform` module pass).

Example:
    >>> from ingot.graph import transform
    >>> pipeline = transform.default_build_pipeline()
"""
from typing import Any

from .bind_params import BindParams, bind_params
from .dead_code_elimination import DeadCodeElimination
from .fold_constant import FoldConstant
from .fuse_ops import FuseOps, FuseTIR
from .legalize_ops import LegalizeOps


def default_build_pipeline() -> Any:
    """FoldConstant → FuseOps → FuseTIR → LegalizeOps → DeadCodeElimination, as one `Sequential`.

    Example:
        >>> p = default_build_pipeline()
    """
    from ingot.ir import transform

    return transform.Sequential(
        [FoldConstant(), DeadCodeElimination(), FuseOps(), FuseTIR(), LegalizeOps(), DeadCodeElimination()],
        name="graph.default_build_pipeline",
    )
