"""Space generators: the design space of a workload as a list of stochastic schedules.

Note: a design space is a set of traces with sampling instructions. `ScheduleFn` wraps a user
function that schedules (and samples) a `Schedule`; `PostOrderApply` builds the space from
schedule rules applied to every block, consumers first (TVM's default). `SpaceGenerator`
also owns the post-processors and mutators used with its space.

Example:
    >>> # space = ScheduleFn(lambda sch: sch.parallel(sch.get_loops(sch.get_block("C"))[0]))
    >>> # traces = space.generate_design_space(mod)
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional, Sequence

logger = logging.getLogger("ingot.tune")


class SpaceGenerator:
    """Base class: ``generate_design_space(mod) -> list[Schedule]``.

    ``postprocs``/``mutators``: None takes the defaults.

    Example:
        >>> # schs = space.generate_design_space(mod); [s.trace for s in schs]
    """

    def __init__(self, postprocs: "Optional[Sequence[Any]]" = None, mutators: "Optional[Sequence[Any]]" = None):
        from ..mutator import default_mutators
        from ..postproc import default_postprocs

        self.postprocs = list(default_postprocs() if postprocs is None else postprocs)
        self.mutators = list(default_mutators() if mutators is None else mutators)

    def initialize_with_tune_context(self, context: Any) -> None:
        self.context = context
        for x in self.postprocs + self.mutators + list(getattr(self, "rules", [])):
            x.initialize_with_tune_context(context)

    def generate_design_space(self, mod: Any) -> "list[Any]":
        raise NotImplementedError


class ScheduleFn(SpaceGenerator):
    """A user's stochastic schedule: ``fn(sch)`` modifies ``sch`` in place (or returns one
    schedule or a list of schedules).

    Example:
        >>> def space(sch):
        ...     i, j, k = sch.get_loops(sch.get_block("C"))
        ...     sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
        >>> gen = ScheduleFn(space)
    """

    def __init__(self, fn: Callable, postprocs=None, mutators=None):
        if not callable(fn):
            raise TypeError(f"ScheduleFn expects a function taking a Schedule, got {type(fn).__name__}")
        super().__init__([] if postprocs is None else postprocs, mutators)
        self.fn = fn

    def generate_design_space(self, mod):
        from ingot.tir.schedule import Schedule

        sch = Schedule(mod, seed=0)
        result = self.fn(sch)
        if result is None:
            return [sch]
        return list(result) if isinstance(result, (list, tuple)) else [result]


class PostOrderApply(SpaceGenerator):
    """The default space: every rule on every block (consumers first); rules may branch.

    Example:
        >>> # PostOrderApply().generate_design_space(mod)   # default CPU rules
    """

    def __init__(self, rules: "Optional[Sequence[Any]]" = None, postprocs=None, mutators=None,
                 include_default_schedule: bool = True):
        from ..schedule_rule import default_rules

        super().__init__(postprocs, mutators)
        self.rules = list(default_rules() if rules is None else rules)
        self.include_default_schedule = include_default_schedule

    def generate_design_space(self, mod):
        from ingot.tir.schedule import Schedule

        base = Schedule(mod, seed=0)
        names = [(f, n) for f in base.state.func_names() for n in base.state.blocks(f) if n != "root"]
        if self.include_default_schedule and _has_winograd_stages(base, names):
            # The generic rules know nothing of a Winograd kernel's unrolled table lookups: their
            # candidates are all slower than `winograd_rule`, and some compile for minutes (gcc on
            # un-unrolled 36-way selects). Until a Winograd rule exists, the space is the default.
            default = default_schedule_space(mod, getattr(getattr(self, "context", None), "target", None))
            if default is not None:
                return [default]
        spaces = [base]
        for func_name, name in reversed(names):
            for rule in self.rules:
                out = []
                for sch in spaces:
                    if name not in sch.state.blocks(func_name):
                        out.append(sch)  # inlined by an earlier rule
                        continue
                    out.extend(rule.apply(sch, sch.get_block(name, func_name)))
                spaces = out
        if self.include_default_schedule:
            default = default_schedule_space(mod, getattr(getattr(self, "context", None), "target", None))
            if default is not None:
                spaces.append(default)
        return spaces


def _has_winograd_stages(sch: Any, names: list) -> bool:
    from ingot.ops.winograd import STAGE_KEY

    return any(STAGE_KEY in sch.get(sch.get_block(n, f)).annotations for f, n in names)


def default_schedule_space(mod: Any, target: Any) -> "Optional[Any]":
    """The rule-based default schedule (`ingot.ops.schedule.schedule_blocks`) of ``mod`` as a
    design-space member: a trace without sampling decisions, so the search measures it in its
    first round and starts from it (DESIGN.md: the tuner's space contains the default
    schedules). None when it schedules nothing or fails (logged).

    Example:
        >>> # sch = default_schedule_space(mod, Target("llvm -num-cores=2")); print(sch.trace)
    """
    from ingot.tir.schedule import Schedule

    if target is None:
        return None
    try:
        from ingot.ops.schedule import schedule_blocks

        sch = schedule_blocks(Schedule(mod, seed=0), target)
    except Exception as err:  # the default rules do not cover this workload
        logger.info("default schedule not in the design space: %s", str(err).splitlines()[0] if str(err) else err)
        return None
    return sch if any(not i.kind.is_pure for i in sch.trace.insts) else None


__all__ = ["SpaceGenerator", "ScheduleFn", "PostOrderApply"]
