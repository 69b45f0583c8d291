"""String tensors: their run-time form and the executor builtins that compute on them.

Note: no kernel computes with strings. A tensor of dtype ``"string"`` (`ingot.ir.DataType`) is a
value the graph executor holds, as a numpy *object* array of Python ``str`` (the form ONNX Runtime and
``onnx.reference`` use), and every op that reads or writes one is a ``builtin`` call
(`ingot.graph.op.dynamic.builtin`, run step by step by the executor like the run-time-shape ops).
The builtins below are those numpy functions; `STRING_BUILTINS` maps their kinds and
`ingot.graph.runtime_shape.BUILTINS` includes them. A string constant is a ``string_const``
builtin with no inputs whose values are its parameters: string data never enters the weights blob,
which holds fixed-size elements only. An op that only moves data (reshape, transpose, take, concat,
where...) on a string tensor is a ``graph_op`` builtin: the op's own numpy reference, run on the object
arrays.

`as_string_array` is the one conversion of a caller's value (numpy ``str``/``bytes``/object arrays,
lists) into the run-time form; the executor and ``ingot.run`` validate string inputs with it.

Example:
    >>> x = as_string_array(["ab", "c"], "x")
    >>> x.dtype, STRING_BUILTINS["string_concat"]([x, as_string_array(["!"], "y")], {}).tolist()
    (dtype('O'), ['ab!', 'c!'])
"""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from ingot.ir.error import IRError

__all__ = ["as_string_array", "is_string_array", "STRING_BUILTINS"]


def is_string_array(value: Any) -> bool:
    """Whether ``value`` is a numpy array that can hold a string tensor (``str``, ``bytes`` or object).

    Example:
        >>> is_string_array(np.array(["a"])), is_string_array(np.zeros(2))
        (True, False)
    """
    return isinstance(value, np.ndarray) and value.dtype.kind in "OUS"


def as_string_array(value: Any, what: str) -> np.ndarray:
    """``value`` as the run-time form of a string tensor: a numpy object array of ``str`` (bytes are
    decoded as UTF-8). ``what`` names the value in the error raised for non-string elements.

    Example:
        >>> as_string_array(np.array([b"caf\\xc3\\xa9"], dtype=object), "x").tolist()
        ['café']
        >>> as_string_array(np.zeros(2), "x")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        IRError: x: a string tensor needs str elements, got float64 ...
    """
    arr = value.numpy() if hasattr(value, "numpy") and not isinstance(value, np.ndarray) else np.asarray(value)
    if arr.dtype.kind == "U":
        return arr.astype(object)
    if arr.dtype.kind == "S":
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(arr) if arr.size else arr.astype(object)
    if arr.dtype.kind == "O":
        flat = arr.reshape(-1)
        if all(isinstance(s, str) for s in flat):
            return arr
        if all(isinstance(s, (str, bytes)) for s in flat):
            return np.array([s.decode("utf-8") if isinstance(s, bytes) else s for s in flat],
                            dtype=object).reshape(arr.shape)
        bad = next(s for s in flat if not isinstance(s, (str, bytes)))
        raise IRError(f"{what}: a string tensor needs str elements, got {type(bad).__name__} {bad!r}; pass a numpy "
                      f"array of str (np.array([...], dtype=object))")
    raise IRError(f"{what}: a string tensor needs str elements, got {arr.dtype} data; pass a numpy array of str "
                  f"(np.array([...], dtype=object))")


def _new(shape: Any) -> np.ndarray:
    return np.empty(shape, dtype=object)


def _string_const(args: list, p: dict) -> np.ndarray:
    out = _new(len(p["values"]))
    out[:] = list(p["values"])
    return out.reshape(tuple(p["shape"]))


def _concat(args: list, p: dict) -> np.ndarray:
    a, b = np.broadcast_arrays(*(as_string_array(x, "StringConcat") for x in args))
    out = _new(a.shape)
    out.reshape(-1)[:] = [x + y for x, y in zip(a.reshape(-1), b.reshape(-1))]
    return out


