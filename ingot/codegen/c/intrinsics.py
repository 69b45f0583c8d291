"""C text of intrinsic calls: one small function per intrinsic, in a table keyed by ``Call.op``.

Note: each entry takes ``(ctx, call, args)`` where ``args`` are the already printed C operands of
one lane (vector calls are applied lane by lane by the printer) and ``ctx`` gives access to the
helper registry; it returns C text for one scalar. Math on ``float32``/``bfloat16`` calls the
``f``-suffixed libm function, ``float64`` the plain one, and ``float16`` computes in float and
rounds back (``(_Float16)sqrtf((float)x)``). exp/tanh/erf/sigmoid on float32 (and 16-bit floats)
call the prelude's vectorizable inline versions (``ingot_expf`` ...) instead of libm.

Example:
    >>> "exp" in INTRINSICS and "sigmoid" in INTRINSICS and "if_then_else" in INTRINSICS
    True
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from ingot.ir.dtype import DataType
from ingot.ir.expr import BufferLoad, Call, StringImm

__all__ = ["INTRINSICS", "C_CPU_INTRINSICS", "intrinsic_text"]

Emitter = Callable[[Any, Call, Sequence[str]], str]


def _float_dtype(call: Call) -> DataType:
    """The floating type the intrinsic computes in (the first argument's lane type)."""
    return call.args[0].dtype.element_of()


def _libm(base: str, dtype: DataType) -> str:
    return base if dtype.bits == 64 else base + "f"


def _math(base: str, f32: "str | None" = None) -> Emitter:
    """``expf(x)`` / ``exp(x)``; float16 goes through float. ``f32`` replaces the float name."""
    f32 = f32 or base + "f"

    def emit(ctx, call: Call, args: Sequence[str]) -> str:
        dtype = _float_dtype(call)
        if dtype.code == "float" and dtype.bits == 16:
            inner = ", ".join(f"(float)({a})" for a in args)
            return f"((_Float16){f32}({inner}))"
        if dtype.bits == 64:
            return f"{base}({', '.join(args)})"
        return f"{f32}({', '.join(args)})"

    return emit


def _formula(make: Callable[[str, Sequence[str]], str]) -> Emitter:
    """An intrinsic written as a formula of float-typed libm calls (``f`` suffix chosen here)."""

    def emit(ctx, call: Call, args: Sequence[str]) -> str:
        dtype = _float_dtype(call)
        if dtype.code == "float" and dtype.bits == 16:
            return f"((_Float16){make('f', [f'(float)({a})' for a in args])})"
        return make("" if dtype.bits == 64 else "f", args)

    return emit


def _predicate(name: str) -> Emitter:
    def emit(ctx, call: Call, args: Sequence[str]) -> str:
        return f"({name}({args[0]}) != 0)"

    return emit


def _abs(ctx, call: Call, args: Sequence[str]) -> str:
    dtype = call.dtype.element_of()
    if dtype.is_float:
        return _math("fabs")(ctx, call, args)
    if dtype.is_uint or dtype.is_bool:
        return f"({args[0]})"
    if dtype.bits == 64:
        return f"((int64_t)llabs({args[0]}))"
    return f"(({ctx.value_type(dtype)})abs({args[0]}))"


def _if_then_else(ctx, call: Call, args: Sequence[str]) -> str:
    # C's ?: evaluates only the chosen branch: guarded loads stay in bounds.
    return f"(({args[0]}) ? ({args[1]}) : ({args[2]}))"


def _binary(op: str) -> Emitter:
    def emit(ctx, call: Call, args: Sequence[str]) -> str:
        return ctx.wrap_narrow(call.dtype, f"({args[0]} {op} {args[1]})")

    return emit


def _bitwise_not(ctx, call: Call, args: Sequence[str]) -> str:
    return ctx.wrap_narrow(call.dtype, f"(~{args[0]})")


def _builtin_bits(name: str) -> Emitter:
    def emit(ctx, call: Call, args: Sequence[str]) -> str:
        dtype = call.args[0].dtype.element_of()
        suffix = "ll" if dtype.bits == 64 else ""
        cast = "unsigned long long" if dtype.bits == 64 else "unsigned int"
        if dtype.bits < 32:
            cast = f"uint{dtype.bits}_t"
        value = f"__builtin_{name}{suffix}(({cast})({args[0]}))"
        if name == "clz" and dtype.bits < 32:
            value = f"(__builtin_clz((unsigned int)(uint{dtype.bits}_t)({args[0]})) - {32 - dtype.bits})"
        return f"(({ctx.value_type(call.dtype.element_of())}){value})"

    return emit


_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _extern_name(call: Call) -> str:
    if not call.args or not isinstance(call.args[0], StringImm):
        raise ValueError(f"{call.op}: the first argument must be the function name as a string, got {call}")
    name = call.args[0].value
    if not _C_IDENT.fullmatch(name):
        raise ValueError(
            f"{call.op}: {name!r} is not a valid C function name; extern functions must be named "
            "by a C identifier ([A-Za-z_][A-Za-z0-9_]*)"
        )
    return name


def _call_extern(ctx, call: Call, args: Sequence[str]) -> str:
    return f"{_extern_name(call)}({', '.join(args[1:])})"


def _reinterpret(ctx, call: Call, args: Sequence[str]) -> str:
    src = ctx.value_type(call.args[0].dtype.element_of())
    dst = ctx.value_type(call.dtype.element_of())
    t = ctx.fresh("bits")
    return f"({{ {src} {t}_s = {args[0]}; {dst} {t}_d; memcpy(&{t}_d, &{t}_s, sizeof({t}_d)); {t}_d; }})"


def _prefetch(ctx, call: Call, args: Sequence[str]) -> str:
    # T.prefetch(W[i], rw, locality): the operand is an element load, printed ``ptr[i]``; its
    # address is what GCC's builtin takes (prefetcht0/t1/t2/nta by locality 3/2/1/0).
    if not isinstance(call.args[0], BufferLoad) or call.args[0].dtype.lanes != 1 or call.args[0].buffer.dtype.code == "bfloat":
        raise ValueError(f"prefetch: the first argument must be a scalar element load W[i] (not bfloat16), "
                         f"got {call.args[0]}; build it with ingot.tir.transform.software_prefetch.prefetch")
    return f"(__builtin_prefetch((const void*)&{args[0]}, {args[1]}, {args[2]}), 0)"


def _one(suffix: str) -> str:
    return "1.0" if not suffix else "1.0f"


INTRINSICS: dict[str, Emitter] = {
    **{name: _math(name) for name in (
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "tanh", "erf", "sin", "cos",
        "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil",
        "trunc", "nearbyint", "pow", "atan2", "fmod", "copysign", "hypot",
    )},
    # numpy rounds half to even: nearbyint (in the default rounding mode), not C's round().
    "round": _math("nearbyint"),
    "exp10": _formula(lambda s, a: f"pow{s}(10.0{s}, {a[0]})"),
    "rsqrt": _formula(lambda s, a: f"({_one(s)} / sqrt{s}({a[0]}))"),
    "sigmoid": _formula(lambda s, a: f"({_one(s)} / ({_one(s)} + exp{s}(-({a[0]}))))"),
    "isnan": _predicate("isnan"),
    "isinf": _predicate("isinf"),
    "isfinite": _predicate("isfinite"),
    "abs": _abs,
    "if_then_else": _if_then_else,
    "likely": lambda ctx, call, args: f"INGOT_LIKELY({args[0]})",
    "bitwise_and": _binary("&"),
    "bitwise_or": _binary("|"),
    "bitwise_xor": _binary("^"),
    "shift_left": _binary("<<"),
    "shift_right": _binary(">>"),
    "bitwise_not": _bitwise_not,
    "popcount": _builtin_bits("popcount"),
    "clz": _builtin_bits("clz"),
    "call_extern": _call_extern,
    "call_pure_extern": _call_extern,
    "reinterpret": _reinterpret,
    "prefetch": _prefetch,
}


#: The CPU C backend's table: `INTRINSICS` (portable libm names, which the CUDA backend extends)
#: with float32 exp/tanh/erf/sigmoid sent to the prelude's branch-free inline versions
#: (``ingot_expf`` ...). libm's scalar ``expf`` is an opaque call GCC cannot vectorize; these
#: inline to selects and FMAs, so loops calling them vectorize. float64 keeps libm.
C_CPU_INTRINSICS: dict[str, Emitter] = {
    **INTRINSICS,
    **{name: _math(name, f"ingot_{name}f") for name in ("exp", "tanh", "erf")},
    "sigmoid": _formula(lambda s, a: f"ingot_sigmoidf({a[0]})" if s else f"(1.0 / (1.0 + exp(-({a[0]}))))"),
}


def intrinsic_text(ctx, call: Call, args: Sequence[str]) -> str:
    """C text of one lane of ``call`` with operands ``args``.

    Example:
        >>> from ingot.ir import Var
        >>> from ingot.tir import exp
        >>> class Ctx: pass
        >>> intrinsic_text(Ctx(), exp(Var("x", "float32")), ["x"])
        'ingot_expf(x)'
        >>> intrinsic_text(Ctx(), exp(Var("x", "float64")), ["x"])
        'exp(x)'
    """
    emit = C_CPU_INTRINSICS.get(call.op)
    if emit is None:
        raise NotImplementedError(
            f"the C backend has no rule for intrinsic {call.op!r} (in `{call}`); known intrinsics: "
            f"{', '.join(sorted(INTRINSICS))}. Use T.call_extern to call a C function directly"
        )
    return emit(ctx, call, args)


def extern_names(call: Call) -> "list[str]":
    """Names of C functions ``call`` refers to (reserved so no variable shadows them)."""
    if call.op in ("call_extern", "call_pure_extern"):
        return [_extern_name(call)]
    return []
