"""The ``R`` namespace of TVMScript for graph functions (TVM's ``tvm.script.relax``).

``from ingot.script import relax as R`` (or ``from ingot.graph import script as R``) gives what
the graph printer (`ingot.graph.printer`) writes and the MLC course's hand-written models use:
``@R.function``, ``R.dataflow()``/``R.output(...)``, ``R.Tensor``/``R.Tuple``/``R.Shape``
annotations, ``R.call_tir``, ``R.call_packed``, ``R.call_dps_packed``, ``R.const``, ``R.shape``,
``R.func_attr`` and every registered operator as ``R.<op>(...)`` (``R.relu(x)``,
``R.matmul(a, b)``...).

Note: a function body is read with ``ast`` by `ingot.graph.parser` and never run; these helpers
are what the parser calls when it evaluates an expression (``R.Tensor((n, 4), "float32")``
returns a `TensorStructInfo`, ``R.relu(x)`` a `Call` with its struct info inferred). Inside an
``@I.ir_module`` class ``@R.function`` leaves the method to the module parser.

Example:
    >>> import ingot
    >>> from ingot.script import ir as I, relax as R
    >>> @I.ir_module
    ... class Module:
    ...     @R.function
    ...     def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
    ...         with R.dataflow():
    ...             y = R.relu(x)
    ...             R.output(y)
    ...         return y
    >>> print(Module["main"].body.blocks[0].bindings[0].value)
    R.relu(x)
"""
from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np

from ingot.ir.error import IRError
from ingot.ir.expr import Var as PrimVar

from . import expr as E
from . import struct_info as S
from .op import base as _base


def function(func: Any = None, *, private: bool = False, pure: bool = True) -> Any:
    """``@R.function``: parse a Python function written as a graph function into a `Function`.

    Inside an ``@I.ir_module`` class the method is returned unchanged for the module parser
    (``cls.<name>`` and bare names then refer to the module's other functions).

    Example:
        >>> from ingot.script import relax as R
        >>> @R.function
        ... def f(x: R.Tensor((4,), "float32")):
        ...     return R.exp(x)
        >>> str(f.ret_struct_info)
        'R.Tensor((4,), dtype="float32")'
    """

    def decorate(fn: Any) -> Any:
        caller = sys._getframe(1 if func is None else 2)
        names = caller.f_locals
        if caller.f_code.co_name != "<module>" and "__module__" in names and "__qualname__" in names:
            fn.__ingot_graph_function__ = True
            return fn
        from .parser import parse_function

        return parse_function(fn, caller, private=private)

    if func is None:
        return decorate
    return decorate(func)


def Tensor(shape: Any = None, dtype: str = "float32", ndim: int = -1) -> S.TensorStructInfo:  # noqa: N802
    """``R.Tensor((n, 4), "float32")``: the struct info of a tensor (shape may be left out).

    Example:
        >>> str(Tensor((2, 3), "int8"))
        'R.Tensor((2, 3), dtype="int8")'
    """
    if shape is not None:
        # A string dimension ("n") is symbolic; the parser gives one variable per name and function
        # (Python also evaluates annotations when it defines the function: this value is then unused).
        return S.TensorStructInfo(tuple(prim_var(d, "int64") if isinstance(d, str) else d for d in shape), dtype)
    return S.TensorStructInfo(None, dtype, ndim=ndim)


def Tuple(*fields: S.StructInfo) -> S.TupleStructInfo:  # noqa: N802
    """``R.Tuple(R.Tensor(...), ...)``: the struct info of a tuple.

    Example:
        >>> len(Tuple(Tensor((1,)), Tensor((2,))).fields)
        2
    """
    return S.TupleStructInfo(list(fields))


