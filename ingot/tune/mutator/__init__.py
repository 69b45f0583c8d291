"""Mutators: change one decision (or annotation value) of a trace, for evolutionary search.

Note: a mutator takes a design-space trace (postprocs removed) and returns a new trace or
None when it has nothing to change. Mutated decisions are validated when the trace is replayed
(a bad one makes the replay fail and the candidate is dropped), so mutators may propose freely.

Example:
    >>> [repr(m) for m in default_mutators()]
    ['MutateTileSize', 'MutateUnroll', 'MutateParallel', 'MutateComputeLocation']
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ingot.tir.schedule.instruction import Instruction
from ingot.tir.schedule.trace import Trace


class Mutator:
    """Base class: ``apply(trace, rng) -> Trace | None``.

    Example:
        >>> # new_trace = MutateTileSize().apply(trace, np.random.default_rng(0))
    """

    def initialize_with_tune_context(self, context: Any) -> None:
        self.context = context

    def apply(self, trace: Trace, rng: np.random.Generator) -> Optional[Trace]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__


def _sampling(trace: Trace, kind: str) -> list:
    return [i for i in trace.insts if i.kind.name == kind and i in trace.decisions]


class MutateTileSize(Mutator):
    """Move a prime factor from one tile of a `sample_perfect_tile` decision to another,
    keeping the innermost tile within ``max_innermost_factor``.

    Example:
        >>> # [8, 1, 4, 2] -> [4, 2, 4, 2]
    """

    def apply(self, trace, rng):
        insts = _sampling(trace, "sample_perfect_tile")
        rng.shuffle(insts)
        for inst in insts:
            tiles = [int(x) for x in trace.decisions[inst]]
            max_inner = int(inst.attrs[1]) if len(inst.attrs) > 1 and inst.attrs[1] else 0
            sources = [i for i, t in enumerate(tiles) if t > 1]
            if not sources or len(tiles) < 2:
                continue
            for _ in range(8):
                src = int(rng.choice(sources))
                dst = int(rng.choice([i for i in range(len(tiles)) if i != src]))
                factor = _random_prime_factor(tiles[src], rng)
                new = list(tiles)
                new[src] //= factor
                new[dst] *= factor
                if max_inner and new[-1] > max_inner:
                    continue
                return trace.with_decision(inst, new, remove_postproc=True)
        return None


def _random_prime_factor(n: int, rng) -> int:
    primes, d = [], 2
    while d * d <= n:
        while n % d == 0:
            primes.append(d)
            n //= d
        d += 1
    if n > 1:
        primes.append(n)
    return int(rng.choice(primes))


class MutateUnroll(Mutator):
    """Pick another candidate of a `sample_categorical` that feeds an unroll annotation.

    Example:
        >>> # unroll_explicit 16 -> 512
    """

    def apply(self, trace, rng):
        feeding = _annotated_values(trace, "meta_schedule.unroll_explicit")
        insts = [i for i in _sampling(trace, "sample_categorical") if id(i.outputs[0]) in feeding]
        if not insts:
            return None
        inst = insts[int(rng.integers(len(insts)))]
        n = len(inst.attrs[0])
        if n < 2:
            return None
        old = int(trace.decisions[inst])
        new = int(rng.choice([i for i in range(n) if i != old]))
        return trace.with_decision(inst, new, remove_postproc=True)


def _annotated_values(trace: Trace, key: str) -> set:
    out = set()
    for inst in trace.insts:
        if inst.kind.name == "annotate" and len(inst.inputs) >= 3 and inst.inputs[1] == key:
            out.add(id(inst.inputs[2]))
    return out


class MutateParallel(Mutator):
    """Change the ``meta_schedule.parallel`` limit of a block to another multiple of the cores.

    Example:
        >>> # meta_schedule.parallel 32 -> 4
    """

    def apply(self, trace, rng):
        from ingot.tir.schedule.trace import _without_postproc

        insts = _without_postproc(trace.insts)
        sites = [k for k, i in enumerate(insts)
                 if i.kind.name == "annotate" and len(i.inputs) >= 3 and i.inputs[1] == "meta_schedule.parallel"
                 and isinstance(i.inputs[2], int)]
        if not sites:
            return None
        k = sites[int(rng.integers(len(sites)))]
        old = insts[k]
        cores = getattr(getattr(self, "context", None), "num_cores", None) or 1
        choices = [c for c in (1, cores, 2 * cores, 4 * cores, 16 * cores, 64 * cores, 256 * cores) if c != old.inputs[2]]
        new_inst = Instruction(old.kind, [old.inputs[0], old.inputs[1], int(rng.choice(choices))], old.attrs, old.outputs)
        insts = insts[:k] + [new_inst] + insts[k + 1:]
        keep = set(insts)
        return Trace(insts, {i: d for i, d in trace.decisions.items() if i in keep})


class MutateComputeLocation(Mutator):
    """Propose another `sample_compute_location` decision (validated when replayed).

    Example:
        >>> # compute location 2 -> -1 (root)
    """

    def apply(self, trace, rng):
        insts = _sampling(trace, "sample_compute_location")
        if not insts:
            return None
        inst = insts[int(rng.integers(len(insts)))]
        old = int(trace.decisions[inst])
        choices = [d for d in range(-2, old + 4) if d != old]
        return trace.with_decision(inst, int(rng.choice(choices)), remove_postproc=True)


def default_mutators() -> list:
    """TVM's CPU mutators.

    Example:
        >>> len(default_mutators())
        4
    """
    return [MutateTileSize(), MutateUnroll(), MutateParallel(), MutateComputeLocation()]


DEFAULT_MUTATOR_PROBS = {"MutateTileSize": 0.9, "MutateUnroll": 0.08, "MutateParallel": 0.02, "MutateComputeLocation": 0.05}

__all__ = ["Mutator", "MutateTileSize", "MutateUnroll", "MutateParallel", "MutateComputeLocation",
           "default_mutators", "DEFAULT_MUTATOR_PROBS"]
