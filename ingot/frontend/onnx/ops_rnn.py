"""ONNX converters for the recurrent layers: ``LSTM``, ``GRU`` and ``RNN``.

Note: a recurrent layer becomes two pieces, whatever its sequence length ``T`` (static or known only at
run time):

1. the input projection of every step and direction as one GEMM: ``X`` viewed as ``(T*B, I)`` times
   ``W`` of all directions transposed to ``(I, D*G*H)`` (``G`` gates), plus the biases that do not depend
   on the state (``Wb + Rb``, except GRU's ``Rbh`` under ``linear_before_reset``);
2. the ``recurrence`` graph op (`ingot.graph.op.recurrent`) on that projection and ``R`` transposed: one
   TensorIR kernel (`ingot.ops.recurrent`) whose serial time loop runs, for each step, the recurrent GEMV
   ``H_{t-1} @ R^T`` and the gate arithmetic, for every direction, with ``sequence_lens`` masking
   (``t < sequence_lens[b]``: a masked step keeps the state and writes 0 to ``Y``, the ONNX semantics in
   both directions), the initial states, ``clip``, the activations with their alpha/beta, GRU's
   ``linear_before_reset`` and LSTM's peepholes and ``input_forget``. A sequence of length 0 ends with a
   zero state, as ONNX Runtime gives it. ``Y``, ``Y_h`` and ``Y_c`` come out of the kernel, permuted for
   ``layout=1``.

Choosing the lowering: the time-loop kernel is the default. It takes a run-time ``T`` (one build runs
every length) and its compile time and execution plan do not grow with ``T`` (an OCR or VAD model has
hundreds of steps). ``from_onnx(..., unroll_rnn=True)`` selects the other lowering, for a static ``T``
only: the layer unrolled at import (`_Layer.run_unrolled`): the projection split into per-step slices,
then per step and direction the recurrent GEMM with the step's slice added in its epilogue and the gate
arithmetic as fused elementwise kernels (an LSTM step is three kernels shared by all steps). Both run
the same input projection and both stream ``R`` once per step through register-tiled GEMV/GEMM code, so
their run times are close; the unrolled layer pays a build (and an AOT entry) that grows with ``T``, and
three kernel calls per step. A static ``sequence_lens`` is resolved per step there at import
time (steps every sequence covers need no mask, steps none covers are skipped), and an absent initial
state is a known zero (the first step has no recurrent GEMM).

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("LSTM", 14) is not None and get_converter("GRU", 7) is not None
    True
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from ingot import graph as G

from ingot.graph.op.recurrent import OPTIONAL_INPUTS, recurrence
from ingot.ops.recurrent import ACTIVATIONS, pack_recurrent_weights, weight_panel

from ._common import as_array, is_static, scalar_like
from .importer import register

#: The widest split/concat the unrolled layer emits (`concat_tree`, `_Layer.split_tree`): wider ones
#: become trees, so that compile time stays linear in the sequence length.
FAN = 8

# op → (gate count, activations per direction, default activations). Gate order in W/R/B is ONNX's:
# LSTM [i, o, f, c], GRU [z, r, h], RNN [i].
_LAYERS = {
    "LSTM": (4, 3, ("Sigmoid", "Tanh", "Tanh")),
    "GRU": (3, 2, ("Sigmoid", "Tanh")),
    "RNN": (1, 1, ("Tanh",)),
}

# activation (lower case) → (number of alpha, beta values it consumes, defaults). ONNX consumes
# ``activation_alpha``/``activation_beta`` in the order of the activations that take them; the
# defaults are those of the ONNX operators of the same name (ONNX Runtime does the same).
_ACT_PARAMS = {
    "affine": (1, 1, 1.0, 0.0),
    "leakyrelu": (1, 0, 0.01, 0.0),
    "thresholdedrelu": (1, 0, 1.0, 0.0),
    "scaledtanh": (1, 1, 1.0, 1.0),
    "hardsigmoid": (1, 1, 0.2, 0.5),
    "elu": (1, 0, 1.0, 0.0),
}


class _Builder:
    """Emits ops through the converter context and keeps the values graph expressions."""

    def __init__(self, ctx: Any, dtype: str):
        self.ctx = ctx
        self.dtype = dtype

    def __call__(self, call: Any) -> G.Expr:
        return self.ctx.expr(self.ctx.emit(call))

    def scalar(self, value: float) -> G.Constant:
        return scalar_like(value, self.dtype)


def _activation(name: str, alpha: float, beta: float) -> Callable[[_Builder, G.Expr], G.Expr]:
    """The activation ``name`` as a function emitting graph ops (``KeyError`` when unknown)."""
    op = G.op

    def affine(b, x):
        return b(op.add(b(op.multiply(x, b.scalar(alpha))), b.scalar(beta)))

    table = {
        "sigmoid": lambda b, x: b(op.sigmoid(x)),
        "tanh": lambda b, x: b(op.tanh(x)),
        "relu": lambda b, x: b(op.relu(x)),
        "affine": affine,
        "leakyrelu": lambda b, x: b(op.leaky_relu(x, alpha)),
        "thresholdedrelu": lambda b, x: b(op.where(b(op.greater(x, b.scalar(alpha))), x, b.scalar(0.0))),
        "scaledtanh": lambda b, x: b(op.multiply(b(op.tanh(b(op.multiply(x, b.scalar(beta))))), b.scalar(alpha))),
        "hardsigmoid": lambda b, x: b(op.clip(affine(b, x), 0.0, 1.0)),
        "elu": lambda b, x: b(op.where(b(op.greater_equal(x, b.scalar(0.0))), x,
                                       b(op.multiply(b(op.expm1(x)), b.scalar(alpha))))),
        "softsign": lambda b, x: b(op.divide(x, b(op.add(b(op.abs(x)), b.scalar(1.0))))),
        "softplus": lambda b, x: b(op.log(b(op.add(b(op.exp(x)), b.scalar(1.0))))),
    }
    return table[name]


def _activation_specs(node: Any, per_dir: int, defaults: tuple, num_dirs: int) -> list[list[tuple]]:
    """Per direction, the layer's activations (f, g, h for LSTM) as ``(name in lower case, alpha, beta)``."""
    names = [str(a) for a in (node.attr("activations") or [])]
    if not names:
        names = list(defaults) * num_dirs
    elif len(names) == per_dir and num_dirs == 2:
        names = names * 2  # one set given for a bidirectional layer: used for both directions
    if len(names) != per_dir * num_dirs:
        raise node.error(f"activations={names} has {len(names)} entries; a {node.op_type} with {num_dirs} "
                         f"direction(s) needs {per_dir * num_dirs} ({per_dir} per direction)")
    alphas = [float(a) for a in (node.attr("activation_alpha") or [])]
    betas = [float(a) for a in (node.attr("activation_beta") or [])]
    specs = []
    for name in names:
        key = name.lower()
        if key not in ACTIVATIONS:
            raise node.error(f"activation {name!r} is not one ONNX defines for recurrent layers; use one of "
                             "Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, "
                             "Elu, Softsign, Softplus")
        n_alpha, n_beta, alpha, beta = _ACT_PARAMS.get(key, (0, 0, 0.0, 0.0))
        if n_alpha and alphas:
            alpha = alphas.pop(0)
        if n_beta and betas:
            beta = betas.pop(0)
        specs.append((key, alpha, beta))
    return [specs[d * per_dir:(d + 1) * per_dir] for d in range(num_dirs)]


