"""The recurrence of a recurrent layer as one graph operator: ``recurrence`` (ONNX LSTM/GRU/RNN).

Note: ``recurrence(xp, rt, *optional)`` is the time loop only; the input projection
``X @ W^T + biases`` comes before it as an ordinary GEMM over all steps. Its legalization is not a
TE compute (step ``t`` reads step ``t-1``) but the hand-written TensorIR kernel of
`ingot.ops.recurrent` (``LegalizeOps`` takes a PrimFunc from a legalization as it is); its numpy
reference, for ``FoldConstant`` and the reference evaluator, is `ingot.ops.recurrent.recurrence_numpy`.
Registered when this module is imported (the ONNX frontend's ``ops_rnn`` imports it), with the
idempotent registration of `onnx_extra`.

Example:
    >>> from ingot import graph as G
    >>> xp = G.Var("xp", G.TensorStructInfo((5, 2, 8), "float32"))
    >>> rt = G.Var("rt", G.TensorStructInfo((1, 2, 8), "float32"))
    >>> acts = ((("sigmoid", 0.0, 0.0), ("tanh", 0.0, 0.0), ("tanh", 0.0, 0.0)),)
    >>> str(recurrence(xp, rt, kind="LSTM", hidden=2, reverse=(False,), activations=acts).struct_info)
    'R.Tuple(R.Tensor((5, 1, 2, 2), dtype="float32"), R.Tensor((1, 2, 2), dtype="float32"), R.Tensor((1, 2, 2), dtype="float32"))'
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error
from ..struct_info import TensorStructInfo, TupleStructInfo
from ._common import known_shape, tensor_sinfo, topi
from .onnx_extra import _register

#: The optional inputs, in the order they follow ``xp`` and ``rt`` (the ``optional`` attribute names
#: those present).
OPTIONAL_INPUTS = ("initial_h", "initial_c", "sequence_lens", "peepholes", "recurrent_h_bias")


def _spec(args: Sequence[Any], attrs: Any) -> Any:
    """The `ingot.ops.recurrent.RecurrenceSpec` of a call (dtypes from its arguments' struct infos)."""
    optional = tuple(attrs["optional"])
    lens = args[2 + optional.index("sequence_lens")] if "sequence_lens" in optional else None

    def dtype_of(a: Any) -> str:
        return str(a.struct_info.dtype) if hasattr(a, "struct_info") else str(a.dtype)

    def shape_of(a: Any) -> tuple:
        return tuple(a.struct_info.shape) if hasattr(a, "struct_info") else tuple(a.shape)

    # The kernel's register tile follows rt's layout: the panel width says the vector width it was packed
    # for (the importer's default, or the target's after PackRecurrentWeights).
    vector_bytes, packed = topi("recurrent").panel_of(shape_of(args[1]), dtype_of(args[0]))
    return topi("recurrent").RecurrenceSpec(
        attrs["kind"], attrs["hidden"], tuple(attrs["reverse"]), tuple(tuple(tuple(a) for a in d)
                                                                       for d in attrs["activations"]),
        clip=attrs["clip"], input_forget=attrs["input_forget"], linear_before_reset=attrs["linear_before_reset"],
        has_initial_h="initial_h" in optional, has_initial_c="initial_c" in optional,
        lens_dtype=dtype_of(lens) if lens is not None else None, has_peepholes="peepholes" in optional,
        has_recurrent_h_bias="recurrent_h_bias" in optional, dtype=dtype_of(args[0]), vector_bytes=vector_bytes,
        packed=packed)


def _normalize(attrs: Any, args: Any) -> dict:
    kind = str(attrs["kind"])
    if kind not in ("LSTM", "GRU", "RNN"):
        raise op_error("recurrence", f"kind={kind!r}; use LSTM, GRU or RNN")
    optional = tuple(str(o) for o in attrs["optional"])
    unknown = [o for o in optional if o not in OPTIONAL_INPUTS]
    if unknown or len(args) != 2 + len(optional):
        raise op_error("recurrence", f"optional={optional} must name, in the order of {OPTIONAL_INPUTS}, the "
                                     f"{len(args) - 2} inputs after xp and rt")
    reverse = tuple(bool(r) for r in attrs["reverse"])
    acts = tuple(tuple((str(n), float(a), float(b)) for n, a, b in d) for d in attrs["activations"])
    if len(acts) != len(reverse):
        raise op_error("recurrence", f"activations has {len(acts)} direction(s), reverse {len(reverse)}")
    return {"kind": kind, "hidden": int(attrs["hidden"]), "reverse": reverse, "activations": acts,
            "clip": None if attrs["clip"] is None else float(attrs["clip"]),
            "input_forget": bool(attrs["input_forget"]), "linear_before_reset": bool(attrs["linear_before_reset"]),
            "optional": optional}


def _infer(args: Any, attrs: Any) -> TupleStructInfo:
    xp = tensor_sinfo("recurrence", args[0])
    shape = known_shape("recurrence", xp)
    nd, h = len(attrs["reverse"]), attrs["hidden"]
    gh = {"LSTM": 4, "GRU": 3, "RNN": 1}[attrs["kind"]] * h
    if len(shape) != 3 or (isinstance(shape[2], int) and shape[2] != nd * gh):
        raise op_error("recurrence", f"xp must be (T, B, {nd * gh}) (directions x gates x hidden), got {shape}")
    steps, batch = shape[0], shape[1]
    state = TensorStructInfo((nd, batch, h), xp.dtype)
    fields = [TensorStructInfo((steps, nd, batch, h), xp.dtype), state]
    if attrs["kind"] == "LSTM":
        fields.append(state)
    return TupleStructInfo(fields)


def _legalize(inputs: Any, attrs: Any, out: Any) -> Any:
    from ingot.ir.expr import as_const_int

    steps, batch = (as_const_int(d) for d in inputs[0].shape[:2])   # None when symbolic
    return topi("recurrent").recurrence_kernel(_spec(inputs, attrs), steps, batch)


def _numpy(args: Any, attrs: Any) -> Any:
    spec = _spec(args, attrs)
    named = dict(zip(attrs["optional"], args[2:]))
    return topi("recurrent").recurrence_numpy(
        spec, args[0], args[1], named.get("initial_h"), named.get("initial_c"), named.get("sequence_lens"),
        named.get("peepholes"), named.get("recurrent_h_bias"))


_register(
    "recurrence", num_inputs=None, pattern=OpPattern.OPAQUE,
    attrs={"kind": None, "hidden": None, "reverse": None, "activations": None, "clip": None,
           "input_forget": False, "linear_before_reset": False, "optional": ()},
    normalize_attrs=_normalize, infer=_infer, legalize=_legalize, numpy=_numpy,
)


def recurrence(xp: Expr, rt: Expr, *optional: Expr, kind: str, hidden: int, reverse: Sequence[bool],
               activations: Sequence, clip: Optional[float] = None, input_forget: bool = False,
               linear_before_reset: bool = False, names: Sequence[str] = ()) -> Call:
    """The time loop of a recurrent layer: ``(Y (T, D, B, H), Y_h (D, B, H)[, Y_c])`` from the input
    projection ``xp (T, B, D*G*H)`` (state-independent biases included) and ``rt``: each direction's
    ``R`` transposed, in the kernel's panels (`ingot.ops.recurrent.pack_recurrent_weights`).
    ``optional`` are the inputs ``names`` lists, in the order of `OPTIONAL_INPUTS`: ``initial_h``/``initial_c (D, B, H)``, ``sequence_lens (B,)``,
    ``peepholes (D, 3H)`` (LSTM), ``recurrent_h_bias (D, H)`` (GRU's ``Rbh`` under
    ``linear_before_reset``). ``activations`` holds per direction ``(name, alpha, beta)`` triples.

    Example: see the module docstring.
    """
    return make_call("recurrence", [xp, rt, *optional], kind=kind, hidden=hidden, reverse=tuple(reverse),
                     activations=tuple(activations), clip=clip, input_forget=input_forget,
                     linear_before_reset=linear_before_reset, optional=tuple(names))