def Shape(values: "Sequence[Any] | None" = None, ndim: int = -1) -> S.ShapeStructInfo:  # noqa: N802
    """``R.Shape([n, 4])``: the struct info of a shape value.

    Example:
        >>> str(Shape([1, 2]))
        'R.Shape([1, 2])'
    """
    if values is None:
        return S.ShapeStructInfo(None, ndim=ndim)
    return S.ShapeStructInfo([prim_var(d, "int64") if isinstance(d, str) else d for d in values])


def Prim(dtype: str) -> S.PrimStructInfo:  # noqa: N802
    """``R.Prim("int64")``: the struct info of a scalar.

    Example:
        >>> str(Prim("int64"))
        'R.Prim("int64")'
    """
    return S.PrimStructInfo(dtype)


Object = S.ObjectStructInfo()


def Callable(params: Sequence[S.StructInfo], ret: S.StructInfo) -> S.FuncStructInfo:  # noqa: N802
    """``R.Callable((params...), ret)``: the struct info of a function.

    Example:
        >>> str(Callable((Tensor((1,)),), Tensor((1,)))).startswith("R.Callable")
        True
    """
    return S.FuncStructInfo(list(params), ret)


def const(value: Any, dtype: "str | None" = None) -> E.Constant:
    """``R.const(0.5, "float32")``: a constant tensor.

    Example:
        >>> const([1, 2], "int64").struct_info.shape
        (2,)
    """
    return E.const(np.asarray(value, dtype=dtype) if dtype is not None else value, dtype)


def shape(values: Sequence[Any]) -> E.ShapeExpr:
    """``R.shape([n, 4])``: a shape value (``call_tir``'s ``tir_vars``, ``reshape``'s target).

    Example:
        >>> shape([1, 2]).values
        (1, 2)
    """
    return E.ShapeExpr(list(values))


def ExternFunc(global_symbol: str) -> E.ExternFunc:  # noqa: N802
    """``R.ExternFunc("env.linear")``: a function registered with ``ingot.register_func``.

    Example:
        >>> ExternFunc("env.f").global_symbol
        'env.f'
    """
    return E.ExternFunc(global_symbol)


def _out_sinfo(out_sinfo: Any, dtype: "str | None", what: str) -> Any:
    # The MLC course's older spelling: R.call_tir(f, args, (1, 128), dtype="float32").
    if isinstance(out_sinfo, (tuple, list)) and out_sinfo and not isinstance(out_sinfo[0], S.StructInfo):
        return S.TensorStructInfo(tuple(out_sinfo), dtype or "float32")
    if out_sinfo is None:
        raise IRError(f"{what} needs out_sinfo=R.Tensor((...), dtype=...) (the struct info of its output)")
    return list(out_sinfo) if isinstance(out_sinfo, (tuple, list)) else out_sinfo


def call_tir(func: Any, args: Any, out_sinfo: Any = None, tir_vars: Any = None, dtype: "str | None" = None) -> E.Call:
    """``R.call_tir(cls.f, (x, w), out_sinfo=R.Tensor(...))``: call PrimFunc ``f`` in
    destination-passing style (see `ingot.graph.op.call_tir`).

    Example:
        >>> from ingot.ir.module import GlobalVar
        >>> x = E.Var("x", Tensor((4,), "float32"))
        >>> str(call_tir(GlobalVar("f"), (x,), out_sinfo=Tensor((4,), "float32")).struct_info)
        'R.Tensor((4,), dtype="float32")'
    """
    return _base.call_tir(func, _args(args), _out_sinfo(out_sinfo, dtype, "R.call_tir"), tir_vars)


def call_dps_packed(func: Any, args: Any, out_sinfo: Any = None, dtype: "str | None" = None) -> E.Call:
    """``R.call_dps_packed("env.linear", (x, w), out_sinfo=R.Tensor(...))``.

    Example:
        >>> x = E.Var("x", Tensor((4,), "float32"))
        >>> str(call_dps_packed("env.relu", (x,), out_sinfo=Tensor((4,), "float32")).struct_info)
        'R.Tensor((4,), dtype="float32")'
    """
    name = func.global_symbol if isinstance(func, E.ExternFunc) else str(func)
    return _base.call_dps_packed(name, _args(args), _out_sinfo(out_sinfo, dtype, "R.call_dps_packed"))


