"""`ingot.graph.op`: builders of graph operator calls (``G.op.linear(x, w, b)``, ``G.op.relu(x)``...).

Importing this package registers every operator (one module per family) in
`ingot.graph.op_registry`.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 784), "float32"))
    >>> w = G.Var("w", G.TensorStructInfo((128, 784), "float32"))
    >>> str(G.op.relu(G.op.linear(x, w)).struct_info)
    'R.Tensor((1, 128), dtype="float32")'
"""
from .base import call_dps_packed, call_packed, call_tir
from .binary import (
    add, divide, equal, floor_divide, floor_mod, greater, greater_equal, less, less_equal, maximum, minimum, mod,
    multiply, not_equal, power, subtract, where,
)
from .create import arange, broadcast_to, cumsum, expand, full, ones, pad, unsqueeze, zeros
from .linalg import dense, linear, matmul
from .image import resize2d
from .manip import (
    concat, expand_dims, flatten, gather_elements, permute_dims, reshape, split, squeeze, strided_slice, take,
    take_along_axis, transpose,
)
from .nn import (
    avg_pool2d, batch_norm, conv2d, conv2d_transpose, conv_transpose2d, global_avg_pool2d, group_norm, layer_norm,
    log_softmax, max_pool2d, softmax,
)
from .sort import topk
from .reduce import argmax, argmin, max, mean, min, prod, sum  # noqa: A004 - numpy/TVM names
from .unary import (
    abs, astype, cast, ceil, clip, cos, erf, exp, expm1, floor, gelu, gelu_tanh, hard_swish, leaky_relu, log,
    negative, relu, round, rsqrt, sigmoid, silu, sin, sqrt, tanh,
)
from . import packed  # noqa: E402 - registers the pre-packed weight ops (PackWeights)
from .packed import (  # noqa: E402
    conv2d_nhwc_packed_weight, conv2d_nhwc_winograd, conv2d_packed_weight, dense_packed_weight,
    depthwise_conv2d_packed_weight,
)
from . import opaque  # noqa: E402 - registers onnx_node (ONNX nodes kept for ONNX Runtime: fallback)
from .opaque import onnx_node  # noqa: E402
from . import dynamic  # noqa: E402 - registers tensor_to_shape and builtin (run-time shapes)
from .dynamic import builtin, tensor_to_shape  # noqa: E402
from . import control  # noqa: E402 - registers if_then_else / loop / scan (control flow, run by the executor)
