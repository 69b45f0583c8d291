"""Structural equality and hashing with alpha-equivalence.

Note: two IR trees are structurally equal when they have the same node types, the same attribute
values, and a one-to-one correspondence between the variables and buffers they define. Variables
are matched where they are defined (fields listed in a node's ``_def_fields``: loop variables,
iteration variables, parameters, allocations, and everything inside a buffer's definition such
as symbolic shape variables); a variable used without a definition ("free") must be the same
object on both sides unless ``map_free_vars`` is set. Buffers are matched at first sight, by
content. Names are ignored.

The hash is a stable SHA-256 over a canonical token stream (not Python's per-process ``hash``),
so it can key the on-disk build cache and the tuning database.

Example:
    >>> from ingot.ir import Var
    >>> x, y = Var("x"), Var("y")
    >>> structural_equal(x + 1, y + 1), structural_equal(x + 1, y + 1, map_free_vars=True)
    (False, True)
"""
from __future__ import annotations

import hashlib
import struct
from typing import Any

from .buffer import Buffer
from .dtype import DataType
from .expr import Var
from .node import Node


class StructuralMismatch(AssertionError):
    """Raised by `assert_structural_equal`; the message shows the path and both sides."""


class _EqualChecker:
    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.lhs_to_rhs: dict[int, Any] = {}
        self.rhs_to_lhs: dict[int, Any] = {}
        self.keep_alive: list[Any] = []
        self.path: list[str] = []
        self.mismatch: "tuple[list[str], Any, Any] | None" = None

    def fail(self, lhs: Any, rhs: Any) -> bool:
        if self.mismatch is None:
            self.mismatch = (list(self.path), lhs, rhs)
        return False

    def bind(self, lhs: Any, rhs: Any) -> None:
        self.lhs_to_rhs[id(lhs)] = rhs
        self.rhs_to_lhs[id(rhs)] = lhs
        self.keep_alive.extend((lhs, rhs))

    def equal(self, lhs: Any, rhs: Any, defining: bool = False) -> bool:
        if lhs is rhs and not isinstance(lhs, (Var, Buffer)):
            return True
        if isinstance(lhs, Node) or isinstance(rhs, Node):
            if type(lhs) is not type(rhs):
                return self.fail(lhs, rhs)
            if isinstance(lhs, Var):
                return self.equal_var(lhs, rhs, defining)
            if isinstance(lhs, Buffer):
                return self.equal_buffer(lhs, rhs)
            if getattr(lhs, "_binding_var", False):
                return self.equal_binding_var(lhs, rhs, defining)
            return self.equal_fields(lhs, rhs, defining)
        if isinstance(lhs, (tuple, list)):
            if not isinstance(rhs, (tuple, list)) or len(lhs) != len(rhs):
                return self.fail(lhs, rhs)
            for index, (a, b) in enumerate(zip(lhs, rhs)):
                self.path.append(f"[{index}]")
                ok = self.equal(a, b, defining)
                self.path.pop()
                if not ok:
                    return False
            return True
        if isinstance(lhs, dict):
            if not isinstance(rhs, dict) or set(lhs) != set(rhs):
                return self.fail(lhs, rhs)
            for key in sorted(lhs, key=str):
                self.path.append(f"[{key!r}]")
                ok = self.equal(lhs[key], rhs[key], defining)
                self.path.pop()
                if not ok:
                    return False
            return True
        if type(lhs) is not type(rhs) and not (isinstance(lhs, DataType) and isinstance(rhs, DataType)):
            return self.fail(lhs, rhs)
        if isinstance(lhs, float):
            return True if (lhs == rhs or (lhs != lhs and rhs != rhs)) else self.fail(lhs, rhs)
        try:
            same = bool(lhs == rhs)
        except Exception:  # noqa: BLE001 - arbitrary annotation values
            same = lhs is rhs
        return True if same else self.fail(lhs, rhs)

    def equal_var(self, lhs: Var, rhs: Var, defining: bool) -> bool:
        mapped = self.lhs_to_rhs.get(id(lhs))
        if mapped is not None:
            return True if mapped is rhs else self.fail(lhs, rhs)
        if id(rhs) in self.rhs_to_lhs:
            return self.fail(lhs, rhs)
        if lhs.dtype != rhs.dtype:
            return self.fail(lhs, rhs)
        if defining or self.map_free_vars:
            self.bind(lhs, rhs)
            return True
        return True if lhs is rhs else self.fail(lhs, rhs)

    def equal_binding_var(self, lhs: Node, rhs: Node, defining: bool) -> bool:
        # Higher-level variables (graph Vars set ``_binding_var``) are definitions like `Var`:
        # matched where defined (their fields, e.g. struct info, compared then), uses by mapping.
        mapped = self.lhs_to_rhs.get(id(lhs))
        if mapped is not None:
            return True if mapped is rhs else self.fail(lhs, rhs)
        if id(rhs) in self.rhs_to_lhs:
            return self.fail(lhs, rhs)
        if defining or self.map_free_vars:
            self.bind(lhs, rhs)
            return self.equal_fields(lhs, rhs, defining=True)
        return True if lhs is rhs else self.fail(lhs, rhs)

    def equal_buffer(self, lhs: Buffer, rhs: Buffer) -> bool:
        mapped = self.lhs_to_rhs.get(id(lhs))
        if mapped is not None:
            return True if mapped is rhs else self.fail(lhs, rhs)
        if id(rhs) in self.rhs_to_lhs:
            return self.fail(lhs, rhs)
        self.bind(lhs, rhs)
        self.path.append(f"<buffer {lhs.name}>")
        ok = self.equal_fields(lhs, rhs, defining=True)
        self.path.pop()
        return ok

    def equal_fields(self, lhs: Node, rhs: Node, defining: bool) -> bool:
        cls = type(lhs)
        for name in cls._fields:
            if name in cls._ignored_fields:
                continue
            self.path.append(f".{name}")
            ok = self.equal(getattr(lhs, name), getattr(rhs, name), defining or name in cls._def_fields)
            self.path.pop()
            if not ok:
                return False
        return True


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    """Whether two IR trees are equal up to renaming of the variables they define.

    Example:
        >>> from ingot.ir import Var
        >>> structural_equal(Var("a") * 2, Var("b") * 2, map_free_vars=True)
        True
    """
    return _EqualChecker(map_free_vars).equal(lhs, rhs)


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    """Raise `StructuralMismatch` showing where ``lhs`` and ``rhs`` differ.

    Example:
        >>> from ingot.ir import Var
        >>> assert_structural_equal(Var("a") + 1, Var("b") + 1, map_free_vars=True)
    """
    checker = _EqualChecker(map_free_vars)
    if checker.equal(lhs, rhs):
        return
    path, a, b = checker.mismatch or ([], lhs, rhs)
    where = "".join(path) or "<root>"
    raise StructuralMismatch(
        f"structural mismatch at {where}:\n  lhs: {_short(a)}\n  rhs: {_short(b)}\n"
        f"--- lhs ---\n{lhs}\n--- rhs ---\n{rhs}"
    )


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) < 300 else text[:300] + " ..."


