"""A Winograd conv task's design space is its default schedule (`winograd_rule`): the generic rules'
candidates for its unrolled transforms are slower, and some took gcc minutes to compile."""
from __future__ import annotations

import numpy as np
import pytest

from ingot import ops, te
from ingot.ops import winograd as W
from ingot.tune.tune_context import TuneContext

pytestmark = pytest.mark.compiler


def test_winograd_task_space_is_the_default_schedule():
    u = W.transform_weight(np.zeros((3, 3, 16, 16), "float32"), 2, 16)
    x, ut, b = te.placeholder((1, 8, 8, 16), name="x"), te.placeholder(u.shape, name="u"), te.placeholder((16,), name="b")
    y = ops.relu(ops.add(W.conv2d_nhwc_winograd(x, ut, padding=1), b))
    spaces = TuneContext(te.create_prim_func([x, ut, b, y]), "llvm -num-cores=2", seed=0).generate_design_space()
    assert len(spaces) == 1
    insts = [i.kind.name for i in spaces[0].trace.insts]
    assert "unroll" in insts and "compute_at" in insts  # winograd_rule's positions and padded tile
    assert not any(name.startswith("sample") for name in insts)
