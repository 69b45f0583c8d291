"""TVM's ``Trace.apply_json_to_schedule(json, sch)``: replay a JSON trace (Ingot's trace JSON)."""
import json

import ingot
from ingot import te
from ingot.tir import Schedule, Trace


def _func():
    A = te.placeholder((64, 64), name="A")
    return te.create_prim_func([A, te.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")])


def test_apply_json_to_schedule_replays_the_trace():
    sch = Schedule(_func())
    i, j = sch.get_loops(sch.get_block("B"))
    io, ii = sch.split(i, [None, 16])
    sch.reorder(ii, io)
    sch.vectorize(j)
    text = json.dumps(sch.trace.as_json())
    replayed = Schedule(_func())
    Trace.apply_json_to_schedule(json.loads(text), replayed)
    assert ingot.ir.structural_equal(sch.mod, replayed.mod)
    replayed_from_text = Schedule(_func())
    Trace.apply_json_to_schedule(text, replayed_from_text)
    assert ingot.ir.structural_equal(sch.mod, replayed_from_text.mod)
