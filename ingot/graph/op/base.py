"""``call_tir`` (call a PrimFunc of the module) and ``call_packed`` (call a registered function).

Note (``tir_vars``, TVM Relax's third ``call_tir`` argument): a PrimFunc may take scalar
parameters after its tensors — symbolic sizes that are not a whole dimension of any parameter
buffer (a reshape to ``(6 * batch, 32)`` makes ``batch`` one). The call then carries their values
as graph-side symbolic expressions, ``R.call_tir(f, args, out_sinfo, tir_vars=R.shape([batch]))``,
stored as ``call.args[2]`` (a `ShapeExpr`); the executor evaluates them from the shapes bound by
the function's inputs and passes them, as ints, after the outputs.

Example:
    >>> from ingot import graph as G
    >>> from ingot.ir import GlobalVar
    >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
    >>> c = call_tir(GlobalVar("add_one"), [x], G.TensorStructInfo((4,), "float32"))
    >>> str(c)
    'R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((4,), dtype="float32"))'
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.ir.error import IRError
from ingot.ir.module import GlobalVar

from ..expr import Call, Expr, ExternFunc, Op, ShapeExpr, Tuple
from ..op_registry import OpPattern, register_op
from ..struct_info import StructInfo, TensorStructInfo, TupleStructInfo


def _out_sinfo(out_sinfo: "StructInfo | Sequence[StructInfo]") -> StructInfo:
    if isinstance(out_sinfo, (list, tuple)):
        return out_sinfo[0] if len(out_sinfo) == 1 else TupleStructInfo(out_sinfo)
    if not isinstance(out_sinfo, StructInfo):
        raise IRError(f"out_sinfo must be a StructInfo such as G.TensorStructInfo((1, 10), \"float32\"), "
                      f"got {type(out_sinfo).__name__}: {out_sinfo!r}")
    return out_sinfo


def call_tir(gvar: GlobalVar, args: "Sequence[Expr] | Expr", out_sinfo: "StructInfo | Sequence[StructInfo]",
             tir_vars: "ShapeExpr | Sequence[Any] | None" = None) -> Call:
    """Call the PrimFunc ``gvar`` with ``args``; the outputs (``out_sinfo``) are allocated by the
    executor and passed after the inputs (destination-passing style, as TVM's ``R.call_tir``).
    ``tir_vars`` (a `ShapeExpr` or a sequence of ints / symbolic expressions) are the values of
    the PrimFunc's scalar parameters, passed after the outputs.

    Example:
        >>> from ingot import graph as G
        >>> from ingot.ir import Var as SymVar
        >>> n = SymVar("n", "int64")
        >>> x = G.Var("x", G.TensorStructInfo((n * 2,), "float32"))
        >>> call = call_tir(GlobalVar("f"), x, G.TensorStructInfo((n * 2,), "float32"), tir_vars=[n])
        >>> str(call).split("out_sinfo=")[1]
        'R.Tensor((n * T.int64(2),), dtype="float32"), tir_vars=R.shape([n]))'
    """
    if isinstance(gvar, str):
        gvar = GlobalVar(gvar)
    if not isinstance(gvar, GlobalVar):
        raise IRError(f"call_tir: the callee must be a GlobalVar naming a PrimFunc in the module, got {gvar!r}")
    if isinstance(args, Expr) and not isinstance(args, Tuple):
        args = [args]
    args_tuple = args if isinstance(args, Tuple) else Tuple(list(args))
    sinfo = _out_sinfo(out_sinfo)
    for field in (sinfo.fields if isinstance(sinfo, TupleStructInfo) else (sinfo,)):
        if not isinstance(field, TensorStructInfo) or field.shape is None:
            raise IRError(f"call_tir {gvar.name_hint}: each output needs a TensorStructInfo with a shape, got {field}")
    call_args: list = [gvar, args_tuple]
    if tir_vars is not None:
        if not isinstance(tir_vars, ShapeExpr):
            if isinstance(tir_vars, (Expr, str)) or not isinstance(tir_vars, (list, tuple)):
                raise IRError(f"call_tir {gvar.name_hint}: tir_vars must be a ShapeExpr or a list of ints / symbolic "
                              f"expressions (e.g. tir_vars=[n]), got {type(tir_vars).__name__}: {tir_vars!r}")
            tir_vars = ShapeExpr(list(tir_vars))
        if tir_vars.values:
            call_args.append(tir_vars)
    return Call(Op.get("call_tir"), call_args, {}, [sinfo], sinfo)


def call_tir_vars(call: Call) -> tuple:
    """The ``tir_vars`` values of a ``call_tir`` (empty when it has none).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> call_tir_vars(call_tir(GlobalVar("f"), x, x.struct_info, tir_vars=[4]))
        (4,)
    """
    return call.args[2].values if len(call.args) > 2 else ()


def call_packed(func_name: str, *args: Expr, sinfo_args: "StructInfo | Sequence[StructInfo]") -> Call:
    """Call the function registered as ``func_name`` (``@ingot.register_func``) with ``args``; it
    returns its result (``sinfo_args`` describes it). For destination-passing functions use
    `call_dps_packed`.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> str(call_packed("env.relu", x, sinfo_args=x.struct_info).op)
        'R.ExternFunc("env.relu")'
    """
    sinfo = _out_sinfo(sinfo_args)
    return Call(ExternFunc(func_name), list(args), {}, [sinfo], sinfo)


def call_dps_packed(func_name: str, args: "Sequence[Expr] | Expr", out_sinfo: Any) -> Call:
    """Call ``func_name`` in destination-passing style: the executor allocates the outputs
    (``out_sinfo``) and passes them after ``args`` (the MLC course's ``env.linear`` style).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> str(call_dps_packed("env.relu", [x], x.struct_info).struct_info)
        'R.Tensor((4,), dtype="float32")'
    """
    if isinstance(args, Expr) and not isinstance(args, Tuple):
        args = [args]
    args_tuple = args if isinstance(args, Tuple) else Tuple(list(args))
    sinfo = _out_sinfo(out_sinfo)
    return Call(Op.get("call_dps_packed"), [ExternFunc(func_name), args_tuple], {}, [sinfo], sinfo)


def _infer_from_sinfo_args(args: Any, attrs: Any) -> StructInfo:  # pragma: no cover - built directly
    raise IRError("call_tir/call_dps_packed are built with G.op.call_tir(...)/G.op.call_dps_packed(...)")


register_op("call_tir", num_inputs=None, infer=_infer_from_sinfo_args, pattern=OpPattern.OPAQUE,
            doc="Call a PrimFunc of the module in destination-passing style.")
register_op("call_dps_packed", num_inputs=2, infer=_infer_from_sinfo_args, pattern=OpPattern.OPAQUE,
            doc="Call a registered function in destination-passing style.")
