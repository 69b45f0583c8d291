"""The compiled-model artifact: shared library + weights blob + JSON manifest.

Note: ``ex.export_library("model.so")`` writes three files side by side:
  * ``model.so`` — the kernels and the AOT entries (a self-contained Ingot module: it also loads
    with ``ingot.runtime.load_module`` as a plain kernel library);
  * ``model.weights.bin`` — every constant at a 64-byte aligned offset (raw bytes, no pickle);
  * ``model.json`` — the manifest: format/version, the loader to call
    (``"loader": "ingot.graph.load_executable"``), file names, the weights' size and SHA-256,
    the target, the constants' layout, the execution plans (inputs, outputs, steps, memory plan),
    the names of the AOT entries and kernels in the library, and how each kernel was scheduled.
`load_executable` accepts the ``.so`` or the ``.json`` path. The runtime's loader finds the
graph loader without importing ``ingot.graph`` through the manifest's ``loader`` entry, or
through the packed function ``"ingot.graph.load"`` registered when ``ingot.graph`` is imported.

Example:
    >>> manifest_path("/tmp/model.so")
    '/tmp/model.json'
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ingot.support import write_atomic

FORMAT = "ingot.graph.executable"
VERSION = 1


def _stem(path: str) -> str:
    root, ext = os.path.splitext(path)
    return root if ext in (".so", ".json", ".dylib", ".dll") else path


def manifest_path(path: str) -> str:
    """The manifest next to library ``path`` (``model.so`` → ``model.json``).

    Example:
        >>> manifest_path("model.so")
        'model.json'
    """
    return _stem(path) + ".json"


def weights_path(path: str) -> str:
    """The weights file next to library ``path`` (``model.so`` → ``model.weights.bin``).

    Example:
        >>> weights_path("model.so")
        'model.weights.bin'
    """
    return _stem(path) + ".weights.bin"


def export_executable(ex: Any, path: str) -> str:
    """Write the library, weights and manifest of executable ``ex``; returns the library path.

    Example:
        >>> export_executable(ex, "/tmp/model.so")  # doctest: +SKIP
        '/tmp/model.so'
    """
    from ingot.ir.error import IRError

    given = os.fspath(path)
    path = os.path.abspath(given)
    stem, suffix = os.path.splitext(given)
    if suffix != ".so":
        # One suffix, because `ingot.runtime.load_module` loads exactly this layout back; TVM's .tar
        # (object files to link elsewhere) has no loader here, so it is refused, not mislabelled.
        raise IRError(f"export_library({given!r}): the supported suffix is .so (the library, with the manifest "
                      f"and weights written next to it as <stem>.json and <stem>.weights.bin, loaded back with "
                      f"ingot.runtime.load_module); {suffix or 'no suffix'} is not. Ingot does not write TVM's "
                      f".tar/.o archives: export to {stem}.so")
    # No library is fine when the plans run without kernels (executor builtins only: string models).
    if ex.lib is None and not ex.external and not ex.plans:
        raise IRError("export_library: the executable has no compiled library and no graph functions; nothing to "
                      "export")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if ex.lib is not None:
        ex.lib.export_library(path)
    used = max((c["offset"] + c["nbytes"] for c in ex.constants), default=0)
    blob = memoryview(np.ascontiguousarray(ex.weights).view(np.uint8).reshape(-1))[:used]  # no copy (GPT-2: 650 MB)
    wpath = weights_path(path)
    # Hash while writing: both release the GIL, so a big blob costs the longer of the two, not the sum.
    with ThreadPoolExecutor(1) as pool:
        sha256 = pool.submit(lambda: hashlib.sha256(blob).hexdigest())
        write_atomic(wpath, blob)
        weights_sha256 = sha256.result()
    manifest = {
        "format": FORMAT, "version": VERSION, "loader": "ingot.graph.load_executable",
        "library": os.path.basename(path) if ex.lib is not None else None, "weights": os.path.basename(wpath),
        "weights_bytes": len(blob), "weights_sha256": weights_sha256,
        "target": str(ex.target), "constants": ex.constants, "functions": ex.plans,
        "aot": ex.aot, "kernels": ex.kernels, "schedules": ex.schedule_report,
    }
    if ex.external:  # BYOC regions: each runtime module's bytes and the class that loads them
        manifest["external"] = {symbol: {"loader": m.loader, "data": base64.b64encode(m.save_to_bytes()).decode()}
                                for symbol, m in ex.external.items()}
    write_atomic(manifest_path(path), json.dumps(manifest, indent=1, sort_keys=True).encode())
    return path


def read_manifest(path: str) -> dict:
    """The manifest of the artifact at ``path`` (``.so`` or ``.json``), checked for format/version.

    Example:
        >>> read_manifest("/tmp/model.so")["format"]  # doctest: +SKIP
        'ingot.graph.executable'
    """
    from ingot.ir.error import IRError

    mpath = manifest_path(path) if not path.endswith(".json") else path
    if not os.path.isfile(mpath):
        raise IRError(f"no manifest {mpath!r} next to {path!r}; export the model with ex.export_library(path), "
                      f"which writes <stem>.so, <stem>.json and <stem>.weights.bin")
    with open(mpath, encoding="utf-8") as fh:
        manifest = json.load(fh)
    if manifest.get("format") != FORMAT:
        raise IRError(f"{mpath!r} is not an Ingot graph manifest (format {manifest.get('format')!r})")
    if manifest.get("version") != VERSION:
        raise IRError(f"{mpath!r} has manifest version {manifest.get('version')!r}; this Ingot reads version "
                      f"{VERSION} (re-export the model with this version)")
    return manifest


def load_executable(path: str, *, map_weights: bool = False) -> Any:
    """Load an exported model (``model.so`` or ``model.json``) into an `Executable` (fresh process OK).

    The weights are read and checked against the manifest's SHA-256. ``map_weights=True`` maps
    the file instead (copy-on-write: pages are read on first use, nothing is hashed; only the size
    is checked), for a caller that knows the file is the one written with the manifest (the package
    cache: `ingot.workflow.package_cache`). A mapped file must not be truncated while in use.

    Example:
        >>> from ingot import graph as G
        >>> vm = G.Executor(load_executable("/tmp/model.so"))  # doctest: +SKIP
    """
    from ingot.ir.error import IRError
    from ingot.runtime.module import Module
    from ingot.runtime.threads import num_threads_for_target
    from ingot.target import as_target

    from .executor import Executable

    path = os.path.abspath(os.fspath(path))
    manifest = read_manifest(path)
    folder = os.path.dirname(manifest_path(path) if not path.endswith(".json") else path)
    target = as_target(manifest["target"])
    lib = None
    if manifest["library"] is not None:  # None: every function runs in external (BYOC) modules
        lib = Module(os.path.join(folder, manifest["library"]))
        lib.set_num_threads(num_threads_for_target(target))
    wfile = os.path.join(folder, manifest["weights"])
    nbytes = manifest["weights_bytes"]
    if map_weights and nbytes:
        weights = _map_weights(wfile, nbytes)
    else:
        weights = _read_weights(wfile, nbytes, manifest["weights_sha256"])
    if weights is None:
        raise IRError(f"weights file {wfile!r} does not match the manifest (size or SHA-256 differs); "
                      f"re-export the model")
    external = {symbol: load_external_module(entry, mpath_of(path), symbol)
                for symbol, entry in manifest.get("external", {}).items()}
    return Executable(None, lib, target, manifest["functions"], manifest["constants"], weights, manifest["aot"],
                      manifest["kernels"], manifest.get("schedules", {}), external)


def _read_weights(wfile: str, nbytes: int, sha256: str) -> "Any | None":
    """The weights read into a huge-page buffer (same placement as a fresh build) and hashed in
    place (no temporary copies); None when the size or the SHA-256 differs from the manifest's."""
    from .executor import _host_empty

    weights = _host_empty((max(nbytes, 1),), "uint8")
    got, extra = 0, b""
    if nbytes:  # an empty blob needs no file
        with open(wfile, "rb") as fh:
            got, extra = fh.readinto(memoryview(weights)[:nbytes]), fh.read(1)
    if got != nbytes or extra or hashlib.sha256(memoryview(weights)[:nbytes]).hexdigest() != sha256:
        return None
    return weights


