"""Schedule rules: the building blocks of the default design space.

Example:
    >>> from ingot.tune.schedule_rule import default_rules
    >>> [repr(r) for r in default_rules()]
    ['AutoInline', 'NhwcConv', 'BlockedGemm', 'SmallGemm', 'MultiLevelTiling', 'ParallelVectorizeUnroll', 'RandomComputeLocation']
"""
from .auto_inline import AutoInline
from .blocked_gemm import BlockedGemm
from .conv_nhwc import NhwcConv
from .base import ScheduleRule, has_primitive, loop_iter_kinds
from .multi_level_tiling import MultiLevelTiling
from .parallel_vectorize_unroll import ParallelVectorizeUnroll
from .random_compute_location import RandomComputeLocation
from .small_gemm import SmallGemm


def default_rules(target=None) -> list:
    """TVM's default CPU rules (AutoInline, MultiLevelTiling(SSRSRS), ParallelVectorizeUnroll,
    RandomComputeLocation) plus `BlockedGemm` (the tunable GotoBLAS blocking of large GEMMs,
    beside MultiLevelTiling: it returns the untouched block too), `SmallGemm` (the tunable
    register tile and k unrolling of plain GEMMs too small for it, likewise) and `NhwcConv` (the
    tunable register-tiled NHWC conv, likewise).

    Example:
        >>> len(default_rules())
        7
    """
    return [AutoInline(), NhwcConv(), BlockedGemm(), SmallGemm(), MultiLevelTiling("SSRSRS"), ParallelVectorizeUnroll(), RandomComputeLocation()]


__all__ = ["ScheduleRule", "AutoInline", "BlockedGemm", "NhwcConv", "MultiLevelTiling", "ParallelVectorizeUnroll", "RandomComputeLocation",
           "SmallGemm",
           "default_rules", "has_primitive", "loop_iter_kinds"]
