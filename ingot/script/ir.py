"""The ``I`` namespace of TVMScript: ``from ingot.script import ir as I``.

Example:
    >>> from ingot.script import ir as I, tir as T
    >>> @I.ir_module
    ... class Mod:
    ...     @T.prim_func
    ...     def main(A: T.Buffer((4,), "float32")):
    ...         for i in range(4):
    ...             A[i] = 0.0
    >>> Mod.function_names
    ['main']
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any


def ir_module(cls: Any = None, *, check_well_formed: bool = True) -> Any:
    """Parse a class whose methods are ``@T.prim_func`` functions into an `ingot.ir.IRModule`.

    Example: see the module docstring.
    """

    def decorate(klass: Any) -> Any:
        from .parser import parse_module

        return parse_module(klass, sys._getframe(1 if cls is None else 2))

    if cls is None:
        return decorate
    return decorate(cls)


@dataclass
class ModuleAttrs:
    attrs: dict


def module_attrs(attrs: dict) -> ModuleAttrs:
    """``I.module_attrs({"target": "llvm"})`` in an ir_module class body: the module's attributes.

    Example:
        >>> from ingot.script import ir as I
        >>> I.module_attrs({"k": 1}).attrs
        {'k': 1}
    """
    return ModuleAttrs(dict(attrs))
