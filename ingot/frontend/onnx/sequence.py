"""Sequences and optionals known at import time (ONNX ``seq(tensor)`` / ``optional(T)`` values).

Note: the ONNX node tests and the exporters' sequence patterns (SplitToSequence → ConcatFromSequence,
SequenceConstruct → SequenceAt, Optional around a tensor) build sequences whose *structure* — how
many tensors, in which order, whether an optional holds a value — is fixed by the graph; only the
tensors' contents come at run time. The importer keeps such a value as a `SequenceValue` (a tuple of
graph values) or an `OptionalValue` (one value or None) in its value table, and the sequence ops act
on them at import time. A sequence that is a graph output becomes a tuple of tensors. A sequence
whose length depends on run-time data (a Loop that appends to one, a sequence graph input) is not
representable this way and is refused with a message naming the node.

Example:
    >>> import numpy as np
    >>> s = SequenceValue([np.zeros(2, "float32"), np.ones(2, "float32")], "float32")
    >>> len(s.items), s.elem_dtype
    (2, 'float32')
"""
from __future__ import annotations

from typing import Any, Sequence


class ImportTimeValue:
    """Base of importer values that are not tensors (sequences, optionals)."""

    def as_output(self, name: str) -> Any:
        """The graph value of this as graph output ``name``."""
        raise NotImplementedError


class SequenceValue(ImportTimeValue):
    """An ONNX sequence whose length is known at import time: ``items`` (graph exprs or numpy arrays).

    Example:
        >>> SequenceValue([], "int64").as_output("s")
        Traceback (most recent call last):
        ...
        ValueError: graph output 's' is an empty sequence; Ingot returns sequences as tuples of tensors and cannot return an empty one
    """

    def __init__(self, items: Sequence[Any], elem_dtype: "str | None" = None):
        self.items = tuple(items)
        self.elem_dtype = elem_dtype

    def as_output(self, name: str) -> Any:
        from ingot import graph as G

        from .importer import Context

        if not self.items:
            raise ValueError(f"graph output {name!r} is an empty sequence; Ingot returns sequences as tuples of "
                             f"tensors and cannot return an empty one")
        return G.Tuple([Context.to_expr(v) for v in self.items])


class OptionalValue(ImportTimeValue):
    """An ONNX optional: ``value`` (a tensor or `SequenceValue`) or None when empty.

    Example:
        >>> OptionalValue(None).value is None
        True
    """

    def __init__(self, value: Any):
        self.value = value

    def as_output(self, name: str) -> Any:
        if self.value is None:
            raise ValueError(f"graph output {name!r} is an empty optional; Ingot cannot return None from a "
                             f"compiled function")
        from .importer import _graph_output

        return _graph_output(self.value, name)
