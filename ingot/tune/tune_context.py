"""`TuneContext`: everything about one tuning task (TVM's ``ms.TuneContext``).

Example:
    >>> # ctx = TuneContext(mod, "llvm -num-cores=2", space_generator=PostOrderApply(),
    >>> #                   search_strategy=EvolutiveSearch(), task_name="matmul")
"""
from __future__ import annotations

from typing import Any, Optional

from .database.record import as_module


class TuneContext:
    """One task: the workload, target, design space, search strategy, feature extractor,
    name, weight (how many times the model calls it) and FLOP count.

    Example:
        >>> # TuneContext(mod, "llvm").num_cores
    """

    def __init__(self, mod: Any, target: Any = "llvm", space_generator: Any = None, search_strategy: Any = None,
                 task_name: Optional[str] = None, weight: float = 1.0, seed: "int | None" = None,
                 feature_extractor: Any = None, flop_count: "float | None" = None):
        from ingot.target import as_target

        from .feature_extractor import PerStoreFeature
        from .search_strategy import create
        from .space_generator import PostOrderApply
        from .utils import estimate_flops

        self.mod = as_module(mod)
        self.target = as_target(target)
        self.space_generator = space_generator if space_generator is not None else PostOrderApply()
        self.search_strategy = create(search_strategy if search_strategy is not None else "evolutionary", seed)
        self.task_name = task_name or _default_name(self.mod)
        if weight <= 0:
            raise ValueError(f"task {self.task_name!r}: weight must be > 0, got {weight}")
        self.weight = float(weight)
        self.seed = 0 if seed is None else int(seed)
        self.feature_extractor = feature_extractor or PerStoreFeature()
        self.flop_count = float(flop_count) if flop_count is not None else estimate_flops(self.mod)
        self.space_generator.initialize_with_tune_context(self)

    @property
    def num_cores(self) -> int:
        return int(self.target.num_cores)

    def generate_design_space(self) -> list:
        """The design space schedules of this task.

        Example:
            >>> # [s.trace for s in ctx.generate_design_space()]
        """
        return self.space_generator.generate_design_space(self.mod)

    def __repr__(self) -> str:
        return f"TuneContext({self.task_name!r}, target={str(self.target)!r}, weight={self.weight})"


def _default_name(mod: Any) -> str:
    from ingot.ir.functor import post_order_visit
    from ingot.tir.function import PrimFunc
    from ingot.tir.stmt import Block

    for name, func in mod.items():
        if isinstance(func, PrimFunc):
            blocks: list[str] = []
            post_order_visit(func.body, lambda n, found=blocks: found.append(n.name_hint)
                             if isinstance(n, Block) and n.name_hint != "root" else None)
            return "_".join(blocks[:3]) if name == "main" and blocks else str(name)
    return "task"