class _Layer:
    """One recurrent node being unrolled: its attributes, inputs and the per-direction weights."""

    def __init__(self, ctx: Any, node: Any):
        self.ctx, self.node = ctx, node
        self.kind = node.op_type
        self.gates, per_dir, defaults = _LAYERS[self.kind]
        direction = str(node.attr("direction", "forward"))
        if direction not in ("forward", "reverse", "bidirectional"):
            raise node.error(f"direction={direction!r}; ONNX allows forward, reverse or bidirectional")
        self.reverse = [False, True] if direction == "bidirectional" else [direction == "reverse"]
        self.num_dirs = len(self.reverse)
        self.layout = int(node.attr("layout", 0))
        self.clip = node.attr("clip")
        self.input_forget = bool(node.attr("input_forget", 0))
        self.lbr = bool(node.attr("linear_before_reset", 0))

        x = ctx.expr(node.input(0))
        self.dtype = ctx.dtype(x)
        self.b = _Builder(ctx, self.dtype)
        if self.layout == 1:  # (B, T, I) → (T, B, I)
            x = self.b(G.op.permute_dims(x, (1, 0, 2)))
        self.x = x
        shape = ctx.shape(x)
        if shape is None or len(shape) != 3:
            raise node.error(f"input X must be 3-D, got shape {shape}")
        self.steps, self.batch, self.in_size = shape
        if isinstance(self.steps, (int, np.integer)):
            self.steps = int(self.steps)
        wshape = ctx.shape(node.input(1))
        rshape = ctx.shape(node.input(2))
        hidden = node.attr("hidden_size") or rshape[-1]
        if not isinstance(hidden, (int, np.integer)):
            raise node.error("hidden_size is not given and R's last dimension is not static")
        self.hidden = int(hidden)
        gh = self.gates * self.hidden
        if tuple(wshape) != (self.num_dirs, gh, self.in_size) or tuple(rshape) != (self.num_dirs, gh, self.hidden):
            raise node.error(f"W {wshape} / R {rshape} do not match direction={direction!r} and hidden_size="
                             f"{self.hidden}: expected W ({self.num_dirs}, {gh}, {self.in_size}) (input size from X) and R "
                             f"({self.num_dirs}, {gh}, {self.hidden})")
        self.act_specs = _activation_specs(node, per_dir, defaults, self.num_dirs)
        self.acts = [[_activation(*a) for a in per] for per in self.act_specs]

    # -- weights -----------------------------------------------------------------------------------

    def transposed(self, value: Any, rows: int, cols: int) -> G.Expr:
        """``(D, rows, cols)`` weights as ``(cols, D*rows)``: every direction's ``W^T`` side by side."""
        if is_static(value):
            array = as_array(value).reshape(self.num_dirs * rows, cols)
            return G.const(np.ascontiguousarray(array.T.astype(self.dtype)))
        flat = self.b(G.op.reshape(self.ctx.expr(value), (self.num_dirs * rows, cols)))
        return self.b(G.op.permute_dims(flat, (1, 0)))

    def columns(self, value: G.Expr, start: int, stop: int, axis: int = -1) -> G.Expr:
        """``value[..., start:stop]`` on ``axis``."""
        return self.b(G.op.strided_slice(value, [start], [stop], axes=[axis]))

    def bias(self) -> "tuple[Optional[G.Expr], Optional[G.Expr]]":
        """``(input bias (D*G*H,), GRU's recurrent h-bias (D, H) under linear_before_reset)``; None when
        absent. The input bias is ``Wb + Rb`` (GRU's ``Rbh`` stays in the step when ``linear_before_reset``)."""
        bias = self.node.input(3)
        if bias is None:
            return None, None
        gh, h = self.gates * self.hidden, self.hidden
        if is_static(bias):
            array = as_array(bias).astype(self.dtype).reshape(self.num_dirs, 2 * gh)
            wb, rb = array[:, :gh].copy(), array[:, gh:].copy()
            rbh = None
            if self.kind == "GRU" and self.lbr:
                rbh = G.const(np.ascontiguousarray(rb[:, 2 * h:]))
                rb[:, 2 * h:] = 0
            return G.const((wb + rb).reshape(-1)), rbh
        value = self.ctx.expr(bias)
        wb, rb = self.columns(value, 0, gh), self.columns(value, gh, 2 * gh)
        rbh = None
        if self.kind == "GRU" and self.lbr:
            rbh = self.columns(rb, 2 * h, 3 * h)
            rb = self.b(G.op.concat([self.columns(rb, 0, 2 * h),
                                     self.b(G.op.zeros((self.num_dirs, h), self.dtype))], axis=1))
        return self.b(G.op.reshape(self.b(G.op.add(wb, rb)), (-1,))), rbh

    def initial(self, index: int) -> "list[Optional[G.Expr]]":
        """Per direction, the initial state input ``index`` as ``(B, H)`` (None when absent: zero)."""
        value = self.node.input(index)
        if value is None:
            return [None] * self.num_dirs
        value = self.ctx.expr(value)
        if self.layout == 1:  # (B, D, H) → (D, B, H)
            value = self.b(G.op.permute_dims(value, (1, 0, 2)))
        return [self.b(G.op.squeeze(self.b(G.op.strided_slice(value, [d], [d + 1], axes=[0])), axis=[0]))
                for d in range(self.num_dirs)]

    def masks(self) -> list:
        """Per step ``t``: None (every sequence covers it), False (none does: skip the step) or a (B, 1) bool
        mask ``t < sequence_lens``."""
        lens = self.node.input(4)
        if lens is None:
            return [None] * self.steps
        if is_static(lens):
            array = as_array(lens).reshape(-1).astype(np.int64)
            out = []
            for t in range(self.steps):
                covered = t < array
                if covered.all():
                    out.append(None)
                elif not covered.any():
                    out.append(False)
                else:
                    out.append(G.const(covered.reshape(-1, 1)))
            return out
        lens = self.ctx.expr(lens)
        row = self.b(G.op.reshape(lens, (1, self.ctx.shape(lens)[0], 1)))
        steps = G.const(np.arange(self.steps, dtype=self.ctx.dtype(row)).reshape(-1, 1, 1))
        every = self.b(G.op.less(steps, row))                                      # (T, B, 1)
        return self.split_steps(every, self.steps)

    def split_steps(self, value: G.Expr, count: int) -> list:
        """``(count, B, ...)`` → ``count`` tensors ``(B, W)``: one `split` along a batch-major view, so each part
        is a whole tensor (a kernel operand as it is, no copy per step)."""
        shape = self.ctx.shape(value)
        width = int(np.prod([int(d) for d in shape[2:]], dtype=np.int64))
        flat = self.b(G.op.reshape(self.b(G.op.permute_dims(value, (1, 0) + tuple(range(2, len(shape))))),
                                   (self.batch, count * width)))
        return self.split_tree(flat, count, width)

    def split_tree(self, flat: G.Expr, count: int, width: int) -> list:
        """``(B, count * width)`` → ``count`` tensors ``(B, width)`` through a tree of splits of at most `FAN`
        parts each: one split of ``D*T`` outputs costs lowering and gcc time quadratic-ish in ``T`` (and
        ``T`` different kernels' worth of C), while the tree's inner splits are all the same PrimFunc.

        Example: ``count`` 20 splits into 8 + 8 + 4 columns groups, then each group into its steps."""
        if count <= FAN:
            parts = self.ctx.bb.emit(G.op.split(flat, count, axis=1))
            return [self.ctx.bb.emit(G.TupleGetItem(parts, k)) for k in range(count)]
        group = FAN
        while count > group * FAN:
            group *= FAN
        sizes = [min(group, count - k) for k in range(0, count, group)]
        cuts = list(np.cumsum(sizes[:-1]) * width)
        parts = self.ctx.bb.emit(G.op.split(flat, [int(c) for c in cuts], axis=1))
        out = []
        for k, n in enumerate(sizes):
            out += self.split_tree(self.ctx.bb.emit(G.TupleGetItem(parts, k)), n, width)
        return out

    def empty_sequences(self) -> "Optional[G.Expr]":
        """A (B, 1) mask of the sequences of length 0, or None when there are none."""
        lens = self.node.input(4)
        if lens is None:
            return None
        if is_static(lens):
            array = as_array(lens).reshape(-1, 1)
            return G.const(array <= 0) if (array <= 0).any() else None
        lens = self.ctx.expr(lens)
        column = self.b(G.op.reshape(lens, (self.ctx.shape(lens)[0], 1)))
        return self.b(G.op.less_equal(column, G.const(np.array(0, self.ctx.dtype(column)))))

    # -- the unrolled layer -------------------------------------------------------------------------

    def projection(self) -> "tuple[G.Expr, Optional[G.Expr]]":
        """The input projection of every step and direction as one GEMM: ``(T*B, D*G*H)`` with the
        state-independent biases added, and GRU's recurrent h-bias ``(D, H)`` (or None)."""
        b = self.b
        w_t = self.transposed(self.node.input(1), self.gates * self.hidden, self.in_size)     # (I, D*G*H)
        # Sizes spelled out, not -1: a symbolic batch then stays the same Var in every shape.
        flat = b(G.op.reshape(self.x, (self.steps * self.batch, self.in_size)))
        proj = b(G.op.matmul(flat, w_t))
        in_bias, rbh = self.bias()
        if in_bias is not None:
            proj = b(G.op.add(proj, in_bias))
        return proj, rbh

    def run(self) -> list:
        """The layer as the time-loop kernel (`ingot.ops.recurrent`) after the input projection."""
        node, b, nd, h = self.node, self.b, self.num_dirs, self.hidden
        gh = self.gates * h
        proj, rbh = self.projection()
        args = [b(G.op.reshape(proj, (self.steps, self.batch, nd * gh)))]
        # R^T in the kernel's panels (`pack_recurrent_weights`): at import when R is a constant.
        r, panel = node.input(2), weight_panel(h, self.dtype)
        if is_static(r):
            args.append(G.const(pack_recurrent_weights(as_array(r).astype(self.dtype), panel)))
        elif panel is None:
            args.append(b(G.op.permute_dims(self.ctx.expr(r), (0, 2, 1))))            # (D, H, G*H)
        else:
            panels = b(G.op.reshape(self.ctx.expr(r), (nd, gh // panel, panel, h)))
            args.append(b(G.op.permute_dims(panels, (0, 1, 3, 2))))                   # (D, G*H/P, H, P)
        states = [self.states(5), self.states(6) if self.kind == "LSTM" else None]
        lens = self.node.input(4)
        peep = self.node.input(7) if self.kind == "LSTM" else None
        if peep is not None:
            peep = self.ctx.expr(peep) if not is_static(peep) else \
                G.const(as_array(peep).astype(self.dtype).reshape(nd, 3 * h))
        optional = states + [self.ctx.expr(lens) if lens is not None else None, peep, rbh]
        names = [n for n, v in zip(OPTIONAL_INPUTS, optional) if v is not None]
        call = self.ctx.bb.emit(recurrence(
            *args, *[v for v in optional if v is not None], kind=self.kind, hidden=h, reverse=self.reverse,
            activations=self.act_specs, clip=float(self.clip) if self.clip is not None else None,
            input_forget=self.input_forget, linear_before_reset=self.lbr, names=names))
        count = 3 if self.kind == "LSTM" else 2
        results = [self.ctx.bb.emit(G.TupleGetItem(call, k)) for k in range(count)]
        if self.layout == 1:  # Y (T, D, B, H) → (B, T, D, H); Y_h, Y_c (D, B, H) → (B, D, H)
            results = [b(G.op.permute_dims(results[0], (2, 0, 1, 3)))] + \
                [b(G.op.permute_dims(v, (1, 0, 2))) for v in results[1:]]
        return results[:max(node.num_outputs, 1)]

    def states(self, index: int) -> "Optional[G.Expr]":
        """The initial state input ``index`` as ``(D, B, H)`` (None when absent)."""
        value = self.node.input(index)
        if value is None:
            return None
        value = self.ctx.expr(value)
        if self.layout == 1:  # (B, D, H) → (D, B, H)
            value = self.b(G.op.permute_dims(value, (1, 0, 2)))
        return value

    def run_unrolled(self) -> list:
        """The layer unrolled over its static sequence length (see the module note)."""
        node, b = self.node, self.b
        gh, h, nd = self.gates * self.hidden, self.hidden, self.num_dirs
        if not isinstance(self.steps, int):
            raise node.error(f"the sequence length of X ({self.steps}) is only known at run time; unroll_rnn=True "
                             "unrolls over a static sequence length: give X a fixed sequence length with "
                             "shape_dict, or import without unroll_rnn (the time-loop kernel takes any length)")
        # Step 1. the input projection of every step and direction: one GEMM.
        proj, rbh = self.projection()
        # Every step's slice of the projection, (B, G*H) each, from one split (one kernel, D*T outputs):
        # each step's recurrent GEMM then takes its slice as an epilogue operand, and step kernels do
        # not differ by a slice offset (they are one PrimFunc for all steps).
        proj = b(G.op.reshape(proj, (self.steps, self.batch, nd, gh)))
        proj = b(G.op.reshape(b(G.op.permute_dims(proj, (2, 0, 1, 3))), (nd * self.steps, self.batch, gh)))
        xs = self.split_steps(proj, nd * self.steps)                        # [d*T + t]: (B, G*H)
        r_t = self.transposed(node.input(2), gh, h)                        # (H, D*G*H)
        peep = self.peepholes()
        init_h, init_c = self.initial(5), self.initial(6)
        masks = self.masks()
        want_y = bool(node.proto.output) and bool(node.proto.output[0])

        # Step 2. the steps of each direction, in its own order.
        ys, last_h, last_c = [], [], []
        for d, reverse in enumerate(self.reverse):
            r_d = self.columns(r_t, d * gh, (d + 1) * gh)                   # (H, G*H)
            state = {"h": init_h[d], "c": init_c[d]}
            if self.kind == "LSTM" and state["h"] is None and state["c"] is not None:
                state["h"] = self.zeros_like_batch()
            outs: list = [None] * self.steps
            for t in (range(self.steps - 1, -1, -1) if reverse else range(self.steps)):
                if masks[t] is False:
                    continue  # no sequence reaches this step: the state carries, Y is 0 here
                xg = xs[d * self.steps + t]                                  # (B, G*H)
                new = self.step(d, xg, r_d, state, peep, rbh)
                mask = masks[t]
                if mask is not None:
                    outs[t] = b(G.op.where(mask, new["h"], b.scalar(0.0)))
                    for key in new:
                        prev = state[key] if state[key] is not None else b.scalar(0.0)
                        new[key] = b(G.op.where(mask, new[key], prev))
                else:
                    outs[t] = new["h"]
                state.update(new)
            ys.append(outs)
            last_h.append(state["h"])
            last_c.append(state.get("c"))

        # Step 3. the outputs. A sequence of length 0 has a zero final state (as ONNX Runtime gives it), not
        # its initial state.
        empty = self.empty_sequences()
        if empty is not None:
            last_h = [b(G.op.where(empty, b.scalar(0.0), s)) if s is not None else None for s in last_h]
            last_c = [b(G.op.where(empty, b.scalar(0.0), s)) if s is not None else None for s in last_c]
        results: list = [None, None, None]
        if want_y:
            results[0] = self.stack_y(ys)
        results[1] = self.stack_state(last_h)
        if self.kind == "LSTM" and node.num_outputs > 2 and node.proto.output[2]:
            results[2] = self.stack_state(last_c)
        return results[:max(node.num_outputs, 1)]

    def zeros_like_batch(self) -> G.Expr:
        """A ``(B, H)`` zero state (for an LSTM given ``initial_c`` but not ``initial_h``)."""
        b = self.b
        if isinstance(self.batch, (int, np.integer)):
            return G.const(np.zeros((int(self.batch), self.hidden), self.dtype))
        # A symbolic batch: the zeros take their batch size from X (X[0, :, :1] * 0, broadcast to H).
        first = b(G.op.strided_slice(self.x, [0, 0], [1, 1], axes=[0, 2]))      # (1, B, 1)
        zero = b(G.op.multiply(b(G.op.reshape(first, (self.batch, 1))), b.scalar(0.0)))
        return b(G.op.add(zero, G.const(np.zeros((1, self.hidden), self.dtype))))

    def peepholes(self) -> "Optional[list]":
        """Per direction ``(p_i, p_o, p_f)`` as ``(H,)`` values, or None (LSTM's ``P`` absent)."""
        if self.kind != "LSTM" or self.node.input(7) is None:
            return None
        value, h = self.node.input(7), self.hidden
        out = []
        for d in range(self.num_dirs):
            if is_static(value):
                row = as_array(value).astype(self.dtype).reshape(self.num_dirs, 3 * h)[d]
                out.append([G.const(np.ascontiguousarray(row[k * h:(k + 1) * h])) for k in range(3)])
            else:
                row = self.b(G.op.reshape(self.b(G.op.strided_slice(self.ctx.expr(value), [d], [d + 1], axes=[0])),
                                          (3 * h,)))
                out.append([self.columns(row, k * h, (k + 1) * h) for k in range(3)])
        return out

    def gate(self, value: G.Expr) -> G.Expr:
        """A gate pre-activation, clipped to ``[-clip, clip]`` when the node has ``clip``."""
        if self.clip is None:
            return value
        c = float(self.clip)
        return self.b(G.op.clip(value, -c, c))

    def step(self, d: int, xg: G.Expr, r_d: G.Expr, state: dict, peep: Any, rbh: Any) -> dict:
        """One time step of direction ``d``: the new state (``{"h": ..., "c": ...}``)."""
        b, h = self.b, self.hidden
        h_prev = state["h"]
        acts = self.acts[d]
        if self.kind == "GRU":
            return {"h": self.gru_step(d, xg, r_d, h_prev, acts, rbh)}
        gates = xg if h_prev is None else b(G.op.add(b(G.op.matmul(h_prev, r_d)), xg))
        if self.kind == "RNN":
            return {"h": acts[0](b, self.gate(gates))}
        # LSTM: gates [i, o, f, c]; peepholes (p_i, p_o, p_f) on the previous cell (i, f), the new one (o).
        f_act, g_act, h_act = acts
        c_prev = state["c"]
        i_pre, o_pre, f_pre, c_pre = (self.columns(gates, k * h, (k + 1) * h) for k in range(4))
        if peep is not None and c_prev is not None:
            i_pre = b(G.op.add(i_pre, b(G.op.multiply(peep[d][0], c_prev))))
            f_pre = b(G.op.add(f_pre, b(G.op.multiply(peep[d][2], c_prev))))
        i = f_act(b, self.gate(i_pre))
        if self.input_forget:
            f = b(G.op.subtract(b.scalar(1.0), i))  # coupled input and forget gates
        else:
            f = f_act(b, self.gate(f_pre))
        cell = b(G.op.multiply(i, g_act(b, self.gate(c_pre))))
        if c_prev is not None:
            cell = b(G.op.add(b(G.op.multiply(f, c_prev)), cell))
        if peep is not None:
            o_pre = b(G.op.add(o_pre, b(G.op.multiply(peep[d][1], cell))))
        o = f_act(b, self.gate(o_pre))
        return {"h": b(G.op.multiply(o, h_act(b, cell))), "c": cell}

    def gru_step(self, d: int, xg: G.Expr, r_d: G.Expr, h_prev: Any, acts: list, rbh: Any) -> G.Expr:
        """One GRU step: ``z, r`` from ``[z, r]`` gates, the candidate with ``linear_before_reset`` or not."""
        b, h = self.b, self.hidden
        f_act, g_act = acts
        xz, xr, xh = (self.columns(xg, k * h, (k + 1) * h) for k in range(3))
        rbh_d = None
        if rbh is not None:
            rbh_d = b(G.op.reshape(b(G.op.strided_slice(rbh, [d], [d + 1], axes=[0])), (h,)))
        if h_prev is None:
            # A zero state: H @ R^T is 0 and only the recurrent h-bias (linear_before_reset) remains.
            z = f_act(b, self.gate(xz))
            r = f_act(b, self.gate(xr))
            pre = xh if rbh_d is None else b(G.op.add(xh, b(G.op.multiply(r, rbh_d))))
            cand = g_act(b, self.gate(pre))
            return b(G.op.multiply(b(G.op.subtract(b.scalar(1.0), z)), cand))
        if self.lbr:
            rec = b(G.op.matmul(h_prev, r_d))                                   # (B, 3H)
            rz, rr, rh = (self.columns(rec, k * h, (k + 1) * h) for k in range(3))
            if rbh_d is not None:
                rh = b(G.op.add(rh, rbh_d))
        else:
            rec = b(G.op.matmul(h_prev, self.columns(r_d, 0, 2 * h)))           # (B, 2H)
            rz, rr = self.columns(rec, 0, h), self.columns(rec, h, 2 * h)
        z = f_act(b, self.gate(b(G.op.add(xz, rz))))
        r = f_act(b, self.gate(b(G.op.add(xr, rr))))
        if self.lbr:
            pre = b(G.op.add(xh, b(G.op.multiply(r, rh))))
        else:
            pre = b(G.op.add(xh, b(G.op.matmul(b(G.op.multiply(r, h_prev)), self.columns(r_d, 2 * h, 3 * h)))))
        cand = g_act(b, self.gate(pre))
        # H = (1 - z) * cand + z * H_prev = cand + z * (H_prev - cand)
        return b(G.op.add(cand, b(G.op.multiply(z, b(G.op.subtract(h_prev, cand))))))

    def stack_y(self, ys: list) -> G.Expr:
        """``Y``: ``(T, D, B, H)`` (layout 0) or ``(B, T, D, H)`` (layout 1); steps no sequence reached are 0.

        The ``(B, H)`` step outputs in ``(t, d)`` order are one concat along the batch axis, viewed as
        ``(T, D, B, H)``: no per-step ``expand_dims`` (each would be a node in the fused kernel)."""
        b = self.b
        steps = [ys[d][t] if ys[d][t] is not None else self.zeros_like_batch()
                 for t in range(self.steps) for d in range(self.num_dirs)]
        y = concat_tree(b, steps)
        y = b(G.op.reshape(y, (self.steps, self.num_dirs, self.batch, self.hidden)))
        if self.layout == 1:
            y = b(G.op.permute_dims(y, (2, 0, 1, 3)))
        return y

    def stack_state(self, states: list) -> G.Expr:
        """``Y_h``/``Y_c``: ``(D, B, H)`` (layout 0) or ``(B, D, H)`` (layout 1)."""
        b = self.b
        states = [s if s is not None else self.zeros_like_batch() for s in states]
        out = b(G.op.concat(states, axis=0)) if len(states) > 1 else states[0]
        out = b(G.op.reshape(out, (self.num_dirs, self.batch, self.hidden)))
        if self.layout == 1:
            out = b(G.op.permute_dims(out, (1, 0, 2)))
        return out


def concat_tree(b: Callable, parts: list) -> G.Expr:
    """``concat(parts, axis=0)`` as a tree of concats of at most `FAN` inputs: a ``2T``-input concat is an
    if-then-else chain whose lowering and C compile grow quadratically with ``T``; the tree's groups of
    equal shapes are one PrimFunc, and the extra copies are of the small per-step outputs.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
        >>> bb = G.BlockBuilder()
        >>> with bb.function("main", [x]):
        ...     bb.emit_func_output(bb.emit(concat_tree(bb.emit, [x] * 20)))
        >>> bb.get()["main"].ret_struct_info.shape
        (40, 3)
    """
    if len(parts) == 1:
        return parts[0]
    if len(parts) <= FAN:
        return b(G.op.concat(parts, axis=0))
    group = FAN
    while len(parts) > group * FAN:
        group *= FAN
    return b(G.op.concat([concat_tree(b, parts[k:k + group]) for k in range(0, len(parts), group)], axis=0))


def _convert(ctx: Any, node: Any) -> list:
    """Convert an ``LSTM``/``GRU``/``RNN`` node (see the module note)."""
    layer = _Layer(ctx, node)
    return layer.run_unrolled() if getattr(ctx, "unroll_rnn", False) else layer.run()


for _op in _LAYERS:
    register(_op, since=1)(_convert)
