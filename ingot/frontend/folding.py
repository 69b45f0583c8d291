"""Binding an operator call during import, folding it at once when all its inputs are constants.

Note: both importers (ONNX and PyTorch) keep static values (shapes, weights, index tensors) as
numpy arrays while they convert, so that shape subgraphs fold away before the graph exists. One
function does that for both, through the graph's own FoldConstant rule (the ops' numpy references).

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
