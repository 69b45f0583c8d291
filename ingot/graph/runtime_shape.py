"""Run-time shapes: symbolic dimensions whose values are bound while a plan runs.

Note (the idea, after TVM Relax's ``R.tensor_to_shape`` + ``match_cast`` and its VM builtins):
a size that only the data knows (a Reshape target computed from a tensor, the number of nonzeros)
is a *fresh symbolic variable* in the graph IR. Two graph operators introduce them:

* ``tensor_to_shape(t, dims=("rt0", "rt1"))``: the values of a 1-D integer tensor become the
  symbolic dims ``rt0, rt1`` (its struct info is ``R.Shape([rt0, rt1])``); every later op may use
  them in its shape attributes (``reshape(x, shape=(rt0, rt1))``), and its kernel is compiled once,
  with ``rt0, rt1`` as scalar parameters (``tir_vars``);
* ``builtin(*args, kind=..., outputs=...)``: a data-dependent op (``nonzero``, ``unique``,
  ``compress``, ``non_max_suppression``, ``topk`` with a run-time k, ``slice`` with run-time
  bounds, ReduceX / Squeeze / Unsqueeze with run-time axes, ...) whose output dims may be fresh symbolic variables.

Both run as *builtins of the executor* (numpy functions in `BUILTINS`), not as generated kernels:
their cost is dominated by reading the data once to find the output size (a NonZero kernel would
need a counting pass, a worst-case buffer and a compaction anyway), and a builtin returns an array
of exactly the right size, so nothing downstream pays for a worst-case allocation. The plan step
(``{"op": "builtin", ...}``) binds every fresh dim of its outputs from their actual shapes (or, for
``tensor_to_shape``, from the tensor's values) into the run's shape environment; kernels that
follow read them as scalars and their outputs are allocated at run time.

Fresh dims are named (``rt<k>``; the importer keeps them unique within a function) and one
`ingot.ir.Var` object stands for each name (`shape_var`), so the struct info an operator infers is
the same whenever the call is rebuilt by a pass or parsed back from text.

Example:
    >>> run_builtin("nonzero", [np.array([0, 3, 0, 5])], {}).tolist()
    [[1, 3]]
    >>> shape_var("rt0") is shape_var("rt0")
    True
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ingot.ir import Var as PrimVar
from ingot.ir.error import IRError

from .op.ml import ML_BUILTINS
from .op.sort import _np_topk
from .runtime_ops import EXTRA_BUILTINS
from .op.string import STRING_BUILTINS

_VARS: dict = {}


def shape_var(name: str) -> PrimVar:
    """The symbolic dimension named ``name`` (one int64 `ingot.ir.Var` object per name).

    Example:
        >>> str(shape_var("rt3"))
        'rt3'
    """
    var = _VARS.get(name)
    if var is None:
        var = _VARS[name] = PrimVar(name, "int64")
    return var


def is_shape_var(dim: Any) -> bool:
    """Whether ``dim`` is a symbolic dimension made by `shape_var`.

    Example:
        >>> is_shape_var(shape_var("rt1")), is_shape_var(4)
        (True, False)
    """
    return isinstance(dim, PrimVar) and _VARS.get(dim.name) is dim


# -- the builtins ----------------------------------------------------------------------------------


def _nonzero(args: list, p: dict) -> Any:
    return np.array(np.nonzero(args[0]), dtype="int64").reshape(args[0].ndim, -1)


def _unique(args: list, p: dict) -> Any:
    x, axis, is_sorted = args[0], p.get("axis"), p.get("sorted", 1)
    flat = x.reshape(-1) if axis is None else x
    values, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True, return_counts=True,
                                               axis=axis)
    if not is_sorted:  # ONNX: in order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse.reshape(-1)]
    return (values, first.astype("int64"), inverse.reshape(-1).astype("int64"), counts.astype("int64"))


def _compress(args: list, p: dict) -> Any:
    x, cond = args
    return np.compress(cond.reshape(-1).astype(bool), x, axis=p.get("axis"))


def _topk(args: list, p: dict) -> Any:
    x, k = args[0], int(np.asarray(args[1]).reshape(-1)[0])
    axis, largest, is_sorted = p["axis"], p.get("largest", 1), p.get("sorted", 1)
    if k < 0 or k > x.shape[axis]:
        raise IRError(f"TopK: k = {k} is outside [0, {x.shape[axis]}] (axis {axis} of shape {x.shape})")
    del is_sorted  # a sorted result is also a valid unsorted one
    # the topk op's reference with this run's k (ties: the lower index first, ONNX's rule)
    return _np_topk([x], {"axis": axis, "largest": bool(largest), "k": k, "dtype": "int64", "ret_type": "both"})


def onnx_slice_bounds(dim: int, start: int, end: int, step: int) -> "tuple[int, int]":
    """ONNX Slice's ``start, end`` on an axis of ``dim`` after its clamping rules (they differ from
    Python's for negative steps: ``end`` -1 means "through index 0"); the importer uses it for static
    bounds, the ``slice`` builtin for run-time ones.

    Example:
        >>> onnx_slice_bounds(6, -2**63, -2**63, -1), onnx_slice_bounds(6, 1, 2**63 - 1, 2)
        ((0, -1), (1, 6))
    """
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return max(0, min(start, dim)), max(0, min(end, dim))
    return max(0, min(start, dim - 1)), max(-1, min(end, dim - 1))


def _slice(args: list, p: dict) -> Any:
    x = args[0]
    starts, ends = (np.asarray(a).reshape(-1).tolist() for a in args[1:3])
    axes = np.asarray(args[3]).reshape(-1).tolist() if len(args) > 3 and args[3] is not None else list(
        range(len(starts)))
    steps = np.asarray(args[4]).reshape(-1).tolist() if len(args) > 4 else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = a + x.ndim if a < 0 else a
        if st == 0:
            raise IRError(f"Slice: step 0 on axis {a}")
        b, f = onnx_slice_bounds(x.shape[a], int(s), int(e), int(st))
        index[a] = slice(b, None if f < 0 else f, st)
    return np.array(x[tuple(index)])


def _tile(args: list, p: dict) -> Any:
    return np.tile(args[0], np.asarray(args[1]).reshape(-1).astype("int64").tolist())


def _range(args: list, p: dict) -> Any:
    start, limit, delta = (np.asarray(a).reshape(()) for a in args)
    n = max(int(np.ceil((limit - start) / delta)), 0)
    return (start + np.arange(n, dtype=start.dtype) * delta).astype(start.dtype)


def _expand_shape(args: list, p: dict) -> Any:
    """ONNX Expand's output shape: ``shape`` broadcast bidirectionally with ``x``'s run-time shape (a
    symbolic dim of ``x`` that is 1 at run time widens; the compiled broadcast reads it at
    ``select(n == 1, 0, i)``). Dims that do not broadcast (3 vs 5) are an error naming ``p["node"]``.

    Example:
        >>> _expand_shape([np.array([2, 5]), np.zeros(1)], {}).tolist()
        [2, 5]
    """
    x_shape, target = args[1].shape, tuple(np.asarray(args[0]).reshape(-1).tolist())
    try:
        return np.array(np.broadcast_shapes(x_shape, target), "int64")
    except ValueError:
        raise IRError(f"Expand {p.get('node', '')!r}: the input's run-time shape {x_shape} does not broadcast to "
                      f"the shape {target} (each dim must be 1 or equal, right-aligned); fix the input or the "
                      "shape tensor") from None


def _broadcast_check(args: list, p: dict) -> Any:
    """``args[0]`` unchanged once its symbolic dims broadcast against the constants they meet:
    ``p["dims"]`` is ``((axis, size), ...)``; each run-time dim must be 1 or ``size``. The compiled
    broadcast reads a 1 correctly (``select(n == 1, 0, i)``) but a 3 against 5 would read out of bounds,
    so the run stops here with the node's name.

    Example:
        >>> _broadcast_check([np.ones((1, 4))], {"dims": ((0, 5),), "node": "add0"}).shape
        (1, 4)
    """
    x = args[0]
    for axis, size in p.get("dims", ()):
        if x.shape[axis] not in (1, size):
            raise IRError(f"{p.get('op', 'node')} {p.get('node', '')!r}: operand {p.get('operand', 0)} has size "
                          f"{x.shape[axis]} at axis {axis} at run time, which does not broadcast with {size} "
                          "(must be 1 or equal); fix the input shapes")
    return x


def _reshape_shape(args: list, p: dict) -> Any:
    """ONNX Reshape's target with 0 (copy the input's dim, unless ``allowzero``) and -1 (infer) resolved."""
    target = [int(d) for d in np.asarray(args[0]).reshape(-1)]
    src = args[1].shape
    if not p.get("allowzero", 0):
        target = [src[i] if d == 0 else d for i, d in enumerate(target)]
    if target.count(-1) > 1:
        raise IRError(f"Reshape: more than one -1 in the run-time target shape {target}")
    if -1 in target:
        known = int(np.prod([d for d in target if d != -1], dtype="int64"))
        total = int(np.prod(src, dtype="int64"))
        if known == 0 or total % known:
            raise IRError(f"Reshape: cannot reshape {src} into the run-time target {target}")
        target[target.index(-1)] = total // known
    if int(np.prod(target, dtype="int64")) != int(np.prod(src, dtype="int64")):
        raise IRError(f"Reshape: cannot reshape {src} ({int(np.prod(src))} elements) into the run-time target "
                      f"{target}")
    return np.array(target, "int64")


def _non_max_suppression(args: list, p: dict) -> Any:
    boxes, scores = args[0], args[1]
    max_out = int(np.asarray(args[2]).reshape(-1)[0]) if len(args) > 2 and np.asarray(args[2]).size else 0
    iou_th = float(np.asarray(args[3]).reshape(-1)[0]) if len(args) > 3 and np.asarray(args[3]).size else 0.0
    score_th = float(np.asarray(args[4]).reshape(-1)[0]) if len(args) > 4 and np.asarray(args[4]).size else None
    center = p.get("center_point_box", 0)
    selected = []
    for b in range(scores.shape[0]):
        bx = boxes[b].astype("float64")
        if center:
            xc, yc, w, h = bx[:, 0], bx[:, 1], bx[:, 2], bx[:, 3]
            y1, x1, y2, x2 = yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
        else:
            y1, x1 = np.minimum(bx[:, 0], bx[:, 2]), np.minimum(bx[:, 1], bx[:, 3])
            y2, x2 = np.maximum(bx[:, 0], bx[:, 2]), np.maximum(bx[:, 1], bx[:, 3])
        area = (y2 - y1) * (x2 - x1)
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = np.argsort(-s, kind="stable")
            if score_th is not None:
                order = order[s[order] > score_th]
            keep: list = []
            for i in order:
                if len(keep) >= max_out:
                    break
                ok = True
                for j in keep:
                    iw = max(0.0, min(x2[i], x2[j]) - max(x1[i], x1[j]))
                    ih = max(0.0, min(y2[i], y2[j]) - max(y1[i], y1[j]))
                    inter = iw * ih
                    union = area[i] + area[j] - inter
                    if union > 0 and inter / union > iou_th:
                        ok = False
                        break
                if ok:
                    keep.append(i)
            selected += [[b, c, i] for i in keep]
    return np.array(selected, "int64").reshape(-1, 3)


def _pad(args: list, p: dict) -> Any:
    x, pads = args[0], np.asarray(args[1]).reshape(-1).astype("int64")
    value = np.asarray(args[2]).reshape(-1)[0] if len(args) > 2 and np.asarray(args[2]).size else 0
    axes = np.asarray(args[3]).reshape(-1).astype("int64").tolist() if len(args) > 3 else list(range(x.ndim))
    axes = [a + x.ndim if a < 0 else a for a in axes]
    width = [(0, 0)] * x.ndim
    for k, a in enumerate(axes):
        width[a] = (int(pads[k]), int(pads[k + len(axes)]))
    # Negative pads crop: pad the positive part, then slice.
    grown = [(max(lo, 0), max(hi, 0)) for lo, hi in width]
    mode = p.get("mode", "constant")
    kw = {"constant_values": value} if mode == "constant" else {}
    out = np.pad(x, grown, mode={"constant": "constant", "reflect": "reflect", "edge": "edge",
                                 "wrap": "wrap"}[mode], **kw)
    crop = tuple(slice(-min(lo, 0), out.shape[i] + min(hi, 0)) for i, (lo, hi) in enumerate(width))
    return np.array(out[crop], dtype=x.dtype)


def _reduce(args: list, p: dict) -> Any:
    """ONNX ReduceX with run-time ``axes`` (``kind``: sum, mean, max, min, prod, sum_square, l1, l2,
    log_sum, log_sum_exp)."""
    x = args[0]
    axes = [int(a) for a in np.asarray(args[1]).reshape(-1)] if len(args) > 1 else []
    keep = bool(p.get("keepdims", 1))
    if not axes:
        if p.get("noop_with_empty_axes", 0):
            return x
        axes = list(range(x.ndim))
    axes = tuple(sorted(a + x.ndim if a < 0 else a for a in axes))
    kind = p["kind"]
    with np.errstate(all="ignore"):
        if kind == "log_sum_exp":
            m = np.max(x, axis=axes, keepdims=True) if x.size else np.zeros([1] * x.ndim, x.dtype)
            m = np.where(np.isfinite(m), m, 0)
            out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
            out = out if keep else np.squeeze(out, axes)
        else:
            src = {"sum_square": lambda: x * x, "l1": lambda: np.abs(x), "l2": lambda: x * x}.get(kind, lambda: x)()
            fn = {"mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}.get(kind, np.sum)
            if kind in ("max", "min") and 0 in [x.shape[a] for a in axes]:
                dt = x.dtype
                ext = (-np.inf if kind == "max" else np.inf) if dt.kind == "f" else (
                    np.iinfo(dt).min if kind == "max" else np.iinfo(dt).max) if dt.kind in "iu" else kind == "min"
                shape = [1 if a in axes else d for a, d in enumerate(x.shape) if keep or a not in axes]
                return np.full(shape, ext, dt)
            out = fn(src, axis=axes, keepdims=keep)
            out = np.sqrt(out) if kind == "l2" else np.log(out) if kind == "log_sum" else out
    return np.asarray(out).astype(x.dtype)


def _squeeze(args: list, p: dict) -> Any:
    axes = tuple(int(a) for a in np.asarray(args[1]).reshape(-1)) if len(args) > 1 else None
    return np.squeeze(args[0], axes)


def _unsqueeze(args: list, p: dict) -> Any:
    x, axes = args[0], [int(a) for a in np.asarray(args[1]).reshape(-1)]
    out_ndim = x.ndim + len(axes)
    return np.expand_dims(x, tuple(sorted(a + out_ndim if a < 0 else a for a in axes)))


def _tensor_to_shape(args: list, p: dict) -> Any:
    return tuple(int(d) for d in np.asarray(args[0]).reshape(-1))


#: kind → ``fn(numpy args, params dict) -> array | tuple of arrays`` (``tensor_to_shape``: a tuple of ints).
BUILTINS: "dict[str, Callable[[list, dict], Any]]" = {
    "nonzero": _nonzero, "unique": _unique, "compress": _compress, "topk": _topk, "slice": _slice,
    "tile": _tile, "range": _range, "expand_shape": _expand_shape, "broadcast_check": _broadcast_check,
    "reshape_shape": _reshape_shape,
    "non_max_suppression": _non_max_suppression, "pad": _pad, "tensor_to_shape": _tensor_to_shape,
    "reduce": _reduce, "squeeze": _squeeze, "unsqueeze": _unsqueeze,
    **STRING_BUILTINS, **ML_BUILTINS,  # string tensors and the table-lookup ai.onnx.ml ops
    **EXTRA_BUILTINS,  # ops whose attributes arrive at run time (`ingot.graph.runtime_ops`)
}


def run_builtin(kind: str, args: Sequence[Any], params: Any) -> Any:
    """Run builtin ``kind`` on numpy ``args`` with ``params`` (a dict or ``((key, value), ...)``).

    Example:
        >>> run_builtin("reshape_shape", [np.array([0, -1]), np.zeros((2, 3, 4))], {}).tolist()
        [2, 12]
    """
    fn = BUILTINS.get(kind)
    if fn is None:
        raise IRError(f"unknown run-time builtin {kind!r}; the builtins are {sorted(BUILTINS)}")
    return fn([np.asarray(a) if a is not None else None for a in args], dict(params))


def bind_dims(dims: Sequence[Any], actual: Sequence[int], env: dict, what: str) -> None:
    """Bind the fresh symbolic dims among ``dims`` (plan JSON: ints, ``{"var": name}``, expressions)
    to the ``actual`` sizes in the run's shape environment ``env``; a dim already bound (or an int)
    must agree.

    Example:
        >>> env = {}
        >>> bind_dims([{"var": "rt0"}, 3], (5, 3), env, "nonzero")
        >>> env
        {'rt0': 5}
    """
    from .plan import eval_dim_json

    if len(dims) != len(actual):
        raise IRError(f"{what}: produced rank {len(actual)} (shape {tuple(actual)}), the graph expects rank "
                      f"{len(dims)}")
    for axis, (dim, size) in enumerate(zip(dims, actual)):
        if isinstance(dim, dict) and "var" in dim and dim["var"] not in env:
            env[dim["var"]] = int(size)
            continue
        expected = eval_dim_json(dim, env)
        if expected != size:
            raise IRError(f"{what}: axis {axis} has size {size} at run time, but the graph says {expected}")


def run_builtin_step(step: dict, plan: dict, resolve: Callable, values: list, env: dict) -> None:
    """Execute one ``{"op": "builtin"}`` plan step: run the numpy builtin, bind fresh dims, store outputs.

    Example:
        >>> step = {"op": "builtin", "func": "nonzero", "params": [], "args": [["input", 0]], "outs": [0]}
        >>> plan = {"values": [{"shape": [1, {"var": "rt0"}], "dtype": "int64"}]}
        >>> env, values = {}, [None]
        >>> run_builtin_step(step, plan, lambda r: np.array([0, 2, 2]), values, env)
        >>> env, values[0].tolist()
        ({'rt0': 2}, [[1, 2]])
    """
    args = [None if a[0] == "none" else resolve(a) for a in step["args"]]
    result = run_builtin(step["func"], args, step.get("params", ()))
    what = f"builtin {step['func']}"
    if "binds" in step:  # tensor_to_shape: the values are the dims
        bind_dims([{"var": n} for n in step["binds"]], result, env, what)
        return
    outs = result if isinstance(result, tuple) else (result,)
    for v, out in zip(step["outs"], outs):
        desc = plan["values"][v]
        # a string tensor is an object array of str (ingot.graph.op.string)
        # (np.require, not ascontiguousarray: that makes a 0-d result 1-d)
        out = np.require(np.asarray(out, dtype=object if desc["dtype"] == "string" else desc["dtype"]),
                         requirements="C")
        bind_dims(desc["shape"], out.shape, env, what)
        values[v] = out


def compile_runtime_shape_call(compiler: Any, call: Any) -> Any:
    """The plan step of a ``tensor_to_shape`` or ``builtin`` call (used by `ingot.graph.plan`); returns
    the call's ref. ``tensor_to_shape`` produces no tensor: its step names the dims it binds
    (``"binds"``) and its ref is the shape of those dims.

    Example: see ``tests/graph/test_runtime_shape.py``.
    """
    args = [compiler.ref(a) for a in call.args]
    if call.op.name == "tensor_to_shape":
        names = list(call.attrs["dims"])
        compiler.steps.append({"op": "builtin", "func": "tensor_to_shape", "params": [], "args": args, "outs": [],
                               "binds": names})
        return ["shape", [{"var": n} for n in names]]
    kind = call.attrs["kind"]
    ids, result = compiler.new_values(call.struct_info, f"{compiler.name}: builtin {kind}")
    params = [[k, list(v) if isinstance(v, tuple) else v] for k, v in call.attrs["params"]]
    compiler.steps.append({"op": "builtin", "func": kind, "params": params, "args": args, "outs": ids})
    return result
