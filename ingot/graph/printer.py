"""Relax-like text for graph IR (``mod.script()``, ``print(func)``): shapes and dtypes on every binding.

Note: registered with `ingot.ir.printer.register_node_printer` when `ingot.graph` is imported. The
module printer prints graph functions itself and every other function (``tir.PrimFunc``) through
`ingot.ir.printer.node_to_str`, so TensorIR prints in TVMScript once `ingot.script` is loaded.
The text parses back (`ingot.script.from_source`, with the ``R`` namespace of `ingot.graph.script`);
constants of more than 4 elements print as ``metadata["relax.expr.Constant"][i]``, numbered across
the module, and `metadata_of` gives the table to parse such text with.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
    >>> print(G.Function([x], G.SeqExpr([], x), attrs={"global_symbol": "f"}))
    @R.function
    def f(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        return x
"""
from __future__ import annotations

import json
from typing import Any


from ingot.ir import IRModule, PrimExpr, Var as PrimVar, collect_vars
from ingot.ir.module import GlobalVar
from ingot.ir.printer import expr_to_str as prim_to_str, node_to_str, register_node_printer

from . import expr as E
from . import struct_info as S


def _dim_str(dim: Any) -> str:
    return str(dim) if isinstance(dim, int) else prim_to_str(dim)


def _tuple_str(items: list) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def struct_info_to_str(sinfo: S.StructInfo) -> str:
    """``R.Tensor((n, 784), dtype="float32")`` and friends.

    Example:
        >>> struct_info_to_str(S.TensorStructInfo((1, 2), "int8"))
        'R.Tensor((1, 2), dtype="int8")'
    """
    if isinstance(sinfo, S.TensorStructInfo):
        if sinfo.shape is not None:
            return f'R.Tensor({_tuple_str([_dim_str(d) for d in sinfo.shape])}, dtype="{sinfo.dtype}")'
        if sinfo.ndim >= 0:
            return f'R.Tensor(dtype="{sinfo.dtype}", ndim={sinfo.ndim})'
        return f'R.Tensor(dtype="{sinfo.dtype}")'
    if isinstance(sinfo, S.TupleStructInfo):
        return "R.Tuple(" + ", ".join(struct_info_to_str(f) for f in sinfo.fields) + ")"
    if isinstance(sinfo, S.ShapeStructInfo):
        if sinfo.values is not None:
            return f"R.Shape([{', '.join(_dim_str(d) for d in sinfo.values)}])"
        return f"R.Shape(ndim={sinfo.ndim})"
    if isinstance(sinfo, S.PrimStructInfo):
        return f'R.Prim("{sinfo.dtype}")'
    if isinstance(sinfo, S.FuncStructInfo):
        return "R.Callable((" + ", ".join(struct_info_to_str(p) for p in sinfo.params) + "), " + \
            struct_info_to_str(sinfo.ret) + ")"
    return "R.Object"


