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
from .pack_recurrent import PackRecurrentWeights
from .pack_weights import PackWeights
from .partition_graph import (
    AnnotateTarget, FuseOpsByPattern, MergeCompilerRegions, MergeCompositeFunctions, PartitionGraph,
    format_partition_report, partition_report,
)
from .simplify_inference import SimplifyInference
from .sink_reshape import SinkReshape


LAYOUTS = ("auto", "NHWC", "NCHW")


def resolve_layout(target: Any = None, layout: str = "auto") -> str:
    """The activation layout the build pipeline uses: ``"NHWC"`` or ``"NCHW"``.

    ``layout="auto"`` picks NHWC for CPU targets (channels innermost: convs, pools and elementwise
    ops vectorize over contiguous channels) and NCHW for CUDA (its conv schedules are NCHW);
    ``target`` defaults to `Target.current()`, else the host CPU.

    Example:
        >>> resolve_layout("llvm"), resolve_layout("cuda"), resolve_layout("llvm", "NCHW")
        ('NHWC', 'NCHW', 'NCHW')
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r} is not one of {LAYOUTS}: use 'auto' (NHWC on CPUs, NCHW on CUDA), "
                         f"'NHWC' or 'NCHW' (keep the model's layout)")
    if layout != "auto":
        return layout
    from ingot.target import as_target

    return "NHWC" if as_target(target).is_cpu else "NCHW"


def default_build_pipeline(target: Any = None, layout: str = "auto") -> Any:
    """FoldConstant → SimplifyInference → FoldConstant → [ConvertLayout → FoldConstant] →
    EliminateCommonSubexpr → DeadCodeElimination → PackRecurrentWeights → FuseOps → PackWeights → FuseTIR →
    LegalizeOps → DeadCodeElimination, as one `Sequential`.

    ConvertLayout (NCHW convolutional regions run in NHWC, see its module note) is in the pipeline
    when `resolve_layout(target, layout)` is ``"NHWC"``: by default on CPU targets, not on CUDA;
    ``layout="NCHW"`` keeps the model's layout (``ingot.compile(..., layout="NCHW")``,
    ``G.build(..., layout="NCHW")``). PackWeights pre-packs constant conv/dense weights, and
    PackRecurrentWeights a recurrent layer's ``R^T`` for the target's vector width.

    Example:
        >>> p = default_build_pipeline()                     # CPU host: NHWC
        >>> p = default_build_pipeline("llvm", layout="NCHW")  # keep NCHW
    """
    from ingot.ir import transform

    passes = [FoldConstant(), SimplifyInference(), FoldConstant()]
    if resolve_layout(target, layout) == "NHWC":
        passes += [ConvertLayout(), FoldConstant()]
    passes += [EliminateCommonSubexpr(), DeadCodeElimination(), PackRecurrentWeights(target), FuseOps(),
               PackWeights(target=target), FuseTIR(), LegalizeOps(),
               DeadCodeElimination()]
    return transform.Sequential(passes, name="graph.default_build_pipeline")