def _equal(args: list, p: dict) -> np.ndarray:
    a, b = np.broadcast_arrays(*(as_string_array(x, "Equal") for x in args))
    return np.array([x == y for x, y in zip(a.reshape(-1), b.reshape(-1))], dtype=bool).reshape(a.shape)


def _regex_full_match(args: list, p: dict) -> np.ndarray:
    # ONNX names RE2 syntax; Python's re agrees on the RE2 subset (RE2 has no backreferences/lookaround,
    # which the importer rejects), so a pattern ONNX accepts means the same here.
    pattern = re.compile(p["pattern"])
    x = as_string_array(args[0], "RegexFullMatch")
    return np.array([pattern.fullmatch(s) is not None for s in x.reshape(-1)], dtype=bool).reshape(x.shape)


def _split(args: list, p: dict) -> "tuple[np.ndarray, np.ndarray]":
    x = as_string_array(args[0], "StringSplit")
    delimiter = p.get("delimiter") or None  # "" or absent: split on runs of whitespace (str.split(None))
    maxsplit = p.get("maxsplit")
    parts = [s.split(delimiter, -1 if maxsplit is None else maxsplit) for s in x.reshape(-1)]
    if delimiter is None:  # str.split(None) drops leading/trailing whitespace runs already; "" gives []
        parts = [[w for w in ws if w] for ws in parts]
    counts = np.array([len(ws) for ws in parts], dtype="int64").reshape(x.shape)
    width = max((len(ws) for ws in parts), default=0)
    out = _new((len(parts), width))
    out[:] = ""
    for i, ws in enumerate(parts):
        out[i, :len(ws)] = ws
    return out.reshape(*x.shape, width), counts


def _normalizer(args: list, p: dict) -> np.ndarray:
    x = as_string_array(args[0], "StringNormalizer")
    if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
        raise IRError(f"StringNormalizer: the input must have shape [C] or [1, C], got {list(x.shape)}")
    change: Callable[[str], str] = {"LOWER": str.lower, "UPPER": str.upper,
                                    "NONE": lambda s: s}[p.get("case_change_action", "NONE")]
    # Stopwords are whole elements. is_case_sensitive=0 compares after the case change (stopwords changed
    # alike), as the ONNX reference does: with case_change_action NONE that is an exact comparison.
    key: Callable[[str], str] = (lambda s: s) if p.get("is_case_sensitive", 0) else change
    stops = {key(w) for w in p.get("stopwords", ())}
    words = [change(s) for s in x.reshape(-1) if key(s) not in stops]
    if not words:  # ONNX: an empty result is one empty string
        words = [""]
    out = _new(len(words))
    out[:] = words
    return out.reshape(1, -1) if x.ndim == 2 else out


def _graph_op(args: list, p: dict) -> Any:
    """A graph op that moves string data (reshape, take, concat, ...): its numpy reference, which numpy
    runs on object arrays as on numbers (``params``: the op's name and its normalized attributes)."""
    from ..op_registry import get_op_def
    from .dynamic import _tuples

    attrs = {k: _tuples(v) for k, v in dict(_tuples(p["attrs"])).items()}  # JSON turned tuples into lists
    return get_op_def(p["op"]).numpy([as_string_array(a, p["op"]) if is_string_array(a) else a for a in args],
                                     attrs)


#: kind → ``fn(numpy args, params dict) -> array | tuple of arrays`` (see `ingot.graph.runtime_shape`).
STRING_BUILTINS: "dict[str, Callable[[list, dict], Any]]" = {
    "string_const": _string_const, "string_concat": _concat, "string_equal": _equal,
    "regex_full_match": _regex_full_match, "string_split": _split, "string_normalizer": _normalizer,
    "graph_op": _graph_op,
}
