"""Schedule rules: the building blocks of the default design space.

Example:
    >>> from ingot.tune.schedule_rule import default_rules
    >>> [repr(r) for r in default_rules()]
    ['AutoInline', 'MultiLevelTiling', 'ParallelVectorizeUnroll', 'RandomComputeLocation']
"""
from .auto_inline import AutoInline
from .base import ScheduleRule, has_primitive, loop_iter_kinds
from .multi_level_tiling import MultiLevelTiling
from .parallel_vectorize_unroll import ParallelVectorizeUnroll
from .random_compute_location import RandomComputeLocation


def default_rules(target=None) -> list:
    """TVM's default CPU rules: AutoInline, MultiLevelTiling(SSRSRS), ParallelVectorizeUnroll,
    RandomComputeLocation.

    Example:
        >>> len(default_rules())
        4
    """
    return [AutoInline(), MultiLevelTiling("SSRSRS"), ParallelVectorizeUnroll(), RandomComputeLocation()]


__all__ = ["ScheduleRule", "AutoInline", "MultiLevelTiling", "ParallelVectorizeUnroll", "RandomComputeLocation",
           "default_rules", "has_primitive", "loop_iter_kinds"]
