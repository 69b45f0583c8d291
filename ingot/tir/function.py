"""`PrimFunc`: a tensor-level function (parameters are buffers and scalar variables).

Example:
    >>> from ingot import te
    >>> A = te.placeholder((4,), name="A")
    >>> B = te.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> f = te.create_prim_func([A, B])
    >>> [p.name for p in f.params]
    ['A', 'B']
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ingot.ir.buffer import Buffer
from ingot.ir.error import IRError
from ingot.ir.expr import Var
from ingot.ir.node import FrozenDict, Node

from .stmt import Stmt


class PrimFunc(Node):
    """A TensorIR function: ``params`` (each a `Buffer` or a scalar `Var`), a body, and attributes.

    Attributes follow TVM: ``"global_symbol"`` (exported name), ``"tir.noalias"``.
    Symbolic shape variables are the `Var` objects inside the parameter buffers' shapes; they are
    bound from the actual arguments' shapes at call time.

    Example:
        >>> from ingot.ir import decl_buffer
        >>> from ingot.tir import Evaluate
        >>> f = PrimFunc([decl_buffer((4,), "float32", "A")], Evaluate(0))
        >>> f.with_attr("global_symbol", "main").attrs["global_symbol"]
        'main'
    """

    __slots__ = ("params", "body", "attrs")
    _fields = ("params", "body", "attrs")
    _def_fields = ("params",)

    def __init__(self, params: Sequence["Buffer | Var"], body: Stmt, attrs: "Mapping[str, Any] | None" = None):
        for p in params:
            if not isinstance(p, (Buffer, Var)):
                raise IRError(f"PrimFunc parameters must be Buffers or Vars, got {type(p).__name__}: {p!r}")
        self._init(params=tuple(params), body=body, attrs=FrozenDict(attrs or {}))

    def with_attr(self, key: str, value: Any) -> "PrimFunc":
        """A copy with attribute ``key`` set."""
        return self.replace(attrs=self.attrs.set(key, value))

    def with_body(self, body: Stmt) -> "PrimFunc":
        """A copy with a new body."""
        return self.replace(body=body)

    @property
    def buffer_params(self) -> list[Buffer]:
        return [p for p in self.params if isinstance(p, Buffer)]

    @property
    def scalar_params(self) -> list[Var]:
        return [p for p in self.params if isinstance(p, Var)]

    def script(self) -> str:
        """This function as TVMScript text."""
        return str(self)

    def show(self) -> None:
        print(self.script())
