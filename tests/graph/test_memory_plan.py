"""Static memory plan soundness: `place_buffers` on random lifetimes, `check_memory_plan` on hand-made bad plans,
and the plans of real models (the architecture zoo at small sizes): no two live tensors share a byte."""
from __future__ import annotations

import os

import numpy as np
import pytest

from ingot.graph.plan import ALIGN, check_memory_plan, place_buffers, plan_memory, value_lifetimes
from ingot.ir.error import IRError


def _assert_sound(sizes, lifetimes, offsets, peak):
    for i in range(len(sizes)):
        assert offsets[i] % ALIGN == 0 and 0 <= offsets[i] and offsets[i] + sizes[i] <= peak
        for j in range(i):
            live = lifetimes[i][0] <= lifetimes[j][1] and lifetimes[j][0] <= lifetimes[i][1]
            apart = offsets[i] + sizes[i] <= offsets[j] or offsets[j] + sizes[j] <= offsets[i]
            assert apart or not live, (i, j, sizes, lifetimes, offsets)


def test_place_buffers_never_overlaps_live_buffers_on_random_lifetimes():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 25))
        # Sizes that are often multiples of 4 KiB (as activations are) and sometimes odd.
        sizes = [int(rng.choice([4096 * int(rng.integers(1, 9)), int(rng.integers(1, 20000))])) for _ in range(n)]
        starts = rng.integers(0, 30, n)
        lifetimes = [(int(s), int(s + rng.integers(0, 8))) for s in starts]
        offsets, peak = place_buffers(sizes, lifetimes)
        _assert_sound(sizes, lifetimes, offsets, peak)
        # Never worse than giving every buffer its own aligned slot.
        assert peak <= sum((s + ALIGN - 1) // ALIGN * ALIGN for s in sizes)


def _chain_plan(n_steps, size=16):
    # x -> v0 -> v1 -> ... -> v{n-1} (the output); every intermediate read by the next step only.
    steps = [{"op": "call_tir", "func": "f", "args": [["input", 0] if k == 0 else ["value", k - 1]], "outs": [k]}
             for k in range(n_steps)]
    values = [{"shape": [size], "dtype": "float32", "step": k} for k in range(n_steps)]
    return {"name": "main", "inputs": [{"name": "x", "shape": [size], "dtype": "float32"}], "steps": steps,
            "values": values, "output": ["value", n_steps - 1], "memory": None}


def test_plan_memory_of_a_chain_ping_pongs_and_passes_the_check():
    plan = _chain_plan(5)
    plan["memory"] = plan_memory(plan)
    assert value_lifetimes(plan)[1] == (1, 2)
    offs = plan["memory"]["offsets"]
    assert "4" not in offs  # the output is a fresh array
    assert offs["0"] == offs["2"] and offs["0"] != offs["1"]
    check_memory_plan(plan)


def test_check_memory_plan_names_the_overlapping_live_values():
    plan = _chain_plan(4)
    plan["memory"] = {"offsets": {"0": 0, "1": 0, "2": 128}, "workspace_bytes": 192}
    with pytest.raises(IRError, match=r"values 0 \(steps 0-1\) and 1 \(steps 1-2\) are live"):
        check_memory_plan(plan)
    plan["memory"] = {"offsets": {"0": 32, "1": 128, "2": 0}, "workspace_bytes": 192}
    with pytest.raises(IRError, match="value 0 at offset 32 .* not 64-byte aligned"):
        check_memory_plan(plan)
    plan["memory"] = {"offsets": {"0": 0, "1": 64, "2": 0, "3": 128}, "workspace_bytes": 192}
    with pytest.raises(IRError, match="value 3 is a function output"):
        check_memory_plan(plan)
    plan["memory"] = None  # symbolic shapes: nothing to check
    check_memory_plan(plan)


# The real models: ResNet/MobileNetV2/BERT (test_models.py) and zoo families with concats, shuffles and
# attention, at the small sizes of ingot/testing/architectures.py.
ZOO = ["resnet50", "mobilenet_v2", "bert", "densenet121", "googlenet", "shufflenet_v2", "gpt2"]


@pytest.mark.slow
@pytest.mark.compiler
@pytest.mark.parametrize("name", ZOO)
def test_zoo_memory_plans_are_sound(name, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    import ingot
    from ingot.testing import zoo as Z

    path = os.path.join(str(tmp_path), f"{name}.onnx")
    Z.export(name, path)
    ex = ingot.compile(ingot.load(path)).executable
    for fname, plan in ex.plans.items():
        check_memory_plan(plan)
        mem = plan["memory"]
        if mem is not None and mem["offsets"]:
            assert 0 < mem["workspace_bytes"] <= mem["naive_bytes"], fname
