"""A tiny reference interpreter for scheduled TensorIR (test helper): runs loops and blocks in
Python over numpy arrays, so schedule tests can compare numbers before `ingot.build` exists.

Semantics follow TENSORIR.md: a block runs when its predicate holds; a reduction block runs its
``init`` when all reduce iteration variables are at their minimum. Kept small: only for tests.
"""
from __future__ import annotations

import math

import numpy as np

from ingot.ir import expr as E
from ingot.tir import stmt as S

_BIN = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b,
    E.Min: min, E.Max: max, E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b,
    E.LT: lambda a, b: a < b, E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b,
}
_CALLS = {"exp": math.exp, "sqrt": math.sqrt, "tanh": math.tanh, "log": math.log, "abs": abs}


class Interp:
    def __init__(self, func, args):
        self.mem = {}
        for p, a in zip(func.params, args):
            self.mem[id(p.data)] = a
        self.func = func

    def run(self):
        self.stmt(self.func.body, {})

    def expr(self, e, env):
        t = type(e)
        if t is E.Var or t is E.SizeVar:
            return env[id(e)]
        if t is E.IntImm:
            return bool(e.value) if e.dtype.is_bool else e.value
        if t is E.FloatImm:
            return e.value
        f = _BIN.get(t)
        if f is not None:
            return f(self.expr(e.a, env), self.expr(e.b, env))
        if t is E.Div:
            a, b = self.expr(e.a, env), self.expr(e.b, env)
            return a / b if e.dtype.is_float else int(a / b)
        if t is E.And:
            return self.expr(e.a, env) and self.expr(e.b, env)
        if t is E.Or:
            return self.expr(e.a, env) or self.expr(e.b, env)
        if t is E.Not:
            return not self.expr(e.a, env)
        if t is E.Select:
            return self.expr(e.true_value, env) if self.expr(e.condition, env) else self.expr(e.false_value, env)
        if t is E.Cast:
            v = self.expr(e.value, env)
            return float(v) if e.dtype.is_float else int(v)
        if t is E.BufferLoad:
            return self.mem[id(e.buffer.data)][tuple(self.expr(i, env) for i in e.indices)]
        if t is E.Call:
            args = [self.expr(a, env) for a in e.args]
            if e.op == "if_then_else":
                return args[1] if args[0] else args[2]
            return _CALLS[e.op](*args)
        raise NotImplementedError(t.__name__)

    def stmt(self, s, env):
        t = type(s)
        if t is S.SeqStmt:
            for x in s.seq:
                self.stmt(x, env)
        elif t is S.For:
            lo, n = self.expr(s.min, env), self.expr(s.extent, env)
            for v in range(lo, lo + n):
                env[id(s.loop_var)] = v
                self.stmt(s.body, env)
        elif t is S.BlockRealize:
            if not self.expr(s.predicate, env):
                return
            b = s.block
            values = [self.expr(v, env) for v in s.iter_values]
            inner = dict(env)
            for iv, v in zip(b.iter_vars, values):
                inner[id(iv.var)] = v
            for buf in b.alloc_buffers:
                if id(buf.data) not in self.mem:
                    self.mem[id(buf.data)] = np.zeros([int(d) for d in buf.shape], str(buf.dtype))
            if b.init is not None and all(v == self.expr(iv.dom.min, inner) for iv, v in zip(b.iter_vars, values)
                                          if iv.kind == "R"):
                self.stmt(b.init, inner)
            self.stmt(b.body, inner)
        elif t is S.BufferStore:
            self.mem[id(s.buffer.data)][tuple(self.expr(i, env) for i in s.indices)] = self.expr(s.value, env)
        elif t is S.IfThenElse:
            if self.expr(s.condition, env):
                self.stmt(s.then_case, env)
            elif s.else_case is not None:
                self.stmt(s.else_case, env)
        elif t is S.LetStmt:
            env[id(s.var)] = self.expr(s.value, env)
            self.stmt(s.body, env)
        elif t is S.Evaluate:
            pass
        else:
            raise NotImplementedError(t.__name__)


def run(func, *arrays):
    """Run ``func`` on numpy arrays (modified in place); returns them."""
    Interp(func, arrays).run()
    return arrays
