"""Control-flow operators: ``if_then_else``, ``loop`` and ``scan`` (bodies are graph functions).

Note: the graph IR has an `ingot.graph.control_flow.If` expression whose branches are SeqExprs
(TVM Relax's ``If``), and loops whose bodies are graph functions of the module, called by name
(TVM Relax runs loops as recursion or VM builtins; ONNX's Loop/Scan map onto one builtin each).
These three operators are what the executor runs:

* ``if_then_else(cond, *captured, then_branch=f, else_branch=g, out_sinfo=...)``: `G.build` lifts each
  branch of an `If` into a module function taking the captured outer values (the same parameter
  list for both), and calls one of them at run time;
* ``loop(trip_count, cond, *carried, *captured, body=f, num_carried=N, out_sinfo=...)``: ONNX Loop.
  ``f(i, cond, *carried, *captured) -> (cond', *carried', *scan_slices)`` runs while ``i <
  trip_count`` and ``cond``; the result is ``(*carried, *scan_outputs)`` (slices stacked on a new axis 0);
* ``scan(*states, *scan_inputs, *captured, body=f, num_states=N, num_scan_inputs=M, ...)``: ONNX
  Scan. ``f(*states, *slices, *captured) -> (*states', *out_slices)``, per-input axes and directions,
  per-output axes and directions; ``batched=True`` is opset 8's form (axis 0 of every input is a batch).

The result struct info is an attribute (``out_sinfo``): it comes from the bodies, which live elsewhere
in the module. None of them is legalized, fused or folded: the executor interprets them and calls the
bodies' plans (each body is compiled once, like any graph function).

Example:
    >>> from ingot import graph as G
    >>> c = G.Var("c", G.TensorStructInfo((), "bool"))
    >>> x = G.Var("x", G.TensorStructInfo((3,), "float32"))
    >>> call = if_then_else(c, x, then_branch="t", else_branch="e", out_sinfo=x.struct_info)
    >>> str(call.struct_info)
    'R.Tensor((3,), dtype="float32")'
"""
from __future__ import annotations

from typing import Any, Sequence

from ..expr import Call, Expr
from ..op_registry import REQUIRED, OpPattern, _REGISTRY, make_call, op_error, register_op
from ..struct_info import StructInfo

__all__ = ["if_then_else", "loop", "scan", "CONTROL_OPS"]

#: The operators whose calls run graph functions of the module (attribute names of the callees).
CONTROL_OPS = {"if_then_else": ("then_branch", "else_branch"), "loop": ("body",), "scan": ("body",)}


def _infer(name: str) -> Any:
    def infer(args: Any, attrs: Any) -> StructInfo:
        sinfo = attrs["out_sinfo"]
        if not isinstance(sinfo, StructInfo):
            raise op_error(name, f"attribute out_sinfo must be a struct info (the bodies' result), got {sinfo!r}")
        return sinfo
    return infer


def _never_legalized(name: str) -> Any:
    def legalize(inputs: Any, attrs: Any, out: Any) -> Any:
        raise op_error(name, "control flow runs in the executor and has no kernel; build the module with "
                             "ingot.graph.build (LegalizeOps leaves it as it is)")
    return legalize


_SPECS = {
    "if_then_else": {"then_branch": REQUIRED, "else_branch": REQUIRED, "out_sinfo": REQUIRED},
    "loop": {"body": REQUIRED, "num_carried": REQUIRED, "scan_slice_shapes": (), "out_sinfo": REQUIRED},
    "scan": {"body": REQUIRED, "num_states": REQUIRED, "num_scan_inputs": REQUIRED, "input_axes": (),
             "input_reverse": (), "output_axes": (), "output_reverse": (), "batched": False, "out_sinfo": REQUIRED},
}
for _name, _attrs in _SPECS.items():
    if _name not in _REGISTRY:  # idempotent: a reload in tests must not fail
        register_op(_name, num_inputs=None, pattern=OpPattern.OPAQUE, attrs=_attrs, infer=_infer(_name),
                    legalize=_never_legalized(_name), numpy=None,
                    doc=f"Control flow ({_name}): runs graph functions of the module; see ingot.graph.op.control.")


def if_then_else(cond: Expr, *captured: Expr, then_branch: str, else_branch: str, out_sinfo: StructInfo) -> Call:
    """``then_branch(*captured)`` when ``cond`` (a one-element bool tensor) holds, else ``else_branch(*captured)``.

    Example: see the module docstring.
    """
    return make_call("if_then_else", [cond, *captured], then_branch=str(then_branch), else_branch=str(else_branch),
                     out_sinfo=out_sinfo)


def loop(trip_count: Expr, cond: Expr, carried: Sequence[Expr], captured: Sequence[Expr], *, body: str,
         out_sinfo: StructInfo, scan_slice_shapes: Sequence[Sequence[int]] = ()) -> Call:
    """ONNX Loop: run module function ``body`` while ``i < trip_count`` and ``cond`` (see the module note).

    ``scan_slice_shapes``: the static shape of each scan output's per-iteration slice, when known (the
    shape of an empty result, ``(0, *slice)``, when no iteration runs).

    Example:
        >>> from ingot import graph as G
        >>> m, c = G.const(3, "int64"), G.const(True, "bool")
        >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
        >>> loop(m, c, [x], [], body="body", out_sinfo=G.TupleStructInfo([x.struct_info])).attrs["num_carried"]
        1
    """
    return make_call("loop", [trip_count, cond, *carried, *captured], body=str(body), num_carried=len(carried),
                     scan_slice_shapes=tuple(tuple(int(d) for d in s) for s in scan_slice_shapes), out_sinfo=out_sinfo)


def scan(states: Sequence[Expr], scan_inputs: Sequence[Expr], captured: Sequence[Expr], *, body: str,
         out_sinfo: StructInfo, input_axes: Sequence[int] = (), input_reverse: Sequence[bool] = (),
         output_axes: Sequence[int] = (), output_reverse: Sequence[bool] = (), batched: bool = False) -> Call:
    """ONNX Scan: module function ``body`` once per slice of the scan inputs (see the module note).

    Example:
        >>> from ingot import graph as G
        >>> s = G.Var("s", G.TensorStructInfo((2,), "float32"))
        >>> xs = G.Var("xs", G.TensorStructInfo((3, 2), "float32"))
        >>> out = G.TupleStructInfo([s.struct_info, xs.struct_info])
        >>> scan([s], [xs], [], body="body", out_sinfo=out).attrs["num_scan_inputs"]
        1
    """
    return make_call("scan", [*states, *scan_inputs, *captured], body=str(body), num_states=len(states),
                     num_scan_inputs=len(scan_inputs), input_axes=tuple(int(a) for a in input_axes),
                     input_reverse=tuple(bool(r) for r in input_reverse),
                     output_axes=tuple(int(a) for a in output_axes),
                     output_reverse=tuple(bool(r) for r in output_reverse), batched=bool(batched),
                     out_sinfo=out_sinfo)
