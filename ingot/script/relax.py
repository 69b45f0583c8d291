"""``from ingot.script import relax as R``: TVM's spelling of `ingot.graph.script`, the ``R``
namespace of graph functions (``@R.function``, ``R.call_tir``, ``R.dataflow``, ``R.Tensor``...).

Note: a compatibility alias (tests/test_layering.py lists it): graph functions live in
`ingot.graph`, above `ingot.script`, so this module imports upward; nothing in Ingot imports it.
Printed graph modules (``mod.script()``) name it in their header and parse back with
`ingot.script.from_source`.

Example:
    >>> from ingot.script import relax as R
    >>> str(R.Tensor((1, 784), "float32"))
    'R.Tensor((1, 784), dtype="float32")'
"""
from ingot.graph import script as _R
from ingot.graph.script import (  # noqa: F401
    Callable, ExternFunc, Object, Prim, Shape, Tensor, Tuple, call_dps_packed, call_packed, call_tir, const,
    dataflow, func_attr, function, output, shape,
)

__all__ = list(_R.__all__)


def __getattr__(name: str):
    # R.<op>: every registered graph operator (R.relu, R.matmul, ...).
    return getattr(_R, name)
