"""Helpers shared by the PyTorch converters: dtype names, symbolic sizes (sympy → `PrimExpr`),
the errors of this importer.

Note: ``torch.export`` records the size of every value in ``node.meta["val"]`` (a FakeTensor);
dynamic sizes are ``torch.SymInt`` whose ``node.expr`` is a sympy expression over symbols such as
``s0``/``s77`` (one per ``torch.export.Dim``). `to_dim` turns those expressions into Ingot's
symbolic dims (``ingot.ir.Var(name, "int64")`` and arithmetic on them), one Var per symbol, so the
struct info of the imported graph keeps the batch dimension symbolic. Products are built with the
symbol first (``s0 * 5``), the order `ingot.graph.op.flatten` uses, so dims computed by the graph
layer and dims read from torch compare structurally equal.

Example:
    >>> torch_dtype_name("torch.float32")
    'float32'
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ingot.ir import PrimExpr
from ingot.ir import Var as DimVar

from ..errors import ConversionError, UnsupportedOpsError


class UnsupportedTorchOpsError(UnsupportedOpsError):
    """The exported program uses ATen operators without a converter; ALL of them are listed at once,
    each with its count and the names of the first nodes (a subclass of
    `ingot.frontend.UnsupportedOpsError`, so one ``except`` catches both importers' errors).

    Example:
        >>> e = UnsupportedTorchOpsError({"aten.flip.default": ["flip", "flip_1"]})
        >>> print(str(e).splitlines()[0])
        <exported program>: 1 unsupported operator type(s): aten.flip.default (2 nodes, e.g. flip, flip_1)
    """

    def __init__(self, ops: Mapping[str, Sequence[str]], source: str = "<exported program>"):
        super().__init__(ops, source)
        first = str(self.args[0]).splitlines()[0]
        message = (first + "\n(list what is supported with ingot.frontend.torch.supported_ops(); an unsupported "
                   "op needs a converter in ingot/frontend/torch/ops_*.py, or rewrite the module to avoid it)")
        self.args = (message,)


def conversion_error(node: Any, message: str) -> ConversionError:
    """A `ConversionError` naming the fx node and its ATen overload.

    Example:
        >>> str(conversion_error(None, "bad")).splitlines()[0]
        "cannot convert node '?' (?): bad"
    """
    if node is None:
        return ConversionError("?", "?", message)
    return ConversionError(target_key(node.target), node.name, message)


def target_key(target: Any) -> str:
    """The converter-table key of an fx node target: ``"aten.relu.default"`` for ATen overloads,
    ``"operator.getitem"`` for Python builtins.

    Example:
        >>> import operator
        >>> target_key(operator.getitem)
        'operator.getitem'
    """
    import torch

    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or ""
    module = {"_operator": "operator", "builtins": "builtins"}.get(module, module)
    return f"{module}.{getattr(target, '__name__', repr(target))}"


def torch_dtype_name(dtype: Any) -> str:
    """The numpy-style dtype name of a ``torch.dtype`` (``torch.float32`` → ``"float32"``).

    Example:
        >>> torch_dtype_name("torch.bool")
        'bool'
    """
    name = str(dtype)
    return name[len("torch."):] if name.startswith("torch.") else name


def to_dim(value: Any, dims: dict) -> "int | PrimExpr":
    """An Ingot dimension from an int, a ``torch.SymInt`` or a sympy expression; symbols become
    ``ingot.ir.Var(name, "int64")`` kept in ``dims`` (one Var per symbol name).

    Example:
        >>> import sympy
        >>> d = {}
        >>> str(to_dim(sympy.Symbol("s0") * 4, d)), list(d)
        ('s0 * T.int64(4)', ['s0'])
    """
    import sympy

    if isinstance(value, bool):
        raise ConversionError("?", "?", f"a bool {value} is used as a tensor size")
    if isinstance(value, int):
        return value
    node = getattr(value, "node", None)
    if node is not None and hasattr(node, "expr"):
        value = node.expr
    if isinstance(value, PrimExpr):
        return value
    if not isinstance(value, sympy.Basic):
        return int(value)
    return _sympy_to_dim(value, dims)


def _sympy_to_dim(e: Any, dims: dict) -> "int | PrimExpr":
    import sympy

    from ingot.graph.struct_info import normalize_dim
    from ingot.ir import convert

    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        name = str(e)
        if name not in dims:
            dims[name] = DimVar(name, "int64")
        return dims[name]
    args = [_sympy_to_dim(a, dims) for a in e.args]
    kind = type(e).__name__
    if isinstance(e, sympy.Add):
        return _fold(args, lambda a, b: a + b)
    if isinstance(e, sympy.Mul):
        # Symbols first, constants last: the order the graph layer's own shape arithmetic produces.
        args = sorted(args, key=lambda a: isinstance(a, int))
        return _fold(args, lambda a, b: a * b)
    if kind in ("FloorDiv", "CleanDiv", "IntTrueDiv") and len(args) == 2:
        a, b = args
        return a // b if isinstance(a, int) and isinstance(b, int) else normalize_dim(convert(a) // b)
    if kind in ("Mod", "PythonMod") and len(args) == 2:
        a, b = args
        return a % b if isinstance(a, int) and isinstance(b, int) else normalize_dim(convert(a) % b)
    if kind in ("Max", "Min") and args:
        from ingot.ir import Max, Min

        op = Max if kind == "Max" else Min
        acc = convert(args[0])
        for a in args[1:]:
            acc = op(acc, convert(a))
        return normalize_dim(acc)
    raise ConversionError("?", "?", f"the symbolic size `{e}` ({kind}) cannot be expressed as an Ingot dimension; "
                                    f"export with a static size for it")


def _fold(args: list, fn: Any) -> "int | PrimExpr":
    from ingot.graph.struct_info import normalize_dim
    from ingot.ir import convert

    acc = args[0]
    for a in args[1:]:
        acc = fn(acc, a) if isinstance(acc, int) and isinstance(a, int) else fn(convert(acc), a)
    return normalize_dim(acc)


def is_symbolic(value: Any) -> bool:
    """Whether ``value`` is a symbolic scalar (an Ingot `PrimExpr` size).

    Example:
        >>> is_symbolic(3)
        False
    """
    return isinstance(value, PrimExpr)