def _map_weights(wfile: str, nbytes: int) -> "Any | None":
    """The weights file mapped copy-on-write (a kernel's stray write stays private); None when its
    size differs from the manifest's."""
    import mmap

    with open(wfile, "rb") as fh:
        if os.fstat(fh.fileno()).st_size != nbytes:
            return None
        mapped = mmap.mmap(fh.fileno(), nbytes, access=mmap.ACCESS_COPY)
    return np.frombuffer(mapped, dtype=np.uint8)


def mpath_of(path: str) -> str:
    """The manifest path of artifact ``path`` (``.so`` or ``.json``).

    Example:
        >>> mpath_of("/tmp/model.so")
        '/tmp/model.json'
    """
    return manifest_path(path) if not path.endswith(".json") else path


def load_external_module(entry: dict, where: str, symbol: str) -> Any:
    """The runtime module of external region ``symbol`` from its manifest ``entry``
    (``{"loader": "package.module:Class", "data": base64}``): the class is imported by name, as
    the runtime's loader finds ``ingot.graph`` (the graph layer never imports a backend package).

    Example:
        >>> load_external_module({"loader": "no_such_pkg.mod:Cls", "data": ""}, "m.json", "x_main_0")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ingot.ir.error.IRError: m.json: external region 'x_main_0' needs no_such_pkg.mod:Cls ...
    """
    import importlib

    from ingot.ir.error import IRError

    module_name, _, cls_name = entry["loader"].partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), cls_name)
    except (ImportError, AttributeError) as err:
        raise IRError(f"{where}: external region {symbol!r} needs {entry['loader']} ({err}); install the package "
                      f"that provides this BYOC backend (ingot.byoc backends ship with Ingot)") from None
    return cls.load_from_bytes(base64.b64decode(entry["data"]))
