"""Text form of expressions (TVMScript syntax), and the hook through which higher layers print
statements and functions.

Note: `ingot.ir` cannot import `ingot.script` (imports go down only), so `ingot.script` registers
its printer here with `register_node_printer` when it is imported; until then statements print in
a generic ``Class(field=...)`` form.

Example:
    >>> from ingot.ir import Var
    >>> i = Var("i")
    >>> expr_to_str((i + 1) * 2 // 3)
    '(i + 1) * 2 // 3'
"""
from __future__ import annotations

from typing import Any, Callable

from . import expr as E
from .node import Node

_NODE_PRINTERS: list[tuple[type, Callable[..., str], bool]] = []

_PRECEDENCE = {
    E.Or: 1,
    E.And: 2,
    E.Not: 3,
    E.EQ: 4, E.NE: 4, E.LT: 4, E.LE: 4, E.GT: 4, E.GE: 4,
    E.Add: 5, E.Sub: 5,
    E.Mul: 6, E.Div: 6, E.FloorDiv: 6, E.FloorMod: 6,
}
_ATOM = 10


def register_node_printer(base: type, printer: Callable[..., str], accepts_marks: bool = False) -> None:
    """Print nodes of class ``base`` (and subclasses) with ``printer`` (used by `ingot.script`).

    With ``accepts_marks``, the printer takes a ``marks`` keyword (nodes to underline with ``^^^``),
    which error messages use to point at the offending loops and blocks.
    """
    _NODE_PRINTERS.insert(0, (base, printer, accepts_marks))


def node_to_str(node: Node, marks: "tuple | list" = ()) -> str:
    """Text of any node: expressions in TVMScript syntax, other nodes through registered printers.

    ``marks``: statements to underline with ``^^^`` (honoured by printers registered with
    ``accepts_marks``; see `can_mark`).
    """
    if isinstance(node, E.PrimExpr):
        return expr_to_str(node)
    for base, printer, accepts_marks in _NODE_PRINTERS:
        if isinstance(node, base):
            return printer(node, marks=tuple(marks)) if (accepts_marks and marks) else printer(node)
    return _generic(node)


def can_mark(node: Node) -> bool:
    """Whether a registered printer for ``node`` can underline statements (see `node_to_str`)."""
    return any(isinstance(node, base) and accepts for base, _, accepts in _NODE_PRINTERS)


def _generic(node: Node) -> str:
    if isinstance(node, E.Range):
        return f"{expr_to_str(node.min)}:{expr_to_str(node.min + node.extent)}"
    from .buffer import Buffer, BufferRegion

    if isinstance(node, Buffer):
        return f"T.Buffer(({', '.join(expr_to_str(s) for s in node.shape)},), \"{node.dtype}\") # {node.name}"
    if isinstance(node, BufferRegion):
        return f"{node.buffer.name}[{', '.join(_region_str(r) for r in node.region)}]"
    parts = ", ".join(f"{name}={_value_str(getattr(node, name))}" for name in node._fields)
    return f"{type(node).__name__}({parts})"


def _region_str(r: E.Range) -> str:
    if E.is_const_int(r.extent, 1):
        return expr_to_str(r.min)
    return f"{expr_to_str(r.min)}:{expr_to_str(r.min + r.extent)}"


def _value_str(value: Any) -> str:
    if isinstance(value, Node):
        return node_to_str(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(_value_str(v) for v in value) + "]"
    return repr(value)


def const_to_str(node: "E.IntImm | E.FloatImm") -> str:
    """``3``, ``T.int64(3)``, ``1.5``, ``T.float16(1.5)``, ``True``."""
    if node.dtype.is_bool:
        return "True" if node.value else "False"
    if isinstance(node, E.IntImm):
        return str(node.value) if str(node.dtype) == "int32" else f"T.{node.dtype}({node.value})"
    text = repr(node.value)
    if text in ("inf", "-inf", "nan"):
        text = f'"{text}"'
    return text if str(node.dtype) == "float32" else f"T.{node.dtype}({text})"


def expr_to_str(expr: E.PrimExpr, name_of: "Callable[[Any], str] | None" = None) -> str:
    """TVMScript text of an expression; ``name_of`` maps a Var or Buffer to its printed name.

    Example:
        >>> from ingot.ir import Var
        >>> expr_to_str(Var("x", "float32") * 0.5)
        'x * 0.5'
    """
    return _ExprPrinter(name_of or (lambda n: n.name)).print(expr)[0]


class _ExprPrinter:
    def __init__(self, name_of: Callable[[Any], str]):
        self.name_of = name_of

    def text(self, e: Any) -> str:
        return self.print(e)[0]

    def print(self, e: Any) -> tuple[str, int]:
        if not isinstance(e, E.PrimExpr):
            return str(e), _ATOM
        method = getattr(self, "p_" + type(e).__name__, None)
        if method is None:
            for klass in type(e).__mro__:
                method = getattr(self, "p_" + klass.__name__, None)
                if method:
                    break
        return method(e)

    def p_Var(self, e: E.Var):
        return self.name_of(e), _ATOM

    def p_IntImm(self, e: E.IntImm):
        return const_to_str(e), (_ATOM if e.value >= 0 else 7)

    def p_FloatImm(self, e: E.FloatImm):
        return const_to_str(e), (_ATOM if e.value >= 0 else 7)

    def p_StringImm(self, e: E.StringImm):
        return repr(e.value).replace("'", '"') if '"' not in e.value else repr(e.value), _ATOM

    def p_Cast(self, e: E.Cast):
        return f'T.Cast("{e.dtype}", {self.text(e.value)})', _ATOM

    def _infix(self, e, symbol: str):
        prec = _PRECEDENCE[type(e)]
        a, pa = self.print(e.a)
        b, pb = self.print(e.b)
        if pa < prec:
            a = f"({a})"
        if pb <= prec:
            b = f"({b})"
        return f"{a} {symbol} {b}", prec

    def p_BinaryOp(self, e):
        if type(e) in _PRECEDENCE:
            return self._infix(e, e.symbol)
        return f"T.{e.symbol}({self.text(e.a)}, {self.text(e.b)})", _ATOM

    def p_CmpOp(self, e):
        return self._infix(e, e.symbol)

    def p_And(self, e):
        return self._infix(e, "and")

    def p_Or(self, e):
        return self._infix(e, "or")

    def p_Not(self, e):
        a, pa = self.print(e.a)
        return f"not {a if pa > 3 else '(' + a + ')'}", 3

    def p_Select(self, e):
        return f"T.Select({self.text(e.condition)}, {self.text(e.true_value)}, {self.text(e.false_value)})", _ATOM

    def p_Ramp(self, e):
        return f"T.Ramp({self.text(e.base)}, {self.text(e.stride)}, {e.lanes})", _ATOM

    def p_Broadcast(self, e):
        return f"T.Broadcast({self.text(e.value)}, {e.lanes})", _ATOM

    def p_Let(self, e):
        return f"T.Let({self.text(e.body)}, where={{{self.name_of(e.var)}: {self.text(e.value)}}})", _ATOM

    def p_Call(self, e: E.Call):
        args = ", ".join(self.text(a) for a in e.args)
        if e.op in ("call_extern", "call_pure_extern", "reinterpret"):
            return f'T.{e.op}("{e.dtype}", {args})', _ATOM
        return f"T.{e.op}({args})", _ATOM

    def p_BufferLoad(self, e: E.BufferLoad):
        idx = ", ".join(self.text(i) for i in e.indices)
        return f"{self.name_of(e.buffer)}[{idx}]", _ATOM
