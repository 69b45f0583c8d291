"""A small reference interpreter of TensorIR for the lowering tests (block-level and lowered form).

It runs a PrimFunc on numpy arrays, so a test can check that lowering keeps a function's meaning
without a C compiler. Memory is addressed by each buffer's ``data`` variable plus the flat
element offset, so the N-D parameter buffers and the 1-D views the lowering introduces (which
share ``data``) see the same storage. Fresh allocations are filled with NaN (floats) or a
sentinel, so reading an element that was never written shows up in the result.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ingot.ir import expr as E
from ingot.ir.buffer import Buffer
from ingot.tir.function import PrimFunc


class Interpreter:
    def __init__(self) -> None:
        self.env: dict[Any, Any] = {}
        self.mem: dict[Any, np.ndarray] = {}

    # -- memory ----------------------------------------------------------------------------------
    def _offset(self, buf: Buffer, indices) -> Any:
        offset = self.eval(buf.elem_offset)
        for idx, stride in zip(indices, buf.compact_strides()):
            offset = offset + self.eval(idx) * self.eval(stride)
        return offset

    def _storage(self, buf: Buffer) -> np.ndarray:
        try:
            return self.mem[buf.data]
        except KeyError:
            raise AssertionError(f"buffer {buf.name} accessed outside its allocation") from None

    def allocate(self, buf: Buffer) -> None:
        size = 1
        for d in buf.shape:
            size *= int(self.eval(d))
        dtype = buf.dtype.numpy_dtype()
        fill = np.nan if np.issubdtype(dtype, np.floating) else -12345
        self.mem[buf.data] = np.full(size, fill, dtype=dtype)

    # -- statements ------------------------------------------------------------------------------------
    def run(self, stmt: Any) -> None:
        getattr(self, "s_" + type(stmt).__name__)(stmt)

    def s_SeqStmt(self, s):
        for x in s.seq:
            self.run(x)

    def s_For(self, s):
        lo, ext = int(self.eval(s.min)), int(self.eval(s.extent))
        for v in range(lo, lo + ext):
            self.env[s.loop_var] = v
            self.run(s.body)

    def s_BufferStore(self, s):
        storage = self._storage(s.buffer)
        storage[self._offset(s.buffer, s.indices)] = self.eval(s.value)

    def s_IfThenElse(self, s):
        if bool(self.eval(s.condition)):
            self.run(s.then_case)
        elif s.else_case is not None:
            self.run(s.else_case)

    def s_LetStmt(self, s):
        self.env[s.var] = self.eval(s.value)
        self.run(s.body)

    def s_Evaluate(self, s):
        self.eval(s.value)

    def s_Allocate(self, s):
        saved = self.mem.get(s.buffer.data)
        self.allocate(s.buffer)
        self.run(s.body)
        if saved is None:
            del self.mem[s.buffer.data]
        else:
            self.mem[s.buffer.data] = saved

    def s_BlockRealize(self, s):
        block = s.block
        for iv, value in zip(block.iter_vars, s.iter_values):
            self.env[iv.var] = self.eval(value)
        if not bool(self.eval(s.predicate)):
            return
        for buf in block.alloc_buffers:
            self.allocate(buf)
        if block.match_buffers:
            raise NotImplementedError("match_buffer in the test interpreter")
        if block.init is not None:
            if all(self.env[iv.var] == self.eval(iv.dom.min) for iv in block.iter_vars if iv.kind == "R"):
                self.run(block.init)
        self.run(block.body)

    # -- expressions --------------------------------------------------------------------------------------
    def eval(self, e: Any) -> Any:
        return getattr(self, "e_" + type(e).__name__)(e)

    def e_Var(self, e):
        return self.env[e]

    e_SizeVar = e_Var

    def e_IntImm(self, e):
        return bool(e.value) if e.dtype.is_bool else int(e.value)

    def e_FloatImm(self, e):
        return e.dtype.numpy_dtype().type(e.value)

    def _bin(self, e, fn):
        return fn(self.eval(e.a), self.eval(e.b))

    def e_Add(self, e): return self._bin(e, lambda a, b: a + b)
    def e_Sub(self, e): return self._bin(e, lambda a, b: a - b)
    def e_Mul(self, e): return self._bin(e, lambda a, b: a * b)
    def e_FloorDiv(self, e): return self._bin(e, lambda a, b: a // b)
    def e_FloorMod(self, e): return self._bin(e, lambda a, b: a % b)
    def e_Min(self, e): return self._bin(e, np.minimum)
    def e_Max(self, e): return self._bin(e, np.maximum)
    def e_EQ(self, e): return self._bin(e, lambda a, b: a == b)
    def e_NE(self, e): return self._bin(e, lambda a, b: a != b)
    def e_LT(self, e): return self._bin(e, lambda a, b: a < b)
    def e_LE(self, e): return self._bin(e, lambda a, b: a <= b)
    def e_GT(self, e): return self._bin(e, lambda a, b: a > b)
    def e_GE(self, e): return self._bin(e, lambda a, b: a >= b)
    def e_And(self, e): return self._bin(e, np.logical_and)
    def e_Or(self, e): return self._bin(e, np.logical_or)

    def e_Div(self, e):
        if e.dtype.is_float:
            return self._bin(e, lambda a, b: a / b)
        return self._bin(e, lambda a, b: np.trunc(np.asarray(a) / b).astype(np.int64) if np.ndim(a) else
                         int(math.trunc(a / b)))

    def e_Not(self, e):
        return np.logical_not(self.eval(e.a))

    def e_Select(self, e):
        return np.where(self.eval(e.condition), self.eval(e.true_value), self.eval(e.false_value))

    def e_Cast(self, e):
        value = self.eval(e.value)
        dtype = e.dtype.element_of().numpy_dtype()
        return np.asarray(value).astype(dtype) if np.ndim(value) else dtype.type(value)

    def e_Ramp(self, e):
        return self.eval(e.base) + self.eval(e.stride) * np.arange(e.lanes)

    def e_Broadcast(self, e):
        return np.full(e.lanes, self.eval(e.value))

    def e_BufferLoad(self, e):
        return self._storage(e.buffer)[self._offset(e.buffer, e.indices)]

    def e_Call(self, e):
        args = [self.eval(a) for a in e.args]
        if e.op == "if_then_else":
            return args[1] if args[0] else args[2]
        return getattr(np, e.op)(*args)


def run_prim_func(func: PrimFunc, *args: Any) -> None:
    """Run ``func`` on numpy arrays (buffer parameters, modified in place) and ints (scalar parameters)."""
    interp = Interpreter()
    for param, arg in zip(func.params, args):
        if isinstance(param, Buffer):
            assert arg.flags["C_CONTIGUOUS"]
            interp.mem[param.data] = arg.reshape(-1)
            for dim, size in zip(param.shape, arg.shape):
                if isinstance(dim, E.Var):
                    interp.env[dim] = size
        else:
            interp.env[param] = arg
    interp.run(func.body)
