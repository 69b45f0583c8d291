"""Binding an operator call during import, folding it at once when all its inputs are constants.

Note: both importers (ONNX and PyTorch) keep static values (shapes, weights, index tensors) as
numpy arrays while they convert, so that shape subgraphs fold away before the graph exists. One
function does that for both, through the graph's own FoldConstant rule (the ops' numpy references),
and `FoldingContext` is the part of their converter contexts that works on it (``static``, ``emit``).

Example:
    >>> from ingot import graph as G
    >>> import numpy as np
    >>> bb = G.BlockBuilder()
    >>> emit_folded(bb, G.op.add(G.const(np.ones(2, "float32")), G.const(np.ones(2, "float32"))))
    array([2., 2.], dtype=float32)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import graph as G
from ingot.graph.transform.fold_constant import try_fold


def emit_folded(bb: Any, call: Any) -> Any:
    """``call``'s value as a numpy array when it folds, else the variable ``bb`` binds it to
    (variables and constants are returned as they are)."""
    if isinstance(call, G.Call):
        folded = try_fold(call)
        if folded is not None:
            return np.asarray(folded.data)
    if isinstance(call, (G.Var, G.Constant)):
        return call
    return bb.emit(call)


class FoldingContext:
    """The part of the importers' converter contexts (``onnx.importer.Context``,
    ``torch.importer.Context``) that both share: ``bb``, the block builder the graph is built with;
    `static`, a value's numpy array when it is known at import time; `emit`, bind a call or fold it.

    Example:
        >>> ctx = FoldingContext(G.BlockBuilder())
        >>> ctx.static(ctx.emit(G.op.add(G.const(np.ones(2, "float32")), G.const(np.ones(2, "float32")))))
        array([2., 2.], dtype=float32)
    """

    def __init__(self, bb: Any):
        self.bb = bb

    @staticmethod
    def static(value: Any) -> "np.ndarray | None":
        """The value as a numpy array when known at import time (a numpy array or a `Constant`), else None.

        Example:
            >>> FoldingContext.static(G.const(np.zeros(2, "float32")))
            array([0., 0.], dtype=float32)
        """
        if isinstance(value, np.ndarray):
            return value
        if isinstance(value, G.Constant):
            return value.data
        return None

    def emit(self, call: Any) -> Any:
        """Bind ``call`` (or fold it into a static numpy value when all its arguments are constants).

        Example: ``ctx.emit(G.op.relu(ctx.expr(x)))``.
        """
        return emit_folded(self.bb, call)
