"""TE computes of the graph operators the PyTorch importer added: ``broadcast_to`` (``expand``).
(``pad`` reuses `ingot.ops.nn.pad`.)

Example:
    >>> from ingot import te
    >>> y = broadcast_to(te.placeholder((1, 3), name="x"), (4, 3))
    >>> [int(d) for d in y.shape]
    [4, 3]
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.ir import convert

from ._util import broadcast_index, compute


def broadcast_to(x: Any, shape: Sequence[Any]) -> Any:
    """``numpy.broadcast_to(x, shape)`` materialized (size-1 axes repeat; missing leading axes added).

    Example:
        >>> from ingot import te
        >>> y = broadcast_to(te.placeholder((3,), name="x"), (2, 3))
        >>> len(y.shape)
        2
    """
    out_shape = tuple(convert(d) for d in shape)
    return compute(out_shape, lambda idx: x[broadcast_index(x, out_shape, idx)], "T_broadcast_to", tag="broadcast")
