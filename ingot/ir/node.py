"""Base class of every IR node.

Note: IR nodes are immutable. Each class lists its children in ``_fields`` (the order in which
structural equality, hashing, printing and the generic visitors walk them) and stores them in
``__slots__``. ``==`` and ``hash`` are object identity, as in TVM: a ``Var`` or ``Buffer`` is a
definition, and two definitions with the same name are different objects. Structural comparison
(alpha-equivalence) is `ingot.ir.structural_equal`; a changed copy is ``node.replace(field=value)``.

Fields listed in ``_def_fields`` *define* variables and buffers (loop variables, block iteration
variables, function parameters, allocations); structural equality maps the variables met there
one to one between the two sides.
"""
from __future__ import annotations

from typing import Any, ClassVar, Iterator, Mapping


class FrozenDict(dict):
    """A dict that cannot change after construction; used for annotations and attributes.

    Example:
        >>> d = FrozenDict({"global_symbol": "main"})
        >>> d["global_symbol"]
        'main'
    """

    __slots__ = ()

    def _immutable(self, *args, **kwargs):
        raise TypeError("IR attribute dictionaries are immutable; build a new one with {**d, key: value}")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _immutable  # type: ignore

    def __hash__(self):  # pragma: no cover - rarely used
        return hash(tuple(sorted((k, repr(v)) for k, v in self.items())))

    def __reduce__(self):
        return (FrozenDict, (dict(self),))

    def set(self, key, value) -> "FrozenDict":
        """A copy with ``key`` set to ``value``."""
        return FrozenDict({**self, key: value})

    def without(self, key) -> "FrozenDict":
        """A copy without ``key``."""
        return FrozenDict({k: v for k, v in self.items() if k != key})


def freeze(value: Any) -> Any:
    """Turn lists into tuples and dicts into `FrozenDict`, recursively (IR fields are immutable)."""
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, FrozenDict):
        return value
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    return value


class Node:
    """Base of all IR nodes: immutable, children named in ``_fields``.

    Example:
        >>> from ingot.ir import Var, IntImm
        >>> x = Var("x", "int32")
        >>> e = x + 1
        >>> e.replace(b=IntImm("int32", 2)).b.value
        2
    """

    __slots__ = ("span",)
    _fields: ClassVar[tuple[str, ...]] = ()
    _def_fields: ClassVar[tuple[str, ...]] = ()
    # Fields whose values are compared by == (names, kinds, attributes), not walked as children.
    _attr_fields: ClassVar[tuple[str, ...]] = ()
    # Fields ignored by structural equality (debug names, source spans).
    _ignored_fields: ClassVar[tuple[str, ...]] = ()

    def _init(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, freeze(value))
        if not hasattr(self, "span"):
            object.__setattr__(self, "span", None)

    def __setattr__(self, name, value):
        raise AttributeError(
            f"{type(self).__name__} is immutable; use node.replace({name}=...) to build a changed copy"
        )

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    @classmethod
    def all_fields(cls) -> tuple[str, ...]:
        return cls._fields

    def field_items(self) -> Iterator[tuple[str, Any]]:
        """(name, value) for each field, in declaration order."""
        for name in self._fields:
            yield name, getattr(self, name)

    def replace(self, **changes: Any) -> "Node":
        """A copy of this node with some fields changed (the node itself if nothing changes).

        Example:
            >>> from ingot.ir import Var
            >>> x = Var("x")
            >>> y = (x + 1).replace(a=Var("y"))
        """
        if all(getattr(self, k) is v for k, v in changes.items()):
            return self
        unknown = set(changes) - set(self._fields) - {"span"}
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(unknown)}; fields are {self._fields}")
        obj = object.__new__(type(self))
        for name in self._fields + ("span",):
            object.__setattr__(obj, name, freeze(changes[name]) if name in changes else getattr(self, name))
        for name in type(self).__slots_all__():
            if name not in self._fields and name != "span" and not hasattr(obj, name):
                if hasattr(self, name):
                    object.__setattr__(obj, name, getattr(self, name))
        return obj

    @classmethod
    def __slots_all__(cls) -> tuple[str, ...]:
        names: list[str] = []
        for klass in cls.__mro__:
            names.extend(getattr(klass, "__slots__", ()))
        return tuple(names)

    def with_span(self, span: Any) -> "Node":
        obj = self.replace()
        if obj is self:
            obj = object.__new__(type(self))
            for name in type(self).__slots_all__():
                if hasattr(self, name):
                    object.__setattr__(obj, name, getattr(self, name))
        object.__setattr__(obj, "span", span)
        return obj

    def same_as(self, other: Any) -> bool:
        """Identity (the same object), as TVM's ``same_as``."""
        return self is other

    def __reduce__(self):
        state = {name: getattr(self, name) for name in type(self).__slots_all__() if hasattr(self, name)}
        return (_rebuild_node, (type(self), state))

    def __repr__(self) -> str:
        from ingot.ir.printer import node_to_str

        return node_to_str(self)

    __str__ = __repr__


def _rebuild_node(cls, state: Mapping[str, Any]) -> Node:
    obj = object.__new__(cls)
    for name, value in state.items():
        object.__setattr__(obj, name, value)
    return obj
