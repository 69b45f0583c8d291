"""`ingot.ops.schedule`: rule-based default schedules (DLight-style) for untuned kernels.

``default_schedule(func, target)`` classifies each block of a scheduled-level PrimFunc (GEMM-like,
reduction, elementwise) and applies a template parameterized by the target's vector lanes and
core count; see `default.py`. The graph compiler calls it for each fused PrimFunc.

Example:
    >>> from ingot import te
    >>> from ingot.ops.schedule import default_schedule
    >>> A = te.placeholder((4, 32), name="A")
    >>> B = te.compute((4, 32), lambda i, j: A[i, j] + 1.0, name="B")
    >>> f = default_schedule(te.create_prim_func([A, B]), "llvm -num-cores=2")
"""
from .analysis import BlockInfo, analyze_block, panel_layout  # noqa: F401
from .blocked import blocked_gemm_rule  # noqa: F401
from .conv import conv_oc_rule  # noqa: F401
from .default import RULES, default_schedule, schedule_blocks  # noqa: F401
from .reduction import row_reduction_rule  # noqa: F401
from .rules import choose_mr, choose_nr, elementwise_rule, gemm_rule, parallel_vectorize, reduction_rule  # noqa: F401