class _Hasher:
    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.index: dict[int, int] = {}
        self.keep_alive: list[Any] = []
        self.digest = hashlib.sha256()

    def token(self, *parts: Any) -> None:
        self.digest.update(("\x1f".join(map(str, parts)) + "\x1e").encode())

    def visit(self, value: Any, defining: bool = False) -> None:
        if isinstance(value, Var):
            self.visit_var(value, defining)
        elif isinstance(value, Buffer):
            self.visit_buffer(value)
        elif getattr(value, "_binding_var", False):
            self.visit_binding_var(value, defining)
        elif isinstance(value, Node):
            cls = type(value)
            self.token("N", cls.__name__)
            for name in cls._fields:
                if name in cls._ignored_fields:
                    continue
                self.visit(getattr(value, name), defining or name in cls._def_fields)
        elif isinstance(value, (tuple, list)):
            self.token("T", len(value))
            for item in value:
                self.visit(item, defining)
        elif isinstance(value, dict):
            self.token("D", len(value))
            for key in sorted(value, key=str):
                self.token("K", key)
                self.visit(value[key], defining)
        elif isinstance(value, float):
            self.token("F", struct.pack("<d", value).hex())
        else:
            self.token("V", type(value).__name__, value)

    def visit_var(self, var: Var, defining: bool) -> None:
        idx = self.index.get(id(var))
        if idx is None and (defining or self.map_free_vars):
            idx = self.index[id(var)] = len(self.index)
            self.keep_alive.append(var)
        if idx is None:
            self.token("free", var.dtype, var.name)
        else:
            self.token("var", var.dtype, idx)

    def visit_binding_var(self, var: Node, defining: bool) -> None:
        idx = self.index.get(id(var))
        if idx is None and (defining or self.map_free_vars):
            idx = self.index[id(var)] = len(self.index)
            self.keep_alive.append(var)
            self.token("bvar-def", type(var).__name__, idx)
            cls = type(var)
            for name in cls._fields:
                if name not in cls._ignored_fields:
                    self.visit(getattr(var, name), True)
        elif idx is None:
            self.token("bvar-free", type(var).__name__, getattr(var, "name_hint", ""))
        else:
            self.token("bvar", idx)

    def visit_buffer(self, buf: Buffer) -> None:
        idx = self.index.get(id(buf))
        if idx is not None:
            self.token("buf", idx)
            return
        self.index[id(buf)] = len(self.index)
        self.keep_alive.append(buf)
        self.token("N", "Buffer")
        for name in Buffer._fields:
            if name not in Buffer._ignored_fields:
                self.visit(getattr(buf, name), True)


def structural_hash(node: Any, map_free_vars: bool = False) -> str:
    """A stable hex digest such that structurally equal trees hash equal.

    Example:
        >>> from ingot.ir import Var
        >>> structural_hash(Var("a") + 1, True) == structural_hash(Var("b") + 1, True)
        True
    """
    hasher = _Hasher(map_free_vars)
    hasher.visit(node)
    return hasher.digest.hexdigest()
