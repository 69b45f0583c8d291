"""Expression evaluation for the TVMScript parser: names, scopes, and Python syntax → IR.

Note: expressions are evaluated with real objects: ``A[vi, vk] * 2.0`` looks up the buffer ``A``
and the variable ``vi`` in the parser's scopes and applies Python's operators, which the IR's
expression classes overload (``+`` builds `Add`, ``//`` `FloorDiv`...). What Python cannot overload
is mapped here: ``and``/``or``/``not`` build `And`/`Or`/`Not`, chained comparisons become a
conjunction, ``a if c else b`` a `Select`, and a subscript with slices a `BufferRegion` whose
extents cancel the begin (``A[vi:vi + 4]`` has extent 4, not ``vi + 4 - vi``). Any exception raised
while evaluating becomes a `ParseError` at the innermost offending node.

Example:
    >>> import ast
    >>> from ingot.script.error import Source
    >>> from ingot.ir import Var
    >>> ev = Evaluator(Source.from_text("i * 2 + 1"), {})
    >>> ev.define("i", Var("i"))
    >>> str(ev.eval(ast.parse("i * 2 + 1", mode="eval").body))
    'i * 2 + 1'
"""
from __future__ import annotations

import ast
import builtins
import operator
from typing import Any

from ingot.ir.buffer import Buffer, BufferRegion
from ingot.ir.expr import (
    Add, And, EqualOp, IntImm, Let, Not, Or, PrimExpr, Range, Select, Var, convert,
)
from ingot.ir.structural import structural_equal
from ingot.tir.analysis.access_regions import _const_diff, _linear

from . import tir as T
from .error import ParseError, Source

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.Pow: operator.pow,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}


def is_ir(value: Any) -> bool:
    """Whether ``value`` is an IR expression (or an ``==`` result standing for one)."""
    return isinstance(value, (PrimExpr, EqualOp))


def extent_of(start: Any, stop: Any) -> Any:
    """``stop - start``, cancelling the ``start + extent`` form the printer writes.

    Example:
        >>> from ingot.ir import Var
        >>> n = Var("n")
        >>> str(extent_of(n, n + 4)), str(extent_of(0, n))
        ('4', 'n')
    """
    if isinstance(start, int) and start == 0 or isinstance(start, IntImm) and start.value == 0:
        return stop
    if isinstance(stop, Add) and isinstance(start, (int, PrimExpr)) and structural_equal(stop.a, convert(start)):
        return stop.b
    if isinstance(stop, PrimExpr) or isinstance(start, PrimExpr):
        # `T.serial(n - 4, n)`: a constant difference of two linear forms is the extent 4.
        a, b = _linear(convert(stop)), _linear(convert(start))
        diff = _const_diff(a, b) if a is not None and b is not None else None
        if diff is not None:
            return IntImm(convert(stop).dtype, diff)
    return stop - start


