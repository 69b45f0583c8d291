"""Module metadata (``ingot_module_metadata``): schema version 1 and its validation.

Example::

    >>> validate_metadata({"functions": {}})["version"]
    1
"""

from __future__ import annotations

from . import abi

__all__ = ["validate_metadata"]


def validate_metadata(metadata: dict) -> dict:
    """Check a module metadata dict against schema version 1; return it with defaults filled.

    Schema::

        {"version": 1, "target": "llvm -mcpu=...", "source_included": bool,
         "functions": {"main": {"symbol": "ingot_main",
                                "params": [{"name": "A", "kind": "tensor", "dtype": "float32",
                                            "shape": [128, "n"]},
                                           {"name": "n", "kind": "scalar", "dtype": "int32"}]}}}

    A tensor ``shape`` entry is an int (static), a str (a symbolic dim; equal names must be
    equal) or ``None`` (any). A param may carry ``"output": true`` (written in place).

    Example::

        >>> md = validate_metadata({"functions": {"f": {"symbol": "f", "params": []}}})
        >>> md["version"], md["target"]
        (1, '')
    """
    if not isinstance(metadata, dict):
        raise TypeError(f"module metadata must be a dict, got {type(metadata).__name__}")
    md = dict(metadata)
    md.setdefault("version", abi.METADATA_VERSION)
    md.setdefault("target", "")
    md.setdefault("functions", {})
    if md["version"] != abi.METADATA_VERSION:
        raise ValueError(
            f"module metadata has version {md['version']!r}; this Ingot reads version "
            f"{abi.METADATA_VERSION}"
        )
    funcs = md["functions"]
    if not isinstance(funcs, dict):
        raise TypeError("module metadata 'functions' must map function names to descriptions")
    for fname, fdesc in funcs.items():
        where = f"module metadata: function {fname!r}"
        if not isinstance(fdesc, dict) or not isinstance(fdesc.get("symbol"), str):
            raise ValueError(f"{where} needs a 'symbol' (the exported C name)")
        params = fdesc.get("params")
        if not isinstance(params, list):
            raise ValueError(f"{where} needs a 'params' list")
        for i, p in enumerate(params):
            pwhere = f"{where} param #{i}"
            if not isinstance(p, dict) or not isinstance(p.get("name"), str):
                raise ValueError(f"{pwhere} needs a 'name'")
            kind = p.get("kind")
            if kind not in ("tensor", "scalar", "handle"):
                raise ValueError(
                    f"{pwhere} ({p['name']!r}) has kind {kind!r}; expected 'tensor', 'scalar' or 'handle'"
                )
            if kind != "handle" and not isinstance(p.get("dtype"), str):
                raise ValueError(f"{pwhere} ({p['name']!r}) needs a 'dtype' string")
            if kind == "tensor":
                shape = p.get("shape")
                if not isinstance(shape, list) or not all(
                    d is None or isinstance(d, str) or (isinstance(d, int) and not isinstance(d, bool))
                    for d in shape
                ):
                    raise ValueError(
                        f"{pwhere} ({p['name']!r}) needs a 'shape' list of ints, names or null"
                    )
    return md
