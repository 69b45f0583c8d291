"""Initializers as views of the serialized model: no copy of the weights at import.

Note: ``numpy_helper.to_array`` of a parsed initializer copies its ``raw_data`` out of the protobuf
into fresh memory (GPT-2: 650 MB, ~0.5 s of page faults and copying). `ingot.workflow.load` holds the
file's bytes anyway (it hashed them for the cache key), so the importer can view each initializer's
``raw_data`` in those bytes instead: `raw_data_spans` walks the protobuf wire format down to
``ModelProto.graph`` (field 7) → ``GraphProto.initializer`` (field 5) → ``TensorProto.raw_data``
(field 9) / ``name`` (field 8), skipping everything else by its length, so it visits a few thousand
tags, never the weights' bytes. Anything unusual (a repeated graph or raw_data field, which protobuf
merges; a malformed tag) gives up and the importer copies as before; `initializer_view` also
checks the name, the size the dims and dtype need, and that the host is little-endian.

Example:
    >>> import onnx, numpy as np
    >>> from onnx import helper, numpy_helper, TensorProto
    >>> w = numpy_helper.from_array(np.arange(6, dtype="float32").reshape(2, 3), "W")
    >>> g = helper.make_graph([], "g", [], [helper.make_tensor_value_info("W", TensorProto.FLOAT, [2, 3])], [w])
    >>> data = helper.make_model(g).SerializeToString()
    >>> spans = raw_data_spans(data)
    >>> initializer_view(onnx.load_from_string(data).graph.initializer[0], spans[0], data)
    array([[0., 1., 2.],
           [3., 4., 5.]], dtype=float32)
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

_GRAPH, _INITIALIZER, _NAME, _RAW_DATA = 7, 5, 8, 9  # field numbers of ModelProto, GraphProto, TensorProto
# ONNX element types whose raw_data is exactly numpy's little-endian layout.
_PLAIN = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
          10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


def _varint(data: bytes, pos: int) -> "tuple[int, int]":
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(data: bytes, start: int, end: int):
    """(field number, wire type, value start, value end) of each field of the message in data[start:end]."""
    pos = start
    while pos < end:
        tag, pos = _varint(data, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _, after = _varint(data, pos)
        elif wire == 1:
            after = pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            after = pos + length
        elif wire == 5:
            after = pos + 4
        else:  # groups (3, 4) are not used by ONNX
            raise ValueError(f"wire type {wire}")
        if after > end:
            raise ValueError("field runs past its message")
        yield field, wire, pos, after
        pos = after


def raw_data_spans(data: bytes) -> "list[tuple[bytes, int, int] | None] | None":
    """For each initializer of the serialized ModelProto ``data``, in order: ``(name, start, end)``
    of its ``raw_data`` in ``data`` (None when it has none); None when the walk gives up.

    Example: see the module docstring.
    """
    try:
        graphs = [(s, e) for f, w, s, e in _fields(data, 0, len(data)) if f == _GRAPH and w == 2]
        if len(graphs) != 1:  # absent, or several parts that protobuf merges
            return None
        spans: list = []
        for f, w, s, e in _fields(data, *graphs[0]):
            if f != _INITIALIZER or w != 2:
                continue
            names = [(ts, te) for tf, tw, ts, te in _fields(data, s, e) if tf == _NAME and tw == 2]
            raws = [(ts, te) for tf, tw, ts, te in _fields(data, s, e) if tf == _RAW_DATA and tw == 2]
            if len(names) > 1 or len(raws) > 1:
                return None
            name = bytes(data[names[0][0]:names[0][1]]) if names else b""
            spans.append((name, *raws[0]) if raws else None)
        return spans
    except (ValueError, IndexError):
        return None


def initializer_view(init: Any, span: "tuple[bytes, int, int] | None", data: bytes) -> "np.ndarray | None":
    """Initializer ``init`` as a read-only view of ``data`` at ``span`` (`raw_data_spans`), or None
    when it cannot be one (no raw_data, another name, an element type whose bytes differ from
    numpy's, a size that does not match its dims, a big-endian host): the caller copies it then.

    Example: see the module docstring.
    """
    if span is None or sys.byteorder != "little" or init.data_location != 0:
        return None
    name, start, end = span
    dtype = _PLAIN.get(init.data_type)
    if dtype is None or name != init.name.encode("utf-8"):
        return None
    shape = tuple(int(d) for d in init.dims)
    itemsize = np.dtype(dtype).itemsize
    if end - start != int(np.prod(shape, dtype=np.int64)) * itemsize:
        return None
    # The view may be unaligned for its dtype: numpy computes on it correctly, and kernels never read it
    # (the constant table copies each constant to a 64-byte aligned offset of the weights blob).
    return np.frombuffer(data, dtype=dtype, count=(end - start) // itemsize, offset=start).reshape(shape)