class Evaluator:
    """Scopes of names and evaluation of expression syntax trees.

    Example: see the module docstring.
    """

    def __init__(self, source: Source, env: dict):
        self.source = source
        self.env = env
        self.scopes: list[dict] = [{}]

    # -- errors and scopes -----------------------------------------------------------------------
    def error(self, node: Any, message: str) -> ParseError:
        return self.source.error(node, message)

    def push_scope(self) -> None:
        self.scopes.append({})

    def pop_scope(self) -> None:
        self.scopes.pop()

    def define(self, name: str, value: Any) -> None:
        self.scopes[-1][name] = value

    def lookup(self, name: str, node: Any) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.env:
            return self.env[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(
            node,
            f"undefined name '{name}': define it before use (a parameter, `{name} = T.alloc_buffer(...)`, "
            f"a loop variable, or a Python constant in the enclosing scope)",
        )

    # -- evaluation ------------------------------------------------------------------------------
    def eval(self, node: ast.AST) -> Any:
        """The value of an expression node; errors become `ParseError` at the offending node."""
        method = getattr(self, "_eval_" + type(node).__name__, None)
        if method is None:
            raise self.error(node, f"unsupported syntax in TVMScript: {type(node).__name__}")
        try:
            return method(node)
        except ParseError:
            raise
        except Exception as err:  # noqa: BLE001 - any evaluation failure is reported at its line
            raise self.error(node, _describe(err)) from None

    def eval_expr(self, node: ast.AST) -> PrimExpr:
        """Evaluate and convert to a `PrimExpr`."""
        value = self.eval(node)
        try:
            return convert(value)
        except TypeError:
            raise self.error(node, f"expected an expression, got {type(value).__name__} {value!r}") from None

    def _eval_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def _eval_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def _eval_Attribute(self, node: ast.Attribute) -> Any:
        obj = self.eval(node.value)
        try:
            return getattr(obj, node.attr)
        except AttributeError as err:
            if obj is T:
                raise self.error(node, str(err).strip("'\"")) from None
            what = obj.name if isinstance(obj, (Buffer, Var)) else type(obj).__name__
            raise self.error(node, f"'{what}' has no attribute '{node.attr}'") from None

    def _eval_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self._eval_elts(node.elts))

    def _eval_List(self, node: ast.List) -> list:
        return self._eval_elts(node.elts)

    def _eval_elts(self, elts: list) -> list:
        values: list = []
        for e in elts:
            if isinstance(e, ast.Starred):
                values.extend(self.eval(e.value))
            else:
                values.append(self.eval(e))
        return values

    def _eval_Dict(self, node: ast.Dict) -> dict:
        if any(k is None for k in node.keys):
            raise self.error(node, "`**` in a dict literal is not supported in TVMScript")
        return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values)}

    def _eval_BinOp(self, node: ast.BinOp) -> Any:
        a, b = self.eval(node.left), self.eval(node.right)
        a = convert(a) if isinstance(a, EqualOp) else a
        b = convert(b) if isinstance(b, EqualOp) else b
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(node, f"operator {type(node.op).__name__} is not supported in TVMScript")
        if op is operator.pow and (is_ir(a) or is_ir(b)):
            return T.pow(a, b)
        return op(a, b)

    def _eval_UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            return Not(convert(value)) if is_ir(value) else not value
        if isinstance(value, EqualOp):
            value = convert(value)
        if isinstance(node.op, ast.USub):
            return -value
        if isinstance(node.op, ast.UAdd):
            return value
        return ~value

    def _eval_BoolOp(self, node: ast.BoolOp) -> Any:
        values = [self.eval(v) for v in node.values]
        if not any(is_ir(v) for v in values):
            result = values[0]
            for v in values[1:]:
                result = (result and v) if isinstance(node.op, ast.And) else (result or v)
            return result
        conds = [convert(v) for v in values]
        cls = And if isinstance(node.op, ast.And) else Or
        result = conds[0]
        for c in conds[1:]:
            result = cls(result, c)
        return result

    def _eval_Compare(self, node: ast.Compare) -> Any:
        left = self.eval(node.left)
        results = []
        for op_node, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node)
            op = _CMPOPS.get(type(op_node))
            if op is None:
                raise self.error(node, f"comparison {type(op_node).__name__} is not supported in TVMScript")
            results.append(op(left, right))
            left = right
        if len(results) == 1:
            r = results[0]
            return convert(r) if isinstance(r, EqualOp) else r
        if not any(is_ir(r) for r in results):
            return all(results)
        result = convert(results[0])
        for r in results[1:]:
            result = And(result, convert(r))
        return result

    def _eval_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.eval(node.test)
        if not is_ir(cond):
            return self.eval(node.body) if cond else self.eval(node.orelse)
        return Select(convert(cond), self.eval(node.body), self.eval(node.orelse))

    def _eval_Call(self, node: ast.Call) -> Any:
        func = self.eval(node.func)
        if func is T.Let:
            return self._eval_let(node)
        args = self._eval_elts(node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.eval(kw.value))
            else:
                kwargs[kw.arg] = self.eval(kw.value)
        return func(*args, **kwargs)

    def _eval_let(self, node: ast.Call) -> Let:
        where = next((kw.value for kw in node.keywords if kw.arg == "where"), None)
        if not node.args or not isinstance(where, ast.Dict) or len(where.keys) != 1 or not isinstance(where.keys[0], ast.Name):
            raise self.error(node, "write a let expression as T.Let(body, where={x: value})")
        value = self.eval_expr(where.values[0])
        var = Var(where.keys[0].id, value.dtype)
        self.push_scope()
        self.define(var.name, var)
        try:
            body = self.eval(node.args[0])
        finally:
            self.pop_scope()
        return Let(var, value, body)

    def _eval_Subscript(self, node: ast.Subscript) -> Any:
        target = self.eval(node.value)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if isinstance(target, Buffer):
            if any(isinstance(i, ast.Slice) for i in items):
                return self.region(target, items, node)
            indices = [self.eval(i) for i in items]
            if len(indices) != target.ndim:
                raise self.error(
                    node, f"buffer '{target.name}' has {target.ndim} dimension(s) but is indexed with {len(indices)}"
                )
            return target.load(indices)
        if isinstance(node.slice, ast.Slice):
            return target[self._python_slice(node.slice)]
        return target[self.eval(node.slice)]

    def _python_slice(self, s: ast.Slice) -> slice:
        return slice(*(None if x is None else self.eval(x) for x in (s.lower, s.upper, s.step)))

    def region(self, buffer: Buffer, items: list, node: ast.AST) -> BufferRegion:
        """``A[vi, 0:128]`` as a `BufferRegion`."""
        if len(items) != buffer.ndim:
            raise self.error(node, f"region of buffer '{buffer.name}' has {len(items)} dims, the buffer has {buffer.ndim}")
        ranges = []
        for item, dim in zip(items, buffer.shape):
            if isinstance(item, ast.Slice):
                if item.step is not None:
                    raise self.error(item, f"region slices of buffer '{buffer.name}' take no step")
                start = 0 if item.lower is None else self.eval(item.lower)
                stop = dim if item.upper is None else self.eval(item.upper)
                start = _like(start, dim)
                ranges.append(Range.from_min_extent(start, extent_of(start, stop)))
            else:
                index = self.eval_expr(item)
                ranges.append(Range.from_min_extent(index, IntImm(index.dtype, 1)))
        return BufferRegion(buffer, ranges)

    def _eval_JoinedStr(self, node: ast.JoinedStr) -> str:
        raise self.error(node, "f-strings are not supported in TVMScript; use a plain string")


def _like(value: Any, ref: PrimExpr) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return IntImm(ref.dtype, value)
    return value


def _describe(err: Exception) -> str:
    text = str(err).strip()
    if isinstance(err, (TypeError, ValueError, KeyError, IndexError)) or type(err).__name__.endswith("Error"):
        return text or type(err).__name__
    return f"{type(err).__name__}: {text}"


__all__ = ["Evaluator", "extent_of", "is_ir"]
