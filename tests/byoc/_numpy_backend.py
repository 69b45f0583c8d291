"""A backend written from docs/byoc.md alone, as a newcomer would: elementwise ``exp``/``sigmoid``
regions run by numpy in Python (no C entry, so plans calling it run on the executor's interpreter).
Importable by name (``_numpy_backend``) so an exported model loads it in a fresh process."""
from __future__ import annotations

import json

import numpy as np

from ingot.byoc import Backend, Pattern, RuntimeModule, register_backend

_FUNCS = {"exp": np.exp, "sigmoid": lambda x: 1 / (1 + np.exp(-x))}


class NumpyModule(RuntimeModule):
    def __init__(self, steps: list, num_inputs: int, outputs: list):
        self.steps, self.num_inputs, self.outputs = steps, num_inputs, outputs

    def run(self, *arrays):
        values = list(arrays[:self.num_inputs])
        for op, arg in self.steps:
            values.append(_FUNCS[op](values[arg]))
        for out, index in zip(arrays[self.num_inputs:], self.outputs):
            out[...] = values[index]

    def save_to_bytes(self) -> bytes:
        return json.dumps({"steps": self.steps, "num_inputs": self.num_inputs, "outputs": self.outputs}).encode()

    @classmethod
    def load_from_bytes(cls, data: bytes) -> "NumpyModule":
        d = json.loads(data)
        return cls([tuple(s) for s in d["steps"]], d["num_inputs"], d["outputs"])


def float32(call):
    return None if str(call.struct_info.dtype) == "float32" else f"float32 only, got {call.struct_info.dtype}"


class NumpyBackend(Backend):
    name = "npref"

    def patterns(self):
        return [Pattern("npref.exp", "exp", float32), Pattern("npref.sigmoid", "sigmoid", float32)]

    def codegen(self, func, target):
        index = {id(p): k for k, p in enumerate(func.params)}
        steps = []
        for block in func.body.blocks:
            for b in block.bindings:
                steps.append((b.value.op.name, index[id(b.value.args[0])]))
                index[id(b.var)] = len(func.params) + len(steps) - 1
        body = func.body.body
        outs = list(body.fields) if hasattr(body, "fields") else [body]
        return NumpyModule(steps, len(func.params), [index[id(o)] for o in outs])


register_backend(NumpyBackend)
