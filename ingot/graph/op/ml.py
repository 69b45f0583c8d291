"""Executor builtins of the ai.onnx.ml / text-feature operators whose work is table lookups.

Note: LabelEncoder (key → value maps, strings on either side) and TfIdfVectorizer (n-gram counting
over a pool of n-grams) are hash-table walks over each element: there is no loop nest for a kernel
to tile or vectorize, and their tables are model constants held in the call's parameters. They run
as ``builtin`` calls (`ingot.graph.op.dynamic.builtin`), numpy functions of the executor, like the
string builtins (`ingot.graph.op.string`). The numeric ai.onnx.ml ops that *are* loop nests
(Binarizer, ArrayFeatureExtractor, TreeEnsemble) are not here: the importer composes them from graph
ops that compile to C (`ingot.frontend.onnx.ops_ml`).

Example:
    >>> enc = ML_BUILTINS["label_encoder"]
    >>> enc([np.array(["a", "z"], dtype=object)], {"keys": ("a",), "values": (7,), "default": -1,
    ...                                            "dtype": "int64"}).tolist()
    [7, -1]
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ingot.ir.error import IRError

from .string import as_string_array

__all__ = ["ML_BUILTINS", "tfidf_vectorize"]


def _label_encoder(args: list, p: dict) -> np.ndarray:
    x = args[0]
    keys, values, dtype = list(p["keys"]), list(p["values"]), p["dtype"]
    if dtype == "string":
        out = np.empty(x.shape, dtype=object)
        table: "list | np.ndarray" = values
    else:
        out = np.empty(x.shape, dtype=dtype)
        table = np.array(values, dtype=dtype)
    flat = out.reshape(-1)
    if x.dtype.kind in "OUS":
        # strings: one dict lookup per element (the first of duplicate keys wins, as in ONNX Runtime)
        index = {}
        for k, key in enumerate(keys):
            index.setdefault(key, k)
        hits = [index.get(s, -1) for s in as_string_array(x, "LabelEncoder").reshape(-1)]
        pos = np.array(hits, dtype="int64")
    else:
        # numbers: a binary search in the sorted keys (numpy sorts NaN last, and searchsorted finds it
        # there); a NaN key matches a NaN input from ai.onnx.ml opset 4 on (bit-wise key comparison)
        karr = np.array(keys, dtype=x.dtype)
        xs = x.reshape(-1)
        if not len(keys):
            pos = np.full(xs.shape, -1)
        else:
            order = np.argsort(karr, kind="stable")
            sorted_keys = karr[order]
            at = np.minimum(np.searchsorted(sorted_keys, xs), len(keys) - 1)
            found = sorted_keys[at] == xs
            if x.dtype.kind == "f" and p.get("nan_matches", 1):
                found |= np.isnan(sorted_keys[at]) & np.isnan(xs)
            pos = np.where(found, order[at], -1)
    for k, hit in enumerate(pos.tolist()):
        flat[k] = table[hit] if hit >= 0 else p["default"]
    return out


def tfidf_vectorize(x: np.ndarray, p: dict) -> np.ndarray:
    """ONNX TfIdfVectorizer on a [C] or [N, C] tensor of ints or strings; ``p`` holds its attributes
    (``pool`` the n-gram pool as a flat tuple).

    The n-grams of the pool get ids in pool order (all 1-grams, then 2-grams, ...: ``ngram_counts``
    gives where each size starts); n-gram ``k`` counts into output column ``ngram_indexes[k]``. Only
    sizes in ``[min_gram_length, max_gram_length]`` are looked for; an n-gram of size >= 2 is its
    items ``skip + 1`` apart for every ``skip <= max_skip_count`` (unigrams are counted once).

    Example:
        >>> p = {"pool": (2, 3, 5, 4, 5, 6), "ngram_counts": (0, 4), "ngram_indexes": (0, 1, 2, 3, 4),
        ...      "min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 0, "mode": "TF", "weights": ()}
        >>> tfidf_vectorize(np.array([2, 3, 5, 4, 5, 6]), p).tolist()
        [1.0, 1.0, 2.0, 1.0, 1.0]
    """
    pool, counts, indexes = list(p["pool"]), list(p["ngram_counts"]), list(p["ngram_indexes"])
    lo, hi, max_skip = int(p["min_gram_length"]), int(p["max_gram_length"]), int(p["max_skip_count"])
    width = max(indexes) + 1 if indexes else 0
    # Step 1. the n-gram table: tuple of items -> output column (the first of duplicates wins)
    table: dict = {}
    ngram_id = 0
    for size, start in enumerate(counts, start=1):
        end = counts[size] if size < len(counts) else len(pool)
        for k in range(start, end - size + 1, size):
            if lo <= size <= hi:
                table.setdefault(tuple(pool[k:k + size]), indexes[ngram_id])
            ngram_id += 1
    # Step 2. count every n-gram of every row
    rows = x.reshape(1, -1) if x.ndim == 1 else x.reshape(x.shape[0], -1)
    strings = rows.dtype.kind in "OUS"
    freq = np.zeros((rows.shape[0], width), dtype="float64")
    for r, row in enumerate(rows):
        items = [str(v) for v in row] if strings else [int(v) for v in row]
        for size in range(lo, hi + 1):
            for skip in range(max_skip + 1 if size > 1 else 1):
                step = skip + 1
                for s in range(len(items) - (size - 1) * step):
                    col = table.get(tuple(items[s:s + (size - 1) * step + 1:step]))
                    if col is not None:
                        freq[r, col] += 1
    # Step 3. weighting
    weights = np.array(p.get("weights", ()), dtype="float64")
    mode = p["mode"]
    if mode == "IDF":
        freq = np.where(freq > 0, weights[:width] if weights.size else 1.0, 0.0)
    elif mode == "TFIDF" and weights.size:
        freq = freq * weights[:width]
    elif mode not in ("TF", "TFIDF"):
        raise IRError(f"TfIdfVectorizer: mode {mode!r} is not one of TF, IDF, TFIDF")
    out = freq.astype("float32")
    return out.reshape(width) if x.ndim == 1 else out


def _tfidf(args: list, p: dict) -> np.ndarray:
    return tfidf_vectorize(args[0], p)


#: kind → ``fn(numpy args, params dict) -> array`` (see `ingot.graph.runtime_shape`).
ML_BUILTINS: "dict[str, Callable[[list, dict], Any]]" = {"label_encoder": _label_encoder, "tfidf": _tfidf}
