"""The time loop of a recurrent layer (ONNX ``LSTM``/``GRU``/``RNN``) as one TensorIR kernel.

Note: a recurrence cannot be a TE compute (step ``t`` reads step ``t-1``'s output), so this kernel is
written as lowered TensorIR (loops, stores, a local scratch buffer) and marked ``tir.is_scheduled``:
the default schedules keep it as written. The input projection ``X @ W^T + biases`` of every step is
not in here: it has no recurrence and is one ordinary GEMM over all ``T*B`` rows before the kernel
(``xp`` below). The kernel is

.. code-block:: text

    for q in parallel(B * D):                    # one (batch row, direction) per iteration
        b, d = q // D, q % D
        h = Y_h[d, b, :] = initial_h or 0        # the state lives in the outputs
        c = Y_c[d, b, :] = initial_c or 0        # (LSTM)
        L = clamp(sequence_lens[b], 0, T)        # (sequence_lens given)
        for s in serial(T):                      # the time loop
            t = T - 1 - s if reverse[d] else s
            if t < L:
                acc = h @ R[d]^T                 # k outer, the gate axis inner and vectorized
                gate arithmetic over the hidden axis (vectorized): new h (and c), Y[t, d, b] = h
            else:
                Y[t, d, b, :] = 0                # a masked step keeps the state
        if sequence_lens[b] <= 0: h = c = 0      # as ONNX Runtime gives an empty sequence

Batch rows and directions are independent, so the only parallel loop is the outermost one: no
fork/join per step (a step at batch 1 is a few microseconds, less than an OpenMP fork). ``T`` and
``B`` may be symbolic: the kernel is compiled once and reads them from its arguments' shapes.

Gate order in the weights is ONNX's: LSTM ``[i, o, f, c]``, GRU ``[z, r, h]``, RNN ``[i]``. The
biases that do not depend on the state (``Wb + Rb``, except GRU's ``Rbh`` under
``linear_before_reset``) are part of ``xp``.

Example:
    >>> spec = RecurrenceSpec("RNN", hidden=4, reverse=(False,), activations=((("tanh", 0.0, 0.0),),))
    >>> func = recurrence_kernel(spec, steps=None, batch=1)
    >>> [p.name for p in func.params]
    ['xp', 'rt', 'y', 'y_h']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from ingot import tir
from ingot.ir import Var, decl_buffer
from ingot.ir.expr import PrimExpr, Select, cast, const
from ingot.tir import Allocate, BufferStore, For, ForKind, IfThenElse, LetStmt, PrimFunc, SeqStmt

#: Gates per layer kind (the gate axis of ``W``/``R`` is ``gates * hidden`` long).
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}

#: Gate columns accumulated together over the whole ``k`` loop of ``h @ R^T``: 64 float32 are 8 AVX2
#: (4 AVX-512) vector registers, so the C compiler keeps the chunk's accumulators in registers and
#: streams ``R`` once; a layer whose gate axis is not a multiple of it uses one chunk.
ACC_COLUMNS = 64


def _act_table(alpha: float, beta: float, dtype: str) -> dict:
    """Activation name (lower case) → function of a PrimExpr, the ONNX definitions."""
    def c(v: float) -> PrimExpr:
        return const(float(v), dtype)

    zero, one = c(0.0), c(1.0)
    return {
        "sigmoid": lambda x: tir.sigmoid(x),
        "tanh": lambda x: tir.tanh(x),
        "relu": lambda x: tir.max(x, zero),
        "affine": lambda x: x * c(alpha) + c(beta),
        "leakyrelu": lambda x: Select(x >= zero, x, x * c(alpha)),
        "thresholdedrelu": lambda x: Select(x > c(alpha), x, zero),
        "scaledtanh": lambda x: tir.tanh(x * c(beta)) * c(alpha),
        "hardsigmoid": lambda x: tir.min(tir.max(x * c(alpha) + c(beta), zero), one),
        "elu": lambda x: Select(x >= zero, x, tir.expm1(x) * c(alpha)),
        "softsign": lambda x: x / (tir.abs(x) + one),
        "softplus": lambda x: tir.log(tir.exp(x) + one),
    }


#: The activations a recurrent layer may use (ONNX's list), lower case.
ACTIVATIONS = tuple(_act_table(0.0, 0.0, "float32"))


def activation(name: str, alpha: float, beta: float, dtype: str) -> Callable[[PrimExpr], PrimExpr]:
    """The activation ``name`` (lower case) with its ``alpha``/``beta`` as a function of a PrimExpr.

    Example:
        >>> from ingot.ir import Var
        >>> str(activation("affine", 2.0, 1.0, "float32")(Var("x", "float32")))
        'x * 2.0 + 1.0'
    """
    return _act_table(alpha, beta, dtype)[name]


@dataclass(frozen=True)
class RecurrenceSpec:
    """What one recurrent layer's time-loop kernel computes (all but the tensor sizes ``T`` and ``B``).

    ``activations`` holds per direction the ``(name, alpha, beta)`` of each activation (LSTM: f, g, h;
    GRU: f, g; RNN: f); ``reverse`` per direction whether it walks from ``T-1`` down to 0. The ``has_*``
    flags say which optional inputs the kernel takes (``lens_dtype`` is ``sequence_lens``'s dtype).

    Example:
        >>> RecurrenceSpec("GRU", 8, (False, True), ((("sigmoid", 0, 0), ("tanh", 0, 0)),) * 2).gate_width
        24
    """

    kind: str
    hidden: int
    reverse: tuple
    activations: tuple
    clip: Optional[float] = None
    input_forget: bool = False
    linear_before_reset: bool = False
    has_initial_h: bool = False
    has_initial_c: bool = False
    lens_dtype: Optional[str] = None
    has_peepholes: bool = False
    has_recurrent_h_bias: bool = False
    dtype: str = "float32"

    @property
    def gate_width(self) -> int:
        """``G * H``: the gate axis of ``W``, ``R`` and the projection."""
        return GATES[self.kind] * self.hidden

    @property
    def num_dirs(self) -> int:
        """1 or 2 (bidirectional)."""
        return len(self.reverse)


def _loop(var: Var, extent: Any, body: Any, kind: str = ForKind.SERIAL) -> For:
    return For(var, 0, extent, kind, body)


class _Kernel:
    """Builds the statements of one `RecurrenceSpec` (see the module note)."""

    def __init__(self, spec: RecurrenceSpec, steps: Any, batch: Any):
        self.spec = spec
        s, dt = spec, spec.dtype
        h, gh, nd = s.hidden, s.gate_width, s.num_dirs
        # Symbolic sizes are fresh Vars: the caller binds them from the arguments' shapes.
        self.steps = steps if isinstance(steps, int) else Var("T", "int64")
        self.batch = batch if isinstance(batch, int) else Var("B", "int64")
        T, B = self.steps, self.batch
        self.xp = decl_buffer((T, B, nd * gh), dt, "xp")
        self.rt = decl_buffer((nd, h, gh), dt, "rt")
        self.h0 = decl_buffer((nd, B, h), dt, "initial_h") if s.has_initial_h else None
        self.c0 = decl_buffer((nd, B, h), dt, "initial_c") if s.has_initial_c else None
        self.lens = decl_buffer((B,), s.lens_dtype, "sequence_lens") if s.lens_dtype else None
        self.peep = decl_buffer((nd, 3 * h), dt, "peepholes") if s.has_peepholes else None
        self.rbh = decl_buffer((nd, h), dt, "recurrent_h_bias") if s.has_recurrent_h_bias else None
        self.y = decl_buffer((T, nd, B, h), dt, "y")
        self.yh = decl_buffer((nd, B, h), dt, "y_h")
        self.yc = decl_buffer((nd, B, h), dt, "y_c") if s.kind == "LSTM" else None
        # Scratch of one (row, direction): the recurrent GEMV's gates, and GRU's r * h_{t-1}.
        self.acc = decl_buffer((gh + (h if s.kind == "GRU" else 0),), dt, "acc", scope="local")
        self.b, self.d = Var("b", "int64"), Var("d", "int64")

    def c(self, v: float) -> PrimExpr:
        return const(float(v), self.spec.dtype)

    def clip(self, x: PrimExpr) -> PrimExpr:
        """A gate pre-activation clipped to ``[-clip, clip]`` when the layer has ``clip``."""
        if self.spec.clip is None:
            return x
        return tir.min(tir.max(x, self.c(-self.spec.clip)), self.c(self.spec.clip))

    # -- pieces of a step ---------------------------------------------------------------------------

    def gemv(self, out: int, src: Callable[[Any], PrimExpr], col: int, width: int) -> Any:
        """``acc[out + j] = sum_k src(k) * R[d]^T[k, col + j]`` for ``j < width``: ``k`` outer, so that a chunk
        of `ACC_COLUMNS` accumulators stays in registers while ``R`` streams through once."""
        acc, rt, h, d = self.acc, self.rt, self.spec.hidden, self.d
        j, j2, k, jo = Var("j", "int64"), Var("j", "int64"), Var("k", "int64"), Var("jo", "int64")
        chunk = ACC_COLUMNS if width % ACC_COLUMNS == 0 else width
        zero = _loop(j, chunk, BufferStore(acc, self.c(0.0), [out + jo * chunk + j]), ForKind.VECTORIZED)
        at = out + jo * chunk + j2
        fma = BufferStore(acc, acc[at] + src(k) * rt[d, k, col + jo * chunk + j2], [at])
        body = SeqStmt([zero, _loop(k, h, _loop(j2, chunk, fma, ForKind.VECTORIZED))])
        return _loop(jo, width // chunk, body)

    def hidden_loop(self, body: Callable[[Var], Any]) -> For:
        """``for n in vectorized(H): body(n)`` with a fresh loop variable."""
        n = Var("n", "int64")
        return _loop(n, self.spec.hidden, body(n), ForKind.VECTORIZED)

    def step(self, t: Any, acts: list) -> Any:
        """One step of the current (row, direction) at time ``t``: new state, ``Y[t, d, b]``."""
        s, h, gh = self.spec, self.spec.hidden, self.spec.gate_width
        b, d, acc, state, dt = self.b, self.d, self.acc, self.yh, self.spec.dtype

        def x(g: int, n: Var) -> PrimExpr:  # the step's input projection of gate g
            return self.xp[t, b, d * gh + g * h + n]

        def finish(n: Var, value: PrimExpr, extra: list) -> Any:
            """Let ``h_new = value``; ``extra`` stores, then the new ``h`` into the state and ``Y[t]``."""
            hn = Var("h_new", dt)
            stores = SeqStmt.flatten(extra, BufferStore(state, hn, [d, b, n]), BufferStore(self.y, hn, [t, d, b, n]))
            return LetStmt(hn, value, stores)

        def h_row(k: Any) -> PrimExpr:
            return state[d, b, k]

        if s.kind == "RNN":
            return SeqStmt([self.gemv(0, h_row, 0, gh),
                            self.hidden_loop(lambda n: finish(n, acts[0](self.clip(x(0, n) + acc[n])), []))])
        if s.kind == "LSTM":
            f_act, g_act, h_act = acts
            cell = self.yc

            def lstm(n: Var) -> Any:
                c_prev = cell[d, b, n]
                i, f, cn, o = (Var(name, dt) for name in ("i", "f", "c_new", "o"))
                i_pre, f_pre, o_pre = x(0, n) + acc[n], x(2, n) + acc[2 * h + n], x(1, n) + acc[h + n]
                if self.peep is not None:
                    i_pre = i_pre + self.peep[d, n] * c_prev
                    f_pre = f_pre + self.peep[d, 2 * h + n] * c_prev
                    o_pre = o_pre + self.peep[d, h + n] * cn
                f_val = self.c(1.0) - i if s.input_forget else f_act(self.clip(f_pre))
                return _lets([
                    (i, f_act(self.clip(i_pre))),
                    (f, f_val),
                    (cn, f * c_prev + i * g_act(self.clip(x(3, n) + acc[3 * h + n]))),
                    (o, f_act(self.clip(o_pre))),
                ], finish(n, o * h_act(cn), [BufferStore(cell, cn, [d, b, n])]))
            return SeqStmt([self.gemv(0, h_row, 0, gh), self.hidden_loop(lstm)])
        # GRU: z, r from the first 2H gate columns; the candidate with or without linear_before_reset.
        f_act, g_act = acts

        def zr(n: Var) -> tuple:
            z, r = Var("z", dt), Var("r", dt)
            return z, r, [(z, f_act(self.clip(x(0, n) + acc[n]))), (r, f_act(self.clip(x(1, n) + acc[h + n])))]

        if s.linear_before_reset:
            def gru_lbr(n: Var) -> Any:
                z, r, lets = zr(n)
                cand = Var("cand", dt)
                rec = acc[2 * h + n] + (self.rbh[d, n] if self.rbh is not None else self.c(0.0))
                return _lets(lets + [(cand, g_act(self.clip(x(2, n) + r * rec)))],
                             finish(n, cand + z * (state[d, b, n] - cand), []))
            return SeqStmt([self.gemv(0, h_row, 0, gh), self.hidden_loop(gru_lbr)])

        # (r * h_{t-1}) @ Rh^T needs every r first: a first pass keeps z in acc[:H] and r * h in acc[3H:].
        def first(n: Var) -> Any:
            z, r, lets = zr(n)
            return _lets(lets, SeqStmt([BufferStore(acc, z, [n]), BufferStore(acc, r * state[d, b, n], [3 * h + n])]))

        def second(n: Var) -> Any:
            cand = Var("cand", dt)
            return LetStmt(cand, g_act(self.clip(x(2, n) + acc[2 * h + n])),
                           finish(n, cand + acc[n] * (state[d, b, n] - cand), []))
        return SeqStmt([self.gemv(0, h_row, 0, 2 * h), self.hidden_loop(first),
                        self.gemv(2 * h, lambda k: acc[3 * h + k], 2 * h, h), self.hidden_loop(second)])

    # -- the whole kernel -------------------------------------------------------------------------

    def direction(self, index: int) -> Any:
        """Initial state, time loop and final state of one (row, direction ``index``)."""
        s = self.spec
        b, d, T = self.b, self.d, self.steps
        sv = Var("s", "int64")
        acts = [activation(name, alpha, beta, s.dtype) for name, alpha, beta in s.activations[index]]
        zero = self.c(0.0)
        init = [self.hidden_loop(lambda n, out=out, given=given: BufferStore(
                    out, given[d, b, n] if given is not None else zero, [d, b, n]))
                for out, given in ((self.yh, self.h0), (self.yc, self.c0)) if out is not None]
        t = (T - 1 - sv) if s.reverse[index] else sv
        step = self.step(t, acts)
        if self.lens is None:
            return SeqStmt.flatten(init, _loop(sv, T, step))
        length = Var("length", "int64")
        masked = self.hidden_loop(lambda n: BufferStore(self.y, zero, [t, d, b, n]))
        time_loop = _loop(sv, T, IfThenElse(t < length, step, masked))
        # An empty sequence ends with a zero state (ONNX Runtime's result), not its initial one.
        empty = [self.hidden_loop(lambda n, out=out: BufferStore(out, zero, [d, b, n]))
                 for out in (self.yh, self.yc) if out is not None]
        tail = IfThenElse(length <= 0, SeqStmt.flatten(empty))
        lens = cast(self.lens[b], "int64")
        return LetStmt(length, tir.min(lens, cast(T, "int64")), SeqStmt.flatten(init, time_loop, tail))

    def build(self) -> PrimFunc:
        s = self.spec
        nd = s.num_dirs
        bodies = [self.direction(k) for k in range(nd)]
        body = bodies[0] if nd == 1 else IfThenElse(self.d == 0, bodies[0], bodies[1])
        q = Var("q", "int64")
        rows = self.batch * nd
        # One thread per (row, direction); a single one runs without an OpenMP region.
        kind = ForKind.SERIAL if isinstance(rows, int) and rows == 1 else ForKind.PARALLEL
        body = LetStmt(self.b, q // nd, LetStmt(self.d, q % nd, Allocate(self.acc, body)))
        params = [p for p in (self.xp, self.rt, self.h0, self.c0, self.lens, self.peep, self.rbh,
                              self.y, self.yh, self.yc) if p is not None]
        return PrimFunc(params, _loop(q, rows, body, kind), {"tir.noalias": True, "tir.is_scheduled": True})


def _lets(pairs: list, body: Any) -> Any:
    """``body`` under ``LetStmt``s binding ``pairs`` in order."""
    for var, value in reversed(pairs):
        body = LetStmt(var, value, body)
    return body


def recurrence_kernel(spec: RecurrenceSpec, steps: Any, batch: Any) -> PrimFunc:
    """The time-loop kernel of ``spec`` for ``steps`` (``T``) and ``batch`` (``B``), each an int or
    None/a symbolic size (then read from the arguments at run time).

    Parameters, in order: ``xp (T, B, D*G*H)`` (the input projection with the state-independent
    biases), ``rt (D, H, G*H)`` (``R`` of each direction transposed), then as ``spec`` says
    ``initial_h``, ``initial_c`` ``(D, B, H)``, ``sequence_lens (B,)``, ``peepholes (D, 3H)``,
    ``recurrent_h_bias (D, H)``; outputs ``y (T, D, B, H)``, ``y_h (D, B, H)``, ``y_c (D, B, H)`` (LSTM).

    Example:
        >>> spec = RecurrenceSpec("LSTM", 8, (False,), ((("sigmoid", 0, 0), ("tanh", 0, 0), ("tanh", 0, 0)),))
        >>> [str(d) for d in recurrence_kernel(spec, None, 2).params[0].shape]
        ['T', '2', '32']
    """
    return _Kernel(spec, steps, batch).build()


def recurrence_numpy(spec: RecurrenceSpec, xp: np.ndarray, rt: np.ndarray, initial_h: Any = None,
                     initial_c: Any = None, lens: Any = None, peepholes: Any = None,
                     recurrent_h_bias: Any = None) -> list:
    """The kernel's result computed with numpy, step by step (the reference for tests).

    Example:
        >>> spec = RecurrenceSpec("RNN", 2, (False,), ((("relu", 0, 0),),))
        >>> xp = np.ones((3, 1, 2), "float32")
        >>> y, y_h = recurrence_numpy(spec, xp, np.zeros((1, 2, 2), "float32"))
        >>> y.shape, y_h.tolist()
        ((3, 1, 1, 2), [[[1.0, 1.0]]])
    """
    steps, batch = xp.shape[:2]
    h, gh, nd = spec.hidden, spec.gate_width, spec.num_dirs
    dt = xp.dtype
    y = np.zeros((steps, nd, batch, h), dt)
    yh = np.zeros((nd, batch, h), dt)
    yc = np.zeros((nd, batch, h), dt)
    clip = (lambda v: np.clip(v, -spec.clip, spec.clip)) if spec.clip is not None else (lambda v: v)
    for d in range(nd):
        acts = [_numpy_activation(*a) for a in spec.activations[d]]
        for b in range(batch):
            hs = initial_h[d, b].astype(dt) if initial_h is not None else np.zeros(h, dt)
            cs = initial_c[d, b].astype(dt) if initial_c is not None else np.zeros(h, dt)
            length = min(int(lens[b]), steps) if lens is not None else steps
            order = range(steps - 1, -1, -1) if spec.reverse[d] else range(steps)
            for t in order:
                if t >= length:
                    continue
                x = xp[t, b, d * gh:(d + 1) * gh]
                r = rt[d]
                if spec.kind == "RNN":
                    hs = acts[0](clip(x + hs @ r))
                elif spec.kind == "LSTM":
                    g = x + hs @ r
                    p = peepholes[d] if peepholes is not None else np.zeros(3 * h, dt)
                    i = acts[0](clip(g[:h] + p[:h] * cs))
                    f = 1 - i if spec.input_forget else acts[0](clip(g[2 * h:3 * h] + p[2 * h:] * cs))
                    cs = f * cs + i * acts[1](clip(g[3 * h:]))
                    o = acts[0](clip(g[h:2 * h] + p[h:2 * h] * cs))
                    hs = o * acts[2](cs)
                else:
                    rec = hs @ r
                    z = acts[0](clip(x[:h] + rec[:h]))
                    rr = acts[0](clip(x[h:2 * h] + rec[h:2 * h]))
                    if spec.linear_before_reset:
                        rbh = recurrent_h_bias[d] if recurrent_h_bias is not None else 0
                        cand = acts[1](clip(x[2 * h:] + rr * (rec[2 * h:] + rbh)))
                    else:
                        cand = acts[1](clip(x[2 * h:] + (rr * hs) @ r[:, 2 * h:]))
                    hs = (1 - z) * cand + z * hs
                y[t, d, b] = hs
            if length <= 0:
                hs, cs = np.zeros(h, dt), np.zeros(h, dt)
            yh[d, b], yc[d, b] = hs, cs
    return [y, yh, yc] if spec.kind == "LSTM" else [y, yh]


def _numpy_activation(name: str, alpha: float, beta: float) -> Callable:
    table = {
        "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "tanh": np.tanh,
        "relu": lambda x: np.maximum(x, 0),
        "affine": lambda x: x * alpha + beta,
        "leakyrelu": lambda x: np.where(x >= 0, x, x * alpha),
        "thresholdedrelu": lambda x: np.where(x > alpha, x, 0),
        "scaledtanh": lambda x: np.tanh(x * beta) * alpha,
        "hardsigmoid": lambda x: np.clip(x * alpha + beta, 0, 1),
        "elu": lambda x: np.where(x >= 0, x, np.expm1(x) * alpha),
        "softsign": lambda x: x / (np.abs(x) + 1),
        "softplus": lambda x: np.log(np.exp(x) + 1),
    }
    return lambda x: table[name](x).astype(x.dtype)
