"""`IRModule`: the one container of functions at every stage of compilation.

Example:
    >>> mod = IRModule({})
    >>> len(mod)
    0
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping

from .node import FrozenDict, Node


class ImmutableModuleError(TypeError):
    """Raised by TVM's in-place spellings (``mod.update_func``, ``mod[gv] = f``) on an immutable `IRModule`.

    Example:
        >>> issubclass(ImmutableModuleError, TypeError)
        True
    """


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

    def update_func(self, name: Any, func: Any) -> "IRModule":
        """TVM's in-place ``mod.update_func(gv, f)`` cannot work on Ingot's immutable modules: raises.

        TVM code that calls ``mod.update_func(gv, f)`` and keeps using ``mod`` would silently keep
        the old function, so the TVM spelling fails at once and names the Ingot way,
        ``mod = mod.with_function(gv, f)`` (``mod[gv] = f`` fails the same way).

        Example:
            >>> from ingot import te
            >>> A = te.placeholder((4,), name="A")
            >>> f = te.create_prim_func([A, te.compute((4,), lambda i: A[i] + 1, name="B")])
            >>> mod = IRModule({"main": f})
            >>> mod.update_func(mod.get_global_var("main"), f)
            Traceback (most recent call last):
            ...
            ingot.ir.module.ImmutableModuleError: IRModule is immutable: mod.update_func(gv, f) cannot change it in place; write mod = mod.with_function('main', f) (returns a new module)
            >>> mod = mod.with_function("main", f)
        """
        name = name.name_hint if isinstance(name, GlobalVar) else str(name)
        raise ImmutableModuleError(
            f"IRModule is immutable: mod.update_func(gv, f) cannot change it in place; write "
            f"mod = mod.with_function({name!r}, f) (returns a new module)")

    def __setitem__(self, name: Any, func: Any) -> None:
        name = name.name_hint if isinstance(name, GlobalVar) else str(name)
        raise ImmutableModuleError(
            f"IRModule is immutable: mod[{name!r}] = f cannot change it in place; write "
            f"mod = mod.with_function({name!r}, f) (returns a new module)")

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
