"""The time loop of a recurrent layer (ONNX ``LSTM``/``GRU``/``RNN``) as one TensorIR kernel.

Note: a recurrence cannot be a TE compute (step ``t`` reads step ``t-1``'s output), so this kernel is
written as lowered TensorIR (loops, stores, a local scratch buffer) and marked ``tir.is_scheduled``:
the default schedules keep it as written. The input projection ``X @ W^T + biases`` of every step is
not in here: it has no recurrence and is one ordinary GEMM over all ``T*B`` rows before the kernel
(``xp`` below). The kernel is

.. code-block:: text

    for q in parallel(ceil(B / 8) * D):           # one (tile of 8 batch rows, direction) per iteration
        rows, d = q // D, q % D
        h = Y_h[d, rows, :] = initial_h or 0     # the state lives in the outputs
        c = Y_c[d, rows, :] = initial_c or 0     # (LSTM)
        for s in serial(T):                      # the time loop
            t = T - 1 - s if reverse[d] else s
            acc[rows] = h[rows] @ R[d]^T         # per panel of 2 vectors of gate columns and 4 rows:
                                                 # 8 vector accumulators in registers over all k
            for b in rows:
                if t < sequence_lens[b]:         # (sequence_lens given)
                    gate arithmetic over the hidden axis (vectorized): new h (and c), Y[t, d, b] = h
                else:
                    Y[t, d, b, :] = 0            # a masked step keeps the state
        for b in rows: if sequence_lens[b] <= 0: h = c = 0   # ONNX Runtime's result for an empty sequence

Row tiles and directions are independent, so the only parallel loop is the outermost one: no
fork/join per step (a step at batch 1 takes microseconds, about an OpenMP fork's cost). ``T`` and
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
from ingot.ir import DataType, Var, as_const_int, decl_buffer
from ingot.ir.expr import Broadcast, PrimExpr, Ramp, Select, cast, const
from ingot.tir import Allocate, BufferStore, For, ForKind, IfThenElse, LetStmt, PrimFunc, SeqStmt

from ._util import nest_lets

#: Gates per layer kind (the gate axis of ``W``/``R`` is ``gates * hidden`` long).
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}

#: The GEMV ``h @ R^T`` of a step is register-tiled: `REG_ROWS` batch rows x `REG_VECTORS` vectors of
#: gate columns (a panel of ``R^T``, stored contiguous over ``k``: `pack_recurrent_weights`) accumulate in
#: ``REG_ROWS * REG_VECTORS`` vector registers over the whole ``k`` loop; each panel vector loaded for a
#: ``k`` serves `REG_ROWS` rows. 8 accumulators + 2 panel vectors + a broadcast fit the 16 vector registers
#: of AVX2 (and AVX-512's 32), whatever their width.
REG_ROWS = 4
REG_VECTORS = 2
#: The vector width of the tile when no target is known (`RecurrenceSpec.vector_bytes` default): AVX2's
#: 256 bits. A build for a target packs ``R^T`` for that target's width (`target_vector_bytes`, the
#: ``PackRecurrentWeights`` pass) and the kernel takes its width from the packed layout.
VECTOR_BYTES = 32

#: A hidden size that is not a multiple of the panel takes the plain GEMV: chunks of this many gate
#: columns (the whole gate axis when it is not a multiple) accumulate in L1 over the ``k`` loop.
ACC_COLUMNS = 64

#: Batch rows that go through a step together: each chunk of ``R^T`` loaded for a ``k`` serves this many
#: rows from L1 (``R`` is the step's memory traffic: a 256-hidden LSTM's is 1 MiB, an L2's size), while
#: the tile's accumulators (rows x `ACC_COLUMNS`) stay in L1.
ROW_TILE = 8


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
    #: The register tile's vector width in bytes (the target's: `target_vector_bytes`).
    vector_bytes: int = VECTOR_BYTES
    #: Whether ``rt`` is in panels (`pack_recurrent_weights`) when ``hidden`` allows; False: ``R^T`` as it is.
    packed: bool = True

    @property
    def gate_width(self) -> int:
        """``G * H``: the gate axis of ``W``, ``R`` and the projection."""
        return GATES[self.kind] * self.hidden

    @property
    def panel(self) -> Optional[int]:
        """Columns of ``R^T`` stored together, or None (``rt`` not packed): see `weight_panel`."""
        return weight_panel(self.hidden, self.dtype, self.vector_bytes) if self.packed else None

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
        panel = s.panel
        self.rt = decl_buffer((nd, gh // panel, h, panel) if panel else (nd, h, gh), dt, "rt")
        self.h0 = decl_buffer((nd, B, h), dt, "initial_h") if s.has_initial_h else None
        self.c0 = decl_buffer((nd, B, h), dt, "initial_c") if s.has_initial_c else None
        self.lens = decl_buffer((B,), s.lens_dtype, "sequence_lens") if s.lens_dtype else None
        self.peep = decl_buffer((nd, 3 * h), dt, "peepholes") if s.has_peepholes else None
        self.rbh = decl_buffer((nd, h), dt, "recurrent_h_bias") if s.has_recurrent_h_bias else None
        self.y = decl_buffer((T, nd, B, h), dt, "y")
        self.yh = decl_buffer((nd, B, h), dt, "y_h")
        self.yc = decl_buffer((nd, B, h), dt, "y_c") if s.kind == "LSTM" else None
        # Batch rows go through a step together in tiles of `ROW_TILE` (fewer at a small static batch).
        self.tile = min(ROW_TILE, B) if isinstance(B, int) else ROW_TILE
        self.tiles = -(-B // self.tile) if isinstance(B, int) else (B + self.tile - 1) // self.tile
        self.bo, self.d = Var("bo", "int64"), Var("d", "int64")
        # Rows of this tile: all of them but in the last tile of a batch the tile does not divide.
        divides = isinstance(B, int) and B % self.tile == 0
        self.rows = self.tile if divides else tir.min(self.tile, B - self.bo * self.tile)
        # Scratch of a tile: each row's recurrent GEMV gates, and GRU's r * h_{t-1}.
        self.acc = decl_buffer((self.tile, gh + (h if s.kind == "GRU" else 0)), dt, "acc", scope="local")

    def c(self, v: float) -> PrimExpr:
        return const(float(v), self.spec.dtype)

    def clip(self, x: PrimExpr) -> PrimExpr:
        """A gate pre-activation clipped to ``[-clip, clip]`` when the layer has ``clip``."""
        if self.spec.clip is None:
            return x
        return tir.min(tir.max(x, self.c(-self.spec.clip)), self.c(self.spec.clip))

    def row(self, bi: Any) -> PrimExpr:
        """The batch row of tile row ``bi``."""
        return self.bo * self.tile + bi

    def each_row(self, body: Callable[[Var, PrimExpr], Any]) -> For:
        """``for bi in rows: body(bi, batch row)`` with a fresh loop variable."""
        bi = Var("bi", "int64")
        return _loop(bi, self.rows, body(bi, self.row(bi)))

    def hidden_loop(self, body: Callable[[Var], Any]) -> For:
        """``for n in vectorized(H): body(n)`` with a fresh loop variable."""
        n = Var("n", "int64")
        return _loop(n, self.spec.hidden, body(n), ForKind.VECTORIZED)

    def length(self, b: PrimExpr) -> PrimExpr:
        """Row ``b``'s sequence length, at most ``T``."""
        return tir.min(cast(self.lens[b], "int64"), cast(self.steps, "int64"))

    # -- pieces of a step ---------------------------------------------------------------------------

    def gemv(self, out: int, src: Callable[[Any, Any, Any], PrimExpr], col: int, width: int) -> Any:
        """``acc[bi, out + j] = sum_k src(bi, b, k) * R[d]^T[k, col + j]`` for every row of the tile and
        ``j < width``: per panel of ``R^T`` and group of `REG_ROWS` rows, vector accumulators over all ``k``
        (a local buffer indexed by constants only, which the C compiler keeps in registers)."""
        cols = self.spec.panel
        if cols is None:
            return self.gemv_simple(out, src, col, width)
        rr = min(REG_ROWS, self.tile)
        if isinstance(self.rows, int) or rr == 1:
            return self.gemv_tiled(out, src, col, width, rr)
        # A run-time batch: a tile of fewer rows than a row group (batch 1) takes one-row groups instead of
        # computing REG_ROWS rows of which one is used.
        return IfThenElse(self.rows < rr, self.gemv_tiled(out, src, col, width, 1),
                          self.gemv_tiled(out, src, col, width, rr))

    def gemv_tiled(self, out: int, src: Callable[[Any, Any, Any], PrimExpr], col: int, width: int, rr: int) -> Any:
        """`gemv` with groups of ``rr`` rows."""
        acc, rt, h, d = self.acc, self.rt, self.spec.hidden, self.d
        cols = self.spec.panel
        lanes = cols // REG_VECTORS
        jo, k, g = Var("jo", "int64"), Var("k", "int64"), Var("g", "int64")
        reg = decl_buffer((rr * cols,), self.spec.dtype, "reg", scope="local")
        partial = not isinstance(self.rows, int) or self.rows % rr != 0   # a last group with fewer rows
        groups = (self.rows + rr - 1) // rr if partial else self.rows // rr

        def vec(start: Any) -> Ramp:
            return Ramp(start, 1, lanes)

        zero = [BufferStore(reg, Broadcast(self.c(0.0), lanes), [vec(i * lanes)]) for i in range(rr * REG_VECTORS)]
        fma, back = [], []
        for r in range(rr):
            # A row past the tile's rows (in a last, partial group) computes on the last row; it is not stored.
            bi = tir.min(g * rr + r, self.rows - 1) if partial else g * rr + r
            x = Broadcast(src(bi, self.row(bi), k), lanes)
            for v in range(REG_VECTORS):
                at = vec(r * cols + v * lanes)
                fma.append(BufferStore(reg, reg[at] + x * rt[d, col // cols + jo, k, vec(v * lanes)], [at]))
            stores = SeqStmt([BufferStore(acc, reg[vec(r * cols + v * lanes)],
                                          [g * rr + r, vec(out + jo * cols + v * lanes)]) for v in range(REG_VECTORS)])
            back.append(IfThenElse(g * rr + r < self.rows, stores) if partial else stores)
        body = Allocate(reg, SeqStmt.flatten(zero, _loop(k, h, SeqStmt(fma)), back))
        return _loop(jo, width // cols, _loop(g, groups, body))

    def gemv_simple(self, out: int, src: Callable[[Any, Any, Any], PrimExpr], col: int, width: int) -> Any:
        """`gemv` for ``R^T`` not packed (a hidden size that is not a multiple of the panel): ``k`` outside the
        rows, a chunk of `ACC_COLUMNS` columns loaded once per ``k`` and used by every row of the tile."""
        acc, rt, h, d = self.acc, self.rt, self.spec.hidden, self.d
        jo, k = Var("jo", "int64"), Var("k", "int64")
        chunk = ACC_COLUMNS if width % ACC_COLUMNS == 0 else width

        def zero(bi: Var, b: PrimExpr) -> Any:
            j = Var("j", "int64")
            return _loop(j, chunk, BufferStore(acc, self.c(0.0), [bi, out + jo * chunk + j]), ForKind.VECTORIZED)

        def fma(bi: Var, b: PrimExpr) -> Any:
            j = Var("j", "int64")
            at = out + jo * chunk + j
            store = BufferStore(acc, acc[bi, at] + src(bi, b, k) * rt[d, k, col + jo * chunk + j], [bi, at])
            return _loop(j, chunk, store, ForKind.VECTORIZED)

        return _loop(jo, width // chunk, SeqStmt([self.each_row(zero), _loop(k, h, self.each_row(fma))]))

    def masked(self, t: Any, b: PrimExpr, body: Any) -> Any:
        """``body`` (a step of row ``b``) where the row's sequence covers ``t``; else ``Y[t, d, b] = 0`` and the
        state carries."""
        if self.lens is None:
            return body
        zero = self.hidden_loop(lambda n: BufferStore(self.y, self.c(0.0), [t, self.d, b, n]))
        return IfThenElse(t < self.length(b), body, zero)

    def step(self, t: Any, acts: list) -> Any:
        """One step of the tile's rows in the current direction at time ``t``: new state, ``Y[t, d]``."""
        s, h, gh = self.spec, self.spec.hidden, self.spec.gate_width
        d, acc, state, dt = self.d, self.acc, self.yh, self.spec.dtype

        def x(b: PrimExpr, g: int, n: Var) -> PrimExpr:  # the step's input projection of gate g
            return self.xp[t, b, d * gh + g * h + n]

        def finish(b: PrimExpr, n: Var, value: PrimExpr, extra: list) -> Any:
            """Let ``h_new = value``; ``extra`` stores, then the new ``h`` into the state and ``Y[t]``."""
            hn = Var("h_new", dt)
            stores = SeqStmt.flatten(extra, BufferStore(state, hn, [d, b, n]), BufferStore(self.y, hn, [t, d, b, n]))
            return LetStmt(hn, value, stores)

        def h_row(bi: Any, b: PrimExpr, k: Any) -> PrimExpr:
            return state[d, b, k]

        def gates(body: Callable[[Var, PrimExpr, Var], Any]) -> Any:
            """The gate arithmetic of every row (masked by ``sequence_lens``)."""
            return self.each_row(lambda bi, b: self.masked(t, b, self.hidden_loop(lambda n: body(bi, b, n))))

        if s.kind == "RNN":
            return SeqStmt([self.gemv(0, h_row, 0, gh), gates(
                lambda bi, b, n: finish(b, n, acts[0](self.clip(x(b, 0, n) + acc[bi, n])), []))])
        if s.kind == "LSTM":
            f_act, g_act, h_act = acts
            cell = self.yc

            def lstm(bi: Var, b: PrimExpr, n: Var) -> Any:
                c_prev = cell[d, b, n]
                i, f, cn, o = (Var(name, dt) for name in ("i", "f", "c_new", "o"))
                i_pre, f_pre = x(b, 0, n) + acc[bi, n], x(b, 2, n) + acc[bi, 2 * h + n]
                o_pre = x(b, 1, n) + acc[bi, h + n]
                if self.peep is not None:
                    i_pre = i_pre + self.peep[d, n] * c_prev
                    f_pre = f_pre + self.peep[d, 2 * h + n] * c_prev
                    o_pre = o_pre + self.peep[d, h + n] * cn
                f_val = self.c(1.0) - i if s.input_forget else f_act(self.clip(f_pre))
                return nest_lets([
                    (i, f_act(self.clip(i_pre))),
                    (f, f_val),
                    (cn, f * c_prev + i * g_act(self.clip(x(b, 3, n) + acc[bi, 3 * h + n]))),
                    (o, f_act(self.clip(o_pre))),
                ], finish(b, n, o * h_act(cn), [BufferStore(cell, cn, [d, b, n])]))
            return SeqStmt([self.gemv(0, h_row, 0, gh), gates(lstm)])
        # GRU: z, r from the first 2H gate columns; the candidate with or without linear_before_reset.
        f_act, g_act = acts

        def zr(bi: Var, b: PrimExpr, n: Var) -> tuple:
            z, r = Var("z", dt), Var("r", dt)
            return z, r, [(z, f_act(self.clip(x(b, 0, n) + acc[bi, n]))),
                          (r, f_act(self.clip(x(b, 1, n) + acc[bi, h + n])))]

        if s.linear_before_reset:
            def gru_lbr(bi: Var, b: PrimExpr, n: Var) -> Any:
                z, r, lets = zr(bi, b, n)
                cand = Var("cand", dt)
                rec = acc[bi, 2 * h + n] + (self.rbh[d, n] if self.rbh is not None else self.c(0.0))
                return nest_lets(lets + [(cand, g_act(self.clip(x(b, 2, n) + r * rec)))],
                             finish(b, n, cand + z * (state[d, b, n] - cand), []))
            return SeqStmt([self.gemv(0, h_row, 0, gh), gates(gru_lbr)])

        # (r * h_{t-1}) @ Rh^T needs every r first: a first pass keeps z in acc[:, :H] and r * h in
        # acc[:, 3H:] (for every row: a masked row's scratch is not used).
        def first(bi: Var, b: PrimExpr) -> Any:
            def body(n: Var) -> Any:
                z, r, lets = zr(bi, b, n)
                return nest_lets(lets, SeqStmt([BufferStore(acc, z, [bi, n]),
                                            BufferStore(acc, r * state[d, b, n], [bi, 3 * h + n])]))
            return self.hidden_loop(body)

        def second(bi: Var, b: PrimExpr, n: Var) -> Any:
            cand = Var("cand", dt)
            return LetStmt(cand, g_act(self.clip(x(b, 2, n) + acc[bi, 2 * h + n])),
                           finish(b, n, cand + acc[bi, n] * (state[d, b, n] - cand), []))
        return SeqStmt([self.gemv(0, h_row, 0, 2 * h), self.each_row(first),
                        self.gemv(2 * h, lambda bi, b, k: acc[bi, 3 * h + k], 2 * h, h), gates(second)])

    # -- the whole kernel -------------------------------------------------------------------------

    def direction(self, index: int) -> Any:
        """Initial state, time loop and final state of the tile's rows in direction ``index``."""
        s, d, T = self.spec, self.d, self.steps
        sv = Var("s", "int64")
        acts = [activation(name, alpha, beta, s.dtype) for name, alpha, beta in s.activations[index]]
        zero = self.c(0.0)
        init = [self.each_row(lambda bi, b, out=out, given=given: self.hidden_loop(lambda n: BufferStore(
                    out, given[d, b, n] if given is not None else zero, [d, b, n])))
                for out, given in ((self.yh, self.h0), (self.yc, self.c0)) if out is not None]
        t = (T - 1 - sv) if s.reverse[index] else sv
        time_loop = _loop(sv, T, self.step(t, acts))
        if self.lens is None:
            return SeqStmt.flatten(init, time_loop)
        # An empty sequence ends with a zero state (ONNX Runtime's result), not its initial one.
        empty = [self.each_row(lambda bi, b, out=out: IfThenElse(
                    self.length(b) <= 0, self.hidden_loop(lambda n: BufferStore(out, zero, [d, b, n]))))
                 for out in (self.yh, self.yc) if out is not None]
        return SeqStmt.flatten(init, time_loop, empty)

    def build(self) -> PrimFunc:
        s = self.spec
        nd = s.num_dirs
        bodies = [self.direction(k) for k in range(nd)]
        body = bodies[0] if nd == 1 else IfThenElse(self.d == 0, bodies[0], bodies[1])
        q = Var("q", "int64")
        work = self.tiles * nd
        # One thread per (row tile, direction); a single one runs without an OpenMP region.
        kind = ForKind.SERIAL if isinstance(work, int) and work == 1 else ForKind.PARALLEL
        body = LetStmt(self.bo, q // nd, LetStmt(self.d, q % nd, Allocate(self.acc, body)))
        params = [p for p in (self.xp, self.rt, self.h0, self.c0, self.lens, self.peep, self.rbh,
                              self.y, self.yh, self.yc) if p is not None]
        return PrimFunc(params, _loop(q, work, body, kind), {"tir.noalias": True, "tir.is_scheduled": True})


def weight_panel(hidden: int, dtype: str, vector_bytes: int = VECTOR_BYTES) -> Optional[int]:
    """The kernel's ``R^T`` panel width (`REG_VECTORS` vectors of ``vector_bytes`` of ``dtype``) for a layer of
    ``hidden`` units, or None when ``hidden`` is not a multiple of it (``rt`` is then ``R^T`` unpacked, and the
    GEMV simpler).

    Example:
        >>> weight_panel(256, "float32"), weight_panel(20, "float32"), weight_panel(20, "float64")
        (16, None, None)
        >>> weight_panel(256, "float32", target_vector_bytes("llvm -mcpu=sapphirerapids"))
        32
    """
    cols = REG_VECTORS * vector_bytes * 8 // DataType(dtype).bits
    return cols if hidden % cols == 0 else None


def target_vector_bytes(target: Any = None) -> int:
    """The register tile's vector width for ``target`` (a `Target` or its string; None: `Target.current()`,
    else the host): its CPU model's vector width, at least 16 bytes (SSE).

    Example:
        >>> target_vector_bytes("llvm -mcpu=haswell"), target_vector_bytes("llvm -mcpu=sapphirerapids")
        (32, 64)
    """
    from ingot.target import as_target

    target = as_target(target)
    if not target.is_cpu:
        return VECTOR_BYTES  # the kernel is C for CPUs; other targets keep the importer's layout
    return max(16, int(target.vector_width_bits) // 8)


def panel_of(rt_shape: Any, dtype: str) -> "tuple[int, bool]":
    """``(vector_bytes, packed)`` of a `RecurrenceSpec` whose ``rt`` has shape ``rt_shape``: the panel width
    (last dim of the 4-D packed layout) names the vector width it was packed for; 3-D is ``R^T`` unpacked.

    Example:
        >>> panel_of((1, 4, 16, 32), "float32"), panel_of((1, 16, 64), "float32")
        ((64, True), (32, False))
    """
    if len(rt_shape) != 4:
        return VECTOR_BYTES, False
    panel = rt_shape[3] if isinstance(rt_shape[3], int) else as_const_int(rt_shape[3])
    return int(panel) * DataType(dtype).bits // 8 // REG_VECTORS, True


def unpack_recurrent_weights(rt: np.ndarray) -> np.ndarray:
    """``R`` (ONNX's ``(D, G*H, H)``) back from the kernel's layout (`pack_recurrent_weights`, packed or not).

    Example:
        >>> r = np.arange(64 * 16, dtype="float32").reshape(1, 64, 16)
        >>> bool((unpack_recurrent_weights(pack_recurrent_weights(r, 16)) == r).all())
        True
    """
    if rt.ndim == 4:
        nd, panels, h, p = rt.shape
        return np.ascontiguousarray(rt.transpose(0, 1, 3, 2).reshape(nd, panels * p, h))
    return np.ascontiguousarray(rt.transpose(0, 2, 1))


def pack_recurrent_weights(r: np.ndarray, panel: Optional[int]) -> np.ndarray:
    """``R`` of every direction (ONNX's ``(D, G*H, H)``) in the layout the kernel reads: ``R^T`` in panels of
    ``panel`` columns, ``(D, G*H / panel, H, panel)``, each panel contiguous over ``k`` (the GEMV streams one
    panel at a time: no 4 KiB stride per ``k``); ``R^T`` as ``(D, H, G*H)`` when ``panel`` is None.

    Example:
        >>> pack_recurrent_weights(np.zeros((1, 64, 16), "float32"), 16).shape
        (1, 4, 16, 16)
    """
    nd, gh, h = r.shape
    if panel is None:
        return np.ascontiguousarray(r.transpose(0, 2, 1))
    return np.ascontiguousarray(r.reshape(nd, gh // panel, panel, h).transpose(0, 1, 3, 2))


def recurrence_kernel(spec: RecurrenceSpec, steps: Any, batch: Any) -> PrimFunc:
    """The time-loop kernel of ``spec`` for ``steps`` (``T``) and ``batch`` (``B``), each an int or
    None/a symbolic size (then read from the arguments at run time).

    Parameters, in order: ``xp (T, B, D*G*H)`` (the input projection with the state-independent
    biases), ``rt`` (``R`` of each direction transposed, in panels: `pack_recurrent_weights`), then as
    ``spec`` says ``initial_h``, ``initial_c`` ``(D, B, H)``, ``sequence_lens (B,)``, ``peepholes (D, 3H)``,
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
    rt_full = rt.transpose(0, 2, 1, 3).reshape(nd, h, gh) if rt.ndim == 4 else rt   # R^T of each direction
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
                r = rt_full[d]
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
