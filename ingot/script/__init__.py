"""`ingot.script`: TVMScript printer and parser (TVM's ``tvm.script``).

Write tensor programs as Python (``@T.prim_func``, ``@I.ir_module``); print any TensorIR node,
function or module back as the same syntax (``print(func)``, ``mod.script()``). Parsing reads the
source with ``ast`` and never runs the function. Printing then parsing gives a structurally equal
program (`ingot.ir.structural_equal`). Graph functions (``@R.function``, ``R.call_tir``) come with
``from ingot.script import relax as R``, TVM's spelling of `ingot.graph.script`. See docs/tvmscript.md.

Example:
    >>> import ingot
    >>> from ingot.script import tir as T
    >>> @ingot.script.ir_module
    ... class MyModule:
    ...     @T.prim_func
    ...     def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    ...         for i in range(8):
    ...             with T.block("B"):
    ...                 vi = T.axis.spatial(8, i)
    ...                 B[vi] = A[vi] * 2.0
    >>> reparsed = ingot.script.from_source(MyModule.script())
    >>> ingot.ir.structural_equal(reparsed, MyModule)
    True
"""
from __future__ import annotations

from . import ir, tir
from .error import ParseError
from .ir import ir_module
from .parser import from_source
from .printer import script, install_printers
from .tir import prim_func

install_printers()

__all__ = ["ir", "tir", "ir_module", "prim_func", "from_source", "script", "ParseError"]