class _FunctionPrinter:
    """Prints one function, giving each variable a unique printed name."""

    def __init__(self, constants: "list | None" = None):
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.constants: list[E.Constant] = [] if constants is None else constants

    def name_of(self, var: Any) -> str:
        key = id(var)
        if key not in self.names:
            base = getattr(var, "name_hint", None) or getattr(var, "name", "v")
            name, k = base, 1
            while name in self.used:
                name, k = f"{base}_{k}", k + 1
            self.used.add(name)
            self.names[key] = name
        return self.names[key]

    def prim(self, e: Any) -> str:
        if isinstance(e, int):
            return str(e)
        return prim_to_str(e, self.name_of)

    def sinfo(self, sinfo: S.StructInfo) -> str:
        if isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None:
            return f'R.Tensor({_tuple_str([self.prim(d) for d in sinfo.shape])}, dtype="{sinfo.dtype}")'
        if isinstance(sinfo, S.TupleStructInfo):
            return "R.Tuple(" + ", ".join(self.sinfo(f) for f in sinfo.fields) + ")"
        return struct_info_to_str(sinfo)

    def attr(self, value: Any) -> str:
        if isinstance(value, (PrimExpr,)):
            return self.prim(value)
        if isinstance(value, tuple):
            return "[" + ", ".join(self.attr(v) for v in value) + "]"
        if isinstance(value, str):  # a JSON string is a Python literal: quotes, backslashes, newlines escaped
            return json.dumps(value, ensure_ascii=False)
        return repr(value)

    def expr(self, e: Any) -> str:
        if isinstance(e, E.Var):
            return self.name_of(e)
        if isinstance(e, GlobalVar):
            return f"cls.{e.name_hint}"
        if isinstance(e, E.Constant):
            if e.data.size <= 4:
                value = e.data.tolist()
                return f'R.const({value!r}, "{e.data.dtype}")'
            self.constants.append(e)
            return f'metadata["relax.expr.Constant"][{len(self.constants) - 1}]'
        if isinstance(e, E.Tuple):
            return _tuple_str([self.expr(f) for f in e.fields])
        if isinstance(e, E.TupleGetItem):
            return f"{self.expr(e.tuple_value)}[{e.index}]"
        if isinstance(e, E.ShapeExpr):
            return f"R.shape([{', '.join(self.prim(v) for v in e.values)}])"
        if isinstance(e, E.ExternFunc):
            return f'R.ExternFunc("{e.global_symbol}")'
        if isinstance(e, E.Call):
            return self.call(e)
        if isinstance(e, E.Function):
            return "<function>"
        if type(e).__name__ == "If":  # bound Ifs print as if/else blocks (if_binding)
            return f"R.If({self.expr(e.cond)}, {self.expr(e.true_branch.body)}, {self.expr(e.false_branch.body)})"
        return str(e)

    def call(self, call: E.Call) -> str:
        op = call.op
        sinfo_args = ""
        if call.sinfo_args:
            items = [self.sinfo(s) for s in call.sinfo_args]
            sinfo_args = items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"
        if isinstance(op, E.Op) and op.name == "call_tir":
            callee, args = call.args[0], call.args[1]
            tir_vars = f", tir_vars={self.expr(call.args[2])}" if len(call.args) > 2 else ""
            return f"R.call_tir({self.expr(callee)}, {self.expr(args)}, out_sinfo={sinfo_args}{tir_vars})"
        if isinstance(op, E.Op) and op.name == "call_dps_packed":
            callee, args = call.args[0], call.args[1]
            return f'R.call_dps_packed("{callee.global_symbol}", {self.expr(args)}, out_sinfo={sinfo_args})'
        if isinstance(op, E.ExternFunc):
            args = "".join(", " + self.expr(a) for a in call.args)
            return f'R.call_packed("{op.global_symbol}"{args}, sinfo_args=({sinfo_args},))'
        head = f"R.{op.name}" if isinstance(op, E.Op) else self.expr(op)
        parts = [self.expr(a) for a in call.args]
        parts += [f"{k}={self.attr(v)}" for k, v in call.attrs.items() if v is not None]
        return f"{head}({', '.join(parts)})"

    def function(self, func: E.Function, name: str, indent: str = "") -> str:
        lines = []
        params = ", ".join(f"{self.name_of(p)}: {self.sinfo(p.struct_info)}" for p in func.params)
        # TVM's rule: a public function's global_symbol is its name; a private one has none unless
        # R.func_attr gives it (a BYOC region keeps its symbol), so the text parses back as it was.
        symbol = func.attrs.get("global_symbol")
        private = bool(func.attrs.get("Primitive")) or symbol is None
        decorator = "@R.function" + ("(private=True)" if private else "")
        lines.append(indent + decorator)
        lines.append(f"{indent}def {name}({params}) -> {self.sinfo(func.ret_struct_info)}:")
        inner = indent + "    "
        # Symbolic dimensions are declared up front, as TVMScript does (``n = T.int64()``).
        sym = []
        for p in func.params:
            for v in collect_vars(p.struct_info):
                if isinstance(v, PrimVar) and all(v is not s for s in sym):
                    sym.append(v)
        for v in sym:
            lines.append(f"{inner}{self.name_of(v)} = T.{v.dtype}()")
        attrs = {k: v for k, v in func.attrs.items() if k != "global_symbol" or private or v != name}
        if attrs:
            lines.append(f"{inner}R.func_attr({{{', '.join(f'{k!r}: {self.attr(v)}' for k, v in attrs.items())}}})"
                         .replace("'", '"'))
        for block in func.body.blocks:
            if isinstance(block, E.DataflowBlock):
                lines.append(f"{inner}with R.dataflow():")
                outputs = []
                for b in block.bindings:
                    lines.append(self.binding(b, inner + "    "))
                    if not isinstance(b.var, E.DataflowVar):
                        outputs.append(self.name_of(b.var))
                if outputs:
                    lines.append(f"{inner}    R.output({', '.join(outputs)})")
            else:
                for b in block.bindings:
                    lines.append(self.binding(b, inner))
        lines.append(f"{inner}return {self.expr(func.body.body)}")
        return "\n".join(lines)

    def binding(self, b: E.VarBinding, indent: str) -> str:
        from .control_flow import If

        if isinstance(b.value, If):
            return self.if_binding(b, indent)
        if isinstance(b.value, E.Function):
            name = self.name_of(b.var)
            return _FunctionPrinter(self.constants).function(b.value, name, indent)
        value = self.expr(b.value)
        return f"{indent}{self.name_of(b.var)}: {self.sinfo(b.var.struct_info)} = {value}"


    def if_binding(self, b: E.VarBinding, indent: str) -> str:
        """``v = If(c, t, f)`` as Relax prints it: each branch's bindings, then ``v = <result>``."""
        node = b.value
        lines = [f"{indent}if {self.expr(node.cond)}:"]
        for head, branch in ((None, node.true_branch), (f"{indent}else:", node.false_branch)):
            if head is not None:
                lines.append(head)
            for block in branch.blocks:
                lines += [self.binding(inner, indent + "    ") for inner in block.bindings]
            lines.append(f"{indent}    {self.name_of(b.var)}: {self.sinfo(b.var.struct_info)} = {self.expr(branch.body)}")
        return "\n".join(lines)


