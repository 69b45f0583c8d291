"""Visitors and mutators over IR trees, dispatching on the node class.

Note: `Visitor.visit(node)` calls ``visit_<ClassName>`` for the most derived class of ``node`` that
has such a method (walking the MRO, resolved once per class), else `generic_visit`, which walks the
node's ``_fields``. `Mutator` works the same way and rebuilds a node only when a child changed, so
an unchanged subtree keeps its identity. `Var` and `Buffer` are leaves: they are definitions, and a
pass that renames or rewrites them does so explicitly (see `substitute`).

Example:
    >>> from ingot.ir import Var
    >>> class CountAdds(Visitor):
    ...     def __init__(self): self.count = 0
    ...     def visit_Add(self, node):
    ...         self.count += 1
    ...         self.generic_visit(node)
    >>> x = Var("x")
    >>> v = CountAdds(); v.visit(x + 1 + x); v.count
    2
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from .buffer import Buffer
from .expr import PrimExpr, Var
from .node import FrozenDict, Node


def _resolve(table: dict, owner: type, cls: type, prefix: str, default: str) -> Callable:
    method = table.get(cls)
    if method is None:
        for klass in cls.__mro__:
            method = getattr(owner, f"{prefix}{klass.__name__}", None)
            if method is not None:
                break
        else:
            method = getattr(owner, default)
        table[cls] = method
    return method


def _new_table(cls: type, attr: str) -> dict:
    """The per-class dispatch table (node class -> method), stored on the visitor class itself:
    it lives and dies with the class, so visitor classes defined inside functions do not pile up."""
    table: dict = {}
    setattr(cls, attr, table)
    return table


class Visitor:
    """Read-only traversal; override ``visit_<NodeClass>`` for the nodes you care about."""

    def visit(self, node: Any) -> Any:
        if isinstance(node, Node):
            cls = type(self)
            table = cls.__dict__.get("_visit_dispatch")
            if table is None:
                table = _new_table(cls, "_visit_dispatch")
            method = table.get(type(node))
            if method is None:
                method = _resolve(table, cls, type(node), "visit_", "generic_visit")
            return method(self, node)
        if isinstance(node, (tuple, list)):
            for item in node:
                self.visit(item)
        return None

    def generic_visit(self, node: Node) -> None:
        for name in node._fields:
            value = getattr(node, name)
            if isinstance(value, (Node, tuple, list)):
                self.visit(value)

    def visit_Var(self, node: Var) -> None:
        return None

    def visit_Buffer(self, node: Buffer) -> None:
        return None


class Mutator:
    """Rewriting traversal; ``visit_<NodeClass>`` returns the replacement node."""

    def visit(self, node: Any) -> Any:
        if isinstance(node, Node):
            cls = type(self)
            table = cls.__dict__.get("_mutate_dispatch")
            if table is None:
                table = _new_table(cls, "_mutate_dispatch")
            method = table.get(type(node))
            if method is None:
                method = _resolve(table, cls, type(node), "visit_", "generic_visit")
            return method(self, node)
        if isinstance(node, tuple):
            return self.visit_tuple(node)
        return node

    def visit_tuple(self, items: tuple) -> tuple:
        new_items = tuple(self.visit(item) for item in items)
        if all(a is b for a, b in zip(items, new_items)):
            return items
        return new_items

    def generic_visit(self, node: Node) -> Node:
        changes = {}
        for name in node._fields:
            value = getattr(node, name)
            if isinstance(value, (Node, tuple)):
                new_value = self.visit(value)
                if new_value is not value:
                    changes[name] = new_value
        if not changes:
            return node
        return _rebuild(node, changes)

    def visit_Var(self, node: Var) -> Any:
        return node

    def visit_Buffer(self, node: Buffer) -> Any:
        return node


def _rebuild(node: Node, changes: Mapping[str, Any]) -> Node:
    """A copy with ``changes``; expression nodes are re-constructed so derived dtypes stay right."""
    if isinstance(node, PrimExpr) and not isinstance(node, Var):
        from . import expr as E

        values = {name: changes.get(name, getattr(node, name)) for name in node._fields}
        cls = type(node)
        if issubclass(cls, (E.BinaryOp, E.CmpOp, E.And, E.Or)):
            return cls(values["a"], values["b"])
        if cls is E.Not:
            return cls(values["a"])
        if cls is E.Select:
            return cls(values["condition"], values["true_value"], values["false_value"])
        if cls is E.BufferLoad:
            return cls(values["buffer"], values["indices"])
        if cls is E.Ramp:
            return cls(values["base"], values["stride"], values["lanes"])
        if cls is E.Broadcast:
            return cls(values["value"], values["lanes"])
        if cls is E.Let:
            return cls(values["var"], values["value"], values["body"])
    return node.replace(**changes)


def post_order_visit(node: Any, callback: Callable[[Node], None]) -> None:
    """Call ``callback`` on every node below and including ``node``, children first.

    Example:
        >>> from ingot.ir import Var
        >>> seen = []
        >>> post_order_visit(Var("x") + 1, lambda n: seen.append(type(n).__name__))
        >>> seen
        ['Var', 'IntImm', 'Add']
    """

    class _PostOrder(Visitor):
        def generic_visit(self, n: Node) -> None:
            Visitor.generic_visit(self, n)
            callback(n)

        def visit_Var(self, n: Var) -> None:
            callback(n)

        def visit_Buffer(self, n: Buffer) -> None:
            callback(n)

    _PostOrder().visit(node)


def collect_loads(node: Any, buffer: "Buffer | None" = None, *, nested: bool = True) -> list:
    """The `BufferLoad`s in ``node`` (an expression, statement or tuple), in pre-order: a load
    comes before the loads inside its indices. ``buffer``: only the loads of that buffer (by
    identity). ``nested=False``: not the loads inside another load's indices (the operands a
    compute reads, not the index arrays of a gather).

    Example:
        >>> from ingot.ir import Var, decl_buffer
        >>> A, B = decl_buffer((4,), "float32", "A"), decl_buffer((4,), "int32", "B")
        >>> i = Var("i")
        >>> e = A[B[i]] + A[i]
        >>> [ld.buffer.name for ld in collect_loads(e)]
        ['A', 'B', 'A']
        >>> len(collect_loads(e, nested=False)), len(collect_loads(e, B))
        (2, 1)
    """
    collector = _LoadCollector(buffer, nested)
    collector.visit(node)
    return collector.found


class _LoadCollector(Visitor):
    def __init__(self, buffer: "Buffer | None", nested: bool) -> None:
        self.buffer, self.nested = buffer, nested
        self.found: list = []

    def visit_BufferLoad(self, node: Any) -> None:
        if self.buffer is None or node.buffer is self.buffer:
            self.found.append(node)
        if self.nested:
            self.visit(node.indices)


class _Substituter(Mutator):
    def __init__(self, vmap: Mapping[Var, Any]):
        self.vmap = vmap

    def visit_Var(self, node: Var) -> Any:
        return self.vmap.get(node, node)


def substitute(node: Any, vmap: "Mapping[Var, Any] | Callable[[Var], Any]") -> Any:
    """Replace variables by expressions (``vmap`` is a dict or a function returning None to keep).

    Example:
        >>> from ingot.ir import Var
        >>> i, j = Var("i"), Var("j")
        >>> str(substitute(i * 2, {i: j + 1}))
        '(j + 1) * 2'
    """
    if callable(vmap) and not isinstance(vmap, Mapping):
        fn = vmap

        class _FnMap(dict):
            def get(self, key, default=None):
                result = fn(key)
                return default if result is None else result

        vmap = _FnMap()
    if not vmap:
        return node
    from .expr import convert

    vmap = {k: convert(v) for k, v in vmap.items()} if not hasattr(vmap, "get") or isinstance(vmap, dict) and type(vmap) is dict else vmap
    return _Substituter(vmap).visit(node)


def collect_vars(node: Any) -> list[Var]:
    """The distinct variables used in ``node`` (in order of first use).

    Example:
        >>> from ingot.ir import Var
        >>> i, j = Var("i"), Var("j")
        >>> [v.name for v in collect_vars(i * j + i)]
        ['i', 'j']
    """
    collector = _VarCollector()
    collector.visit(node)
    return list(collector.found.values())


class _VarCollector(Visitor):
    # One class for every call: building a class per call cost more than most walks.
    def __init__(self) -> None:
        self.found: dict[int, Var] = {}

    def visit_Var(self, n: Var) -> None:
        self.found.setdefault(id(n), n)


__all__ = ["Visitor", "Mutator", "post_order_visit", "substitute", "collect_loads", "collect_vars", "FrozenDict"]
