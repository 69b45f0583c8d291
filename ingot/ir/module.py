"""`IRModule`: the one container of functions at every stage of compilation.

Example:
    >>> mod = IRModule({})
    >>> len(mod)
    0
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping

from .node import FrozenDict, Node


class GlobalVar(Node):
    """The name of a function in an `IRModule` (what ``call_tir`` and calls refer to).

    Example:
        >>> GlobalVar("main").name_hint
        'main'
    """

    __slots__ = ("name_hint",)
    _fields = ("name_hint",)
    _attr_fields = ("name_hint",)

    def __init__(self, name_hint: str):
        self._init(name_hint=str(name_hint))


class IRModule(Node):
    """A mapping from global names to functions (``tir.PrimFunc``, ``graph.Function``).

    Immutable like every node: `with_function`/`without_function` return new modules. Indexing
    accepts a name or a `GlobalVar`.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((4,), name="A")
        >>> B = te.compute((4,), lambda i: A[i] + 1, name="B")
        >>> mod = IRModule({"main": te.create_prim_func([A, B])})
        >>> list(mod.function_names)
        ['main']
    """

    __slots__ = ("functions", "attrs")
    _fields = ("functions", "attrs")

    def __init__(self, functions: "Mapping[Any, Any] | None" = None, attrs: "Mapping[str, Any] | None" = None):
        funcs = {}
        for key, func in (functions or {}).items():
            name = key.name_hint if isinstance(key, GlobalVar) else str(key)
            funcs[name] = func
        self._init(functions=FrozenDict(funcs), attrs=FrozenDict(attrs or {}))

    @staticmethod
    def from_expr(func: Any, name: str = "main") -> "IRModule":
        """A module holding one function."""
        return IRModule({name: func})

    @property
    def function_names(self) -> list[str]:
        return list(self.functions)

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self.functions:
            raise KeyError(f"IRModule has no function {name!r}; it has {sorted(self.functions)}")
        return GlobalVar(name)

    def get_global_vars(self) -> list[GlobalVar]:
        return [GlobalVar(n) for n in self.functions]

    def __getitem__(self, key: Any) -> Any:
        name = key.name_hint if isinstance(key, GlobalVar) else str(key)
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"IRModule has no function {name!r}; it has {sorted(self.functions)}") from None

    def __contains__(self, key: Any) -> bool:
        name = key.name_hint if isinstance(key, GlobalVar) else str(key)
        return name in self.functions

    def __iter__(self) -> Iterator[str]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def items(self):
        return self.functions.items()

    def with_function(self, name: Any, func: Any) -> "IRModule":
        """A module with ``name`` bound to ``func`` (added or replaced)."""
        name = name.name_hint if isinstance(name, GlobalVar) else str(name)
        return IRModule({**self.functions, name: func}, self.attrs)

    # TVM spelling; returns the new module (IR is immutable).
    update_func = with_function

    def without_function(self, name: Any) -> "IRModule":
        name = name.name_hint if isinstance(name, GlobalVar) else str(name)
        return IRModule({k: v for k, v in self.functions.items() if k != name}, self.attrs)

    def with_attrs(self, **attrs: Any) -> "IRModule":
        return IRModule(self.functions, {**self.attrs, **attrs})

    def script(self, **options: Any) -> str:
        """This module as TVMScript text (needs `ingot.script`, imported by ``import ingot``)."""
        from .printer import node_to_str

        return node_to_str(self)

    def show(self) -> None:
        print(self.script())
