"""`ingot.ops`: the operator inventory — TE compute definitions (TVM's topi), one file per family.

Each function takes `ingot.te` tensors (and Python/PrimExpr attributes) and returns the output
tensor; `ingot.graph`'s op registry legalizes graph operators to these.

Example:
    >>> from ingot import te, ops
    >>> x = te.placeholder((4, 8), name="x")
    >>> w = te.placeholder((16, 8), name="w")
    >>> y = ops.nn.dense(x, w)
    >>> [int(d) for d in y.shape]
    [4, 16]
"""
from . import broadcast, elemwise, image, linalg, nn, reduce, transform  # noqa: F401
from .broadcast import add, divide, maximum, minimum, multiply, power, subtract, where  # noqa: F401
from .elemwise import cast, clip, exp, gelu, relu, sigmoid, sqrt, tanh  # noqa: F401
from .linalg import batch_matmul, matmul  # noqa: F401
from .reduce import max as max_reduce, mean, min as min_reduce, prod, sum  # noqa: F401,A001
from .transform import concatenate, expand_dims, flatten, reshape, squeeze, transpose  # noqa: F401