def function_to_str(func: E.Function, name: "str | None" = None) -> str:
    """Text of a graph `Function` (named by ``name``, else its ``global_symbol``, else ``main``).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
        >>> function_to_str(G.Function([x], G.SeqExpr([], x))).splitlines()[1]
        'def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):'
    """
    return _FunctionPrinter().function(func, name or func.attrs.get("global_symbol", "main"))


def expr_to_str(e: Any) -> str:
    """Text of one graph expression (names as given).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
        >>> expr_to_str(G.op.relu(x))
        'R.relu(x)'
    """
    if isinstance(e, E.Function):
        return function_to_str(e)
    return _FunctionPrinter().expr(e)


def metadata_of(mod: IRModule) -> dict:
    """The constants the module's text refers to as ``metadata["relax.expr.Constant"][i]``: pass
    ``extra_vars={"metadata": metadata_of(mod)}`` to `ingot.script.from_source` to parse the text.

    Example:
        >>> import numpy as np
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((8,), "float32"))
        >>> mod = IRModule({"main": G.Function([x], G.SeqExpr([], G.op.add(x, G.const(np.ones(8, "float32")))))})
        >>> len(metadata_of(mod)["relax.expr.Constant"])
        1
    """
    constants: list = []
    module_to_str(mod, constants)
    return {"relax.expr.Constant": constants}


def module_to_str(mod: IRModule, constants: "list | None" = None) -> str:
    """``@I.ir_module class Module:`` with every function, graph and TensorIR.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
        >>> "@I.ir_module" in module_to_str(IRModule({"main": G.Function([x], G.SeqExpr([], x))}))
        True
    """
    constants = [] if constants is None else constants
    lines = ["# from ingot.script import ir as I", "# from ingot.script import relax as R",
             "# from ingot.script import tir as T", "", "@I.ir_module", "class Module:"]
    for name, func in mod.functions.items():
        if isinstance(func, E.Function):
            text = _FunctionPrinter(constants).function(func, name, "    ")
        else:
            # The module header already has the imports: drop the function's own.
            text = "\n".join(line for line in node_to_str(func).splitlines()
                              if not line.startswith("# from ingot.script import")).strip("\n")
            if "def " not in text:
                text = f"# {name}\n{text}"
            text = "\n".join("    " + line for line in text.splitlines())
        lines.append(text)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _module_printer(mod: IRModule) -> str:
    # A module of TensorIR functions only prints exactly as TVMScript (and parses back).
    if not any(isinstance(func, E.Function) for func in mod.functions.values()):
        from ingot.script.printer import script

        return script(mod)
    return module_to_str(mod)


register_node_printer(E.Expr, expr_to_str)
register_node_printer(E.VarBinding, lambda b: _FunctionPrinter().binding(b, ""))
register_node_printer(S.StructInfo, struct_info_to_str)
register_node_printer(IRModule, _module_printer)

