"""`ingot.graph`: the graph IR (TVM Relax): struct info, expressions, op registry, builder, passes,
and the Python executor.

Example:
    >>> from ingot import graph as G
    >>> bb = G.BlockBuilder()
    >>> x = G.Var("x", G.TensorStructInfo((1, 784), "float32"))
    >>> w = G.Var("w", G.TensorStructInfo((128, 784), "float32"))
    >>> with bb.function("main", [x, w]):
    ...     with bb.dataflow():
    ...         lv0 = bb.emit(G.op.linear(x, w))
    ...         gv = bb.emit_output(G.op.relu(lv0))
    ...     bb.emit_func_output(gv)
    >>> "R.linear(x, w)" in bb.get().script()
    True
"""
from ingot.ir.module import GlobalVar, IRModule
from ingot.support import lazy_exports

from . import op, op_registry
from . import printer as _printer  # noqa: F401 - registers the text printers
from . import parser as _parser  # noqa: F401 - registers @R.function with ingot.script's parser
from . import script
from .block_builder import BlockBuilder
from .control_flow import If
from .expr import (
    BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc, Function, Op, SeqExpr, ShapeExpr,
    Tuple, TupleGetItem, Var, VarBinding, const,
)
from .op_registry import OpPattern, register_op
from .struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
    TupleStructInfo,
)


# Passes and the executor import heavier layers; load them on first use.
__getattr__, __dir__ = lazy_exports(__name__, {
    name: ("ingot.graph.executor", name)
    for name in ("build", "Executable", "Executor", "VirtualMachine", "load_executable")
}, submodules=("transform",))


def _register_loader() -> None:
    # The runtime-level loader finds compiled models through this packed function (or through the
    # manifest's "loader" entry) without ingot.runtime importing ingot.graph.
    from ingot.runtime import register_func

    def load(path: str):
        from .artifact import load_executable

        return load_executable(path)

    def make_executor(executable, device=None):
        from .executor import Executor

        return Executor(executable, device)

    register_func("ingot.graph.load", load, override=True)
    register_func("ingot.graph.Executor", make_executor, override=True)


_register_loader()
