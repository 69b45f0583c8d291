"""The sliding-window argument preamble (ingot.ops._window) shared by every conv/pool compute and by
the graph operators: normalization, and errors that name the operator and the argument."""
import re

import numpy as np
import pytest

from ingot import te
from ingot import graph as G
from ingot.ir import IRError
from ingot.ops import nn, packed
from ingot.ops._window import conv_window, padding4, pair


def test_normal_forms():
    assert pair("op", "strides", 2) == (2, 2)
    assert pair("op", "strides", [3]) == (3, 3)
    assert pair("op", "strides", (1, 2)) == (1, 2)
    assert padding4("op", 1) == (1, 1, 1, 1)
    assert padding4("op", (1, 2)) == (1, 2, 1, 2)
    assert padding4("op", (1, 2, 3, 4)) == (1, 2, 3, 4)
    x = te.placeholder((1, 3, 8, 8), "int8", name="x")
    win = conv_window("conv2d_nchw", x, strides=(2, 1), padding=0, dilation=2)
    assert win == ((2, 1), (2, 2), (0, 0, 0, 0), "int8")
    assert conv_window("conv2d_nchw", x, out_dtype="int32").out_dtype == "int32"


X_NCHW = te.placeholder((1, 4, 8, 8), name="x")
X_NHWC = te.placeholder((1, 8, 8, 4), name="x")
OPS = [
    ("conv2d_nchw", lambda **kw: nn.conv2d_nchw(X_NCHW, te.placeholder((4, 4, 3, 3), name="w"), **kw)),
    ("conv2d_nhwc", lambda **kw: nn.conv2d_nhwc(X_NHWC, te.placeholder((3, 3, 4, 4), name="w"), **kw)),
    ("depthwise_conv2d_nhwc",
     lambda **kw: nn.depthwise_conv2d_nhwc(X_NHWC, te.placeholder((3, 3, 1, 4), name="w"), **kw)),
    ("conv2d_transpose_nchw",
     lambda **kw: nn.conv2d_transpose_nchw(X_NCHW, te.placeholder((4, 4, 3, 3), name="w"), **kw)),
    ("pool2d", lambda **kw: nn.pool2d(X_NCHW, "max", 2, **kw)),
    ("conv2d_nchw_packed_weight",
     lambda **kw: packed.conv2d_nchw_packed_weight(X_NCHW, te.placeholder((1, 4, 3, 3, 16), name="w"), **kw)),
    ("depthwise_conv2d_nchw_packed_weight",
     lambda **kw: packed.depthwise_conv2d_nchw_packed_weight(
         te.placeholder((1, 16, 8, 8), name="x"), te.placeholder((1, 3, 3, 16), name="w"), **kw)),
    ("conv2d_nhwc_packed_weight",
     lambda **kw: packed.conv2d_nhwc_packed_weight(X_NHWC, te.placeholder((1, 3, 3, 4, 16), name="w"), **kw)),
]
BAD = [
    ({"strides": 0}, "strides must be positive"),
    ({"strides": (1, 2, 3)}, "strides must be an int or an (h, w) pair"),
    ({"dilation": (1, -1)}, "dilation must be positive"),
    ({"padding": -1}, "padding must be non-negative"),
    ({"padding": (1, 2, 3)}, "padding must be an int, (h, w) or (top, left, bottom, right)"),
    ({"strides": 1.5}, "strides must hold integers"),
]


@pytest.mark.parametrize("name,build", OPS, ids=[n for n, _ in OPS])
@pytest.mark.parametrize("kwargs,message", BAD, ids=[m.split(" must")[0] + str(i) for i, (_, m) in enumerate(BAD)])
def test_bad_window_argument_names_op_and_argument(name, build, kwargs, message):
    build(padding=1)  # the valid call builds
    with pytest.raises(ValueError, match="^" + re.escape(f"{name}: {message}")):
        build(**kwargs)


def test_output_padding_may_be_zero_but_not_negative():
    w = te.placeholder((4, 4, 3, 3), name="w")
    nn.conv2d_transpose_nchw(X_NCHW, w, strides=2, output_padding=0)
    with pytest.raises(ValueError, match="^conv2d_transpose_nchw: output_padding must be non-negative"):
        nn.conv2d_transpose_nchw(X_NCHW, w, strides=2, output_padding=-1)


def test_graph_ops_share_the_checks_and_raise_ir_errors():
    x = G.Var("x", G.TensorStructInfo((1, 3, 8, 8), "float32"))
    w = G.Var("w", G.TensorStructInfo((4, 3, 3, 3), "float32"))
    assert G.op.conv2d(x, w, strides=np.array([2, 2]), padding=1).struct_info.shape == (1, 4, 4, 4)
    with pytest.raises(IRError, match="operator 'conv2d': strides must be positive"):
        G.op.conv2d(x, w, strides=0)
    with pytest.raises(IRError, match="operator 'pool2d': padding must be non-negative"):
        G.op.max_pool2d(x, pool_size=2, padding=-1)