def call_packed(func: Any, *args: Any, sinfo_args: Any = None) -> E.Call:
    """``R.call_packed("env.f", x, sinfo_args=(R.Tensor(...),))``.

    Example:
        >>> x = E.Var("x", Tensor((4,), "float32"))
        >>> str(call_packed("env.f", x, sinfo_args=(Tensor((4,), "float32"),)).struct_info)
        'R.Tensor((4,), dtype="float32")'
    """
    if isinstance(sinfo_args, (tuple, list)) and len(sinfo_args) == 1:
        sinfo_args = sinfo_args[0]
    name = func.global_symbol if isinstance(func, E.ExternFunc) else str(func)
    return _base.call_packed(name, *[as_expr(a) for a in args], sinfo_args=sinfo_args)


def as_expr(value: Any) -> Any:
    """A graph expression from a parsed value: Python tuples become `Tuple`s.

    Example:
        >>> x = E.Var("x", Tensor((4,), "float32"))
        >>> type(as_expr((x, x))).__name__
        'Tuple'
    """
    if isinstance(value, (tuple, list)):
        return E.Tuple([as_expr(v) for v in value])
    return value


def _args(args: Any) -> list:
    if isinstance(args, E.Tuple):
        return list(args.fields)
    if isinstance(args, (tuple, list)):
        return [as_expr(a) for a in args]
    return [args]


def _attr(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_attr(v) for v in value)
    return value


class _Marker:
    """What ``R.dataflow()``, ``R.output(...)`` and ``R.func_attr({...})`` evaluate to: the parser
    reads these statements itself; calling them outside a parsed function does nothing useful."""

    def __init__(self, kind: str, value: Any = None):
        self.kind, self.value = kind, value

    def __enter__(self) -> "_Marker":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def dataflow() -> _Marker:
    """``with R.dataflow():`` opens a dataflow block (its bindings are local unless ``R.output``-ed).

    Example:
        >>> dataflow().kind
        'dataflow'
    """
    return _Marker("dataflow")


def output(*vars: Any) -> _Marker:
    """``R.output(a, b)``: the bindings of a dataflow block visible after it.

    Example:
        >>> output().kind
        'output'
    """
    return _Marker("output", vars)


def func_attr(attrs: dict) -> _Marker:
    """``R.func_attr({"Primitive": True})``: attributes of the enclosing function.

    Example:
        >>> func_attr({"k": 1}).value
        {'k': 1}
    """
    return _Marker("func_attr", dict(attrs))


def prim_var(name: str, dtype: str) -> PrimVar:
    """The symbolic dimension declared by ``n = T.int64()`` in a graph function.

    Example:
        >>> str(prim_var("n", "int64").dtype)
        'int64'
    """
    return PrimVar(name, dtype)


def __getattr__(name: str) -> Any:
    # R.<op>(args..., attr=value): every registered operator.
    from .op_registry import get_op_def, make_call

    if name.startswith("__"):
        raise AttributeError(name)
    try:
        get_op_def(name)
    except Exception:
        raise AttributeError(f"R.{name}: no such operator or TVMScript construct in ingot's relax namespace; "
                             f"the operators are listed by ingot.graph.op_registry.list_ops()") from None

    def call(*args: Any, **attrs: Any) -> E.Call:
        return make_call(name, [as_expr(a) for a in args], **{k: _attr(v) for k, v in attrs.items()})

    call.__name__ = name
    return call


__all__ = ["function", "Tensor", "Tuple", "Shape", "Prim", "Object", "Callable", "const", "shape", "ExternFunc",
           "call_tir", "call_dps_packed", "call_packed", "dataflow", "output", "func_attr"]
