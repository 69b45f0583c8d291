"""The C backend: lowered IRModule → one C11 translation unit (TVM's ``codegen.CodeGenC``).

Note: a module's source is, in order: the ABI prelude (`ingot.codegen.prelude.C_PRELUDE`), the
vector typedefs and inline helpers the kernels use, then for each PrimFunc a static kernel and
its exported packed entry, then ``ingot_module_metadata`` (JSON) and, optionally,
``ingot_module_source`` (the text above it). Output is deterministic: functions in module order,
names from per-scope tables, helpers in first-use order.

Example:
    >>> from ingot.ir import IRModule, Var, decl_buffer
    >>> from ingot.tir import PrimFunc, For, ForKind, BufferStore
    >>> A = decl_buffer((4,), "float32", "A")
    >>> i = Var("i")
    >>> f = PrimFunc([A], For(i, 0, 4, ForKind.SERIAL, BufferStore(A, A[i] + 1.0, [i])))
    >>> src = generate_c(IRModule({"main": f}), "llvm")
    >>> "INGOT_EXPORT int32_t ingot_main(" in src.code
    True
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ingot.codegen.prelude import C_PRELUDE, emit_metadata_c, emit_source_c
from ingot.codegen.sanitize import NameTable, sanitize_identifier
from ingot.ir.module import IRModule
from ingot.runtime import abi
from ingot.tir.function import PrimFunc

from .function import emit_function
from .printer import CodegenError, CPrinter
from .types import CHelpers

__all__ = ["CSource", "CodegenError", "CPrinter", "check_unique_name", "exported_functions", "function_name",
           "generate_c"]

_PRELUDE_SYMBOLS = (abi.SYM_METADATA, abi.SYM_SOURCE, abi.SYM_TIME_FUNCTION, abi.SYM_TIME_FUNCTION_FLUSHED,
                    abi.SYM_SET_NUM_THREADS, abi.SYM_GET_NUM_THREADS, abi.SYM_SET_ADAPTIVE_TEAM,
                    abi.SYM_POOL_COUNTERS, abi.SYM_ABI_VERSION)


@dataclasses.dataclass(frozen=True)
class CSource:
    """Generated C: ``code`` (the whole translation unit) and ``metadata`` (the JSON dict).

    Example:
        >>> CSource("int x;", {"version": 1, "functions": {}}).code
        'int x;'
    """

    code: str
    metadata: dict


def function_name(key: str, func: PrimFunc) -> str:
    """The exported name of ``func`` stored under ``key``: its ``global_symbol`` attribute or the key.

    Example:
        >>> from ingot.ir import decl_buffer
        >>> from ingot.tir import PrimFunc, Evaluate
        >>> function_name("f", PrimFunc([], Evaluate(0)).with_attr("global_symbol", "g"))
        'g'
    """
    return str(func.attrs.get("global_symbol") or key)


def exported_functions(mod: "IRModule | PrimFunc", error: type = CodegenError) -> "list[tuple[str, PrimFunc]]":
    """``(exported name, PrimFunc)`` of every PrimFunc of ``mod`` in module order (a lone PrimFunc
    is ``"main"``), as the C and CUDA backends export them; graph-level functions are skipped (the
    graph executor compiles them). Two functions exporting one name raise ``error``.

    Example:
        >>> from ingot.tir import PrimFunc, Evaluate
        >>> f = PrimFunc([], Evaluate(0))
        >>> [name for name, _ in exported_functions(IRModule({"a": f, "b": f.with_attr("global_symbol", "c")}))]
        ['a', 'c']
    """
    if isinstance(mod, PrimFunc):
        mod = IRModule({"main": mod})
    out: list = []
    seen: set = set()
    for key, func in mod.items():
        if isinstance(func, PrimFunc):
            name = function_name(str(getattr(key, "name_hint", key)), func)
            check_unique_name(name, seen, error)
            out.append((name, func))
    return out


def check_unique_name(name: str, seen: set, error: type = CodegenError) -> None:
    """Add the exported ``name`` to ``seen``; raise ``error`` when it is there already (two
    functions cannot share one C symbol).

    Example:
        >>> seen = set(); check_unique_name("f", seen); sorted(seen)
        ['f']
    """
    if name in seen:
        raise error(f"two functions export the name {name!r}; give them distinct global_symbol attributes")
    seen.add(name)


def generate_c(mod: "IRModule | PrimFunc", target: Any = "llvm", include_source: bool = True) -> CSource:
    """C source of a lowered module (every `PrimFunc` in it becomes an exported function).

    Raises `CodegenError` (naming the function and node) for IR the backend cannot print, e.g.
    blocks left in an unlowered function.

    Example:
        >>> from ingot.ir import decl_buffer
        >>> from ingot.tir import Evaluate
        >>> src = generate_c(PrimFunc([decl_buffer((2,), "int8", "x")], Evaluate(0)))
        >>> src.metadata["functions"]["main"]["params"][0]["dtype"]
        'int8'
    """
    helpers = CHelpers()
    symbols = NameTable(reserved=_PRELUDE_SYMBOLS)
    texts: list[str] = []
    functions: dict[str, Any] = {}
    for name, func in exported_functions(mod):
        base = sanitize_identifier(name)
        # Symbols live in the reserved ingot_ namespace, so they never meet a user identifier.
        symbol = symbols.unique(f"ingot_{base}")
        kernel = symbols.unique(f"ingot_kernel_{base}")
        text, md = emit_function(func, name, symbol, kernel, helpers)
        texts.append(text)
        functions[name] = md
    metadata = {"version": abi.METADATA_VERSION, "target": str(target), "functions": functions,
                "source_included": include_source}
    code = C_PRELUDE + "\n" + helpers.render() + "\n" + "\n".join(texts) + "\n" + emit_metadata_c(metadata)
    if include_source:
        code = code + emit_source_c(code)
    return CSource(code, metadata)

