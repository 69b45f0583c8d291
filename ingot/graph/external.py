"""External code generators (BYOC) at the graph level: pattern tables, codegens, lowering.

Note: a backend (``ingot.byoc``) registers two things here, by name: its *pattern table* (which
operator calls it accepts, with check functions on dtypes/shapes/layouts), read by
`AnnotateTarget`, and its *codegen* (a region function with attr ``Compiler=<name>`` → an
external runtime module), called by `lower_external_functions` when `ingot.graph.build` meets a
partitioned module. The registries live in the graph layer so that the graph passes and the
build never import a backend package (``ingot.byoc`` sits above ``ingot.graph``); backends
register themselves when imported (``import ingot.byoc`` registers the built-in ones).

Lowering: each region function (``Compiler`` attr) is handed to its codegen with its constants
lifted to parameters, the calls to it become ``call_dps_packed(<global_symbol>, args +
constants, out_sinfo)`` and the function leaves the module. The constants thus stay in the
executable's one weights blob (deduplicated by content, stored once per package) and the
external module carries code only.

Example:
    >>> register_patterns("doc_relu", [Pattern("doc_relu.relu", "relu")])
    >>> "doc_relu" in registered_targets()
    True
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from ingot.ir import IRModule
from ingot.ir.error import IRError
from ingot.ir.module import GlobalVar

from .expr import Call, Constant, Function, SeqExpr, Tuple, Var, VarBinding


@dataclasses.dataclass(frozen=True)
class Pattern:
    """One entry of a backend's pattern table: calls of operator ``op`` the backend accepts.

    ``check(call) -> None | str``: None accepts the call, a string is the reason it is refused
    (shown in the partition report). ``after``: the call is an *epilogue* accepted only when one of
    its operands is produced by a call of one of these operators already accepted for the same
    backend (a bias add or relu after a GEMM), never alone.

    Example:
        >>> p = Pattern("cblas.relu", "relu", lambda call: None, after=("linear",))
        >>> p.after
        ('linear',)
    """

    name: str
    op: str
    check: Callable[[Call], "str | None"] = lambda call: None
    after: "tuple[str, ...] | None" = None


_PATTERNS: "dict[str, list[Pattern]]" = {}
_CODEGENS: "dict[str, Callable[[Function, Any], Any]]" = {}


def register_patterns(target: str, patterns: Sequence[Pattern]) -> None:
    """Set the pattern table of backend ``target`` (replaces an earlier one).

    Example:
        >>> register_patterns("doc_demo", [Pattern("doc_demo.relu", "relu")])
        >>> [p.op for p in get_patterns("doc_demo")]
        ['relu']
    """
    for p in patterns:
        if not isinstance(p, Pattern):
            raise TypeError(f"register_patterns({target!r}): entries must be ingot.byoc.Pattern, got {p!r}")
    _PATTERNS[str(target)] = list(patterns)


def registered_targets() -> list:
    """Names of the backends with a pattern table.

    Example:
        >>> isinstance(registered_targets(), list)
        True
    """
    return sorted(_PATTERNS)


def get_patterns(target: str) -> "list[Pattern]":
    """The pattern table of ``target``; raises naming the registered backends when it has none.

    Example:
        >>> get_patterns("no_such_backend")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ingot.ir.error.IRError: no pattern table for BYOC target 'no_such_backend' ...
    """
    try:
        return _PATTERNS[target]
    except KeyError:
        raise IRError(f"no pattern table for BYOC target {target!r} (registered: {registered_targets()}); "
                      f"`import ingot.byoc` registers the built-in backends (cblas), "
                      f"ingot.byoc.register_backend(cls) registers yours") from None


def register_codegen(compiler: str, codegen: Callable[[Function, Any], Any]) -> None:
    """Set the codegen of ``compiler``: ``codegen(region_function, target) -> runtime module``
    (an object with ``run(*inputs, *outputs)``, ``save_to_bytes()`` and a ``loader`` string
    ``"package.module:Class"`` whose ``load_from_bytes(data)`` reads it back).

    Example:
        >>> register_codegen("doc_demo", lambda func, target: None)
    """
    _CODEGENS[str(compiler)] = codegen


def get_codegen(compiler: str) -> Callable[[Function, Any], Any]:
    """The codegen registered for ``compiler``.

    Example:
        >>> get_codegen("no_such_backend")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ingot.ir.error.IRError: no codegen for Compiler='no_such_backend' ...
    """
    try:
        return _CODEGENS[compiler]
    except KeyError:
        raise IRError(f"no codegen for Compiler={compiler!r} (registered: {sorted(_CODEGENS)}); "
                      f"`import ingot.byoc` registers the built-in backends (cblas), "
                      f"ingot.byoc.register_backend(cls) registers yours") from None


def has_external_functions(mod: IRModule) -> bool:
    """Whether ``mod`` holds region functions for an external compiler (attr ``Compiler``).

    Example:
        >>> has_external_functions(IRModule({}))
        False
    """
    return any(isinstance(f, Function) and f.attrs.get("Compiler") for f in mod.functions.values())


def _lift_constants(func: Function) -> "tuple[Function, list[Constant]]":
    """``func`` with every constant operand turned into a trailing parameter (one per content)."""
    consts: list = []
    params: dict = {}

    def lift(e: Any) -> Any:
        if isinstance(e, Constant):
            p = params.get(e.content_hash)
            if p is None:
                p = params[e.content_hash] = Var(f"const{len(consts)}", e.struct_info)
                consts.append(e)
            return p
        if isinstance(e, Call):
            return Call(e.op, [lift(a) for a in e.args], e.attrs, e.sinfo_args, e.struct_info)
        if isinstance(e, Tuple):
            return Tuple([lift(f) for f in e.fields])
        return e

    blocks = [type(blk)([VarBinding(b.var, lift(b.value)) for b in blk.bindings]) for blk in func.body.blocks]
    lifted = Function(list(func.params) + [params[c.content_hash] for c in consts],
                      SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs)
    return lifted, consts


def lower_external_functions(mod: IRModule, target: Any) -> "tuple[IRModule, dict]":
    """Run each external region's codegen; returns ``(module, {global_symbol: runtime module})``.

    Region functions leave the module; their calls become ``call_dps_packed(global_symbol, ...)``
    with the region's constants passed as arguments (they stay in the weights blob).

    Example:
        >>> lower_external_functions(IRModule({}), "llvm")[1]
        {}
    """
    from .op import call_dps_packed

    regions = {name: f for name, f in mod.functions.items() if isinstance(f, Function) and f.attrs.get("Compiler")}
    if not regions:
        return mod, {}
    from ingot.target import as_target

    if not as_target(target).is_cpu:
        raise IRError(f"external regions {sorted(regions)} run on the host CPU, but the build targets {target}; "
                      f"build the partitioned module for a CPU target (\"llvm\") or partition without BYOC backends")
    externals: dict = {}
    calls: dict = {}  # region name -> (symbol, lifted constants)
    for name, func in regions.items():
        compiler = str(func.attrs["Compiler"])
        symbol = str(func.attrs.get("global_symbol", name))
        lifted, consts = _lift_constants(func)
        externals[symbol] = get_codegen(compiler)(lifted.with_attr("global_symbol", symbol), target)
        calls[name] = (symbol, consts)
    out = {}
    for name, func in mod.functions.items():
        if name in regions:
            continue
        if isinstance(func, Function):
            blocks = []
            for blk in func.body.blocks:
                bindings = []
                for b in blk.bindings:
                    v = b.value
                    if isinstance(v, Call) and isinstance(v.op, GlobalVar) and v.op.name_hint in calls:
                        symbol, consts = calls[v.op.name_hint]
                        v = call_dps_packed(symbol, list(v.args) + consts, v.struct_info)
                    bindings.append(VarBinding(b.var, v))
                blocks.append(type(blk)(bindings))
            func = Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs)
        out[name] = func
    return IRModule(out, mod.attrs), externals

