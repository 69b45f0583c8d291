"""The model workflow (TVM's tvmc): ``ingot.load`` → ``ingot.compile`` → ``ingot.run``.

Note: this is the top of the layer list (docs/architecture.md): it uses the frontends, the
graph, the tuner (tuning records at compile time) and the runtime; nothing below imports it.

Note: `Model` is the imported graph (IRModule + params + the input/output signature); `Package` is
the compiled form (a ``ingot.graph.Executable``) plus the same signature. A package exports to one
``.ingot`` directory: the shared library and plan/weights written by the graph layer's exporter
(``Executable.export_library``) and ``manifest.json`` — inputs, outputs, target, format version —
so ``ingot.run("model.ingot", ...)`` works in a fresh process. Input checks happen here, before
any kernel runs, and name the input with expected vs given shape/dtype.

Example:
    >>> import ingot, numpy as np
    >>> model = ingot.load("resnet50.onnx", shape_dict={"data": [1, 3, 224, 224]})  # doctest: +SKIP
    >>> package = ingot.compile(model, target="llvm")  # doctest: +SKIP
    >>> out = ingot.run(package, {"data": np.zeros((1, 3, 224, 224), "float32")})  # doctest: +SKIP
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import threading
from typing import Any, Mapping, Sequence

import numpy as np

from ingot.ir.error import IngotError
from ingot.support import gc_paused

FORMAT_VERSION = 1
_EXECUTOR_LOCK = threading.Lock()  # Package.executor: one Executor per package, even when raced
MANIFEST = "manifest.json"
LIBRARY = "model.so"


class ModelInputError(IngotError, ValueError):
    """Inputs given to `run` do not match the model (names, shapes or dtypes)."""


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """Name, shape (ints, or strings for symbolic dims) and dtype of a model input/output."""

    name: str
    shape: tuple
    dtype: str

    def to_json(self) -> dict:
        """As a JSON-able dict."""
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "TensorInfo":
        """From `to_json`'s dict."""
        return TensorInfo(d["name"], tuple(d["shape"]), d["dtype"])

    def example(self, rng: Any) -> np.ndarray:
        """A value of this static shape and dtype to run the model on when the user gives none: normal
        samples for floats, zeros for ints and bools, empty strings for a string tensor.

        Example:
            >>> TensorInfo("x", (2,), "string").example(np.random.default_rng(0)).tolist()
            ['', '']
        """
        if self.dtype == "string":
            return np.full(self.shape, "", dtype=object)
        if "float" in self.dtype:
            return rng.standard_normal(self.shape).astype(self.dtype)
        return np.zeros(self.shape, self.dtype)


def _sinfo_tensors(sinfo: Any, names: Sequence[str]) -> list[TensorInfo]:
    from ingot import graph as G

    fields = sinfo.fields if isinstance(sinfo, G.TupleStructInfo) else [sinfo]
    out = []
    for i, f in enumerate(fields):
        name = names[i] if i < len(names) else f"output_{i}"
        if isinstance(f, G.TupleStructInfo):  # an ONNX sequence output: a list of tensors at run time
            out.append(TensorInfo(name, (len(f.fields),), "sequence"))
            continue
        shape = tuple(d if isinstance(d, int) else str(d) for d in (f.shape or ()))
        out.append(TensorInfo(name, shape, str(f.dtype)))
    return out


class Model:
    """An imported model: ``mod`` (IRModule with ``main``), ``params`` (bound later when not
    empty), ``inputs``/``outputs`` (`TensorInfo`), ``source`` (file or description).

    ``content_key`` names a model loaded from a file or bytes by their content (the package
    cache's key, `ingot.workflow.package_cache.model_key`). A model whose import succeeded before
    (same bytes, same load arguments, same Ingot) is imported lazily, on the first use of ``mod``
    or ``params``: ``compile`` with a warm package cache never needs them. Handing out ``mod`` or
    ``params`` drops the content key (the caller may edit them): ``compile`` then keys the model
    by its graph's structural hash.

    Example:
        >>> m = load("model.onnx")  # doctest: +SKIP
        >>> [i.name for i in m.inputs]  # doctest: +SKIP
        ['data']
    """

    def __init__(self, mod: Any, params: dict, inputs: list, outputs: list, source: str = "<model>",
                 content_key: "str | None" = None, importer: Any = None):
        self._mod, self._params = mod, params
        self.inputs, self.outputs, self.source = list(inputs), list(outputs), source
        self._content_key = content_key
        self._importer = importer  # () -> (mod, params) for a lazily imported model

    def _imported(self) -> "tuple[Any, dict]":
        """``(mod, params)`` without dropping the content key (importing now if still lazy)."""
        if self._importer is not None:
            with gc_paused():  # the importer makes many short-lived acyclic objects (see `gc_paused`)
                self._mod, self._params = self._importer()
            self._importer = None
        return self._mod, self._params

    @property
    def content_key(self) -> "str | None":
        """The model's content key, or None once ``mod``/``params`` were handed out or replaced."""
        return self._content_key

    @property
    def mod(self) -> Any:
        """The graph IRModule (imported now if the model was loaded lazily)."""
        self._content_key = None
        return self._imported()[0]

    @mod.setter
    def mod(self, value: Any) -> None:
        self._imported()
        self._content_key, self._mod = None, value

    @property
    def params(self) -> dict:
        """Parameters bound as constants by `compile` (imported now if the model was loaded lazily)."""
        self._content_key = None
        return self._imported()[1]

    @params.setter
    def params(self, value: dict) -> None:
        self._imported()
        self._content_key, self._params = None, value

    def summary(self) -> str:
        """One line per input and output."""
        lines = [f"model {self.source}"]
        lines += [f"  input  {i.name}: {list(i.shape)} {i.dtype}" for i in self.inputs]
        lines += [f"  output {o.name}: {list(o.shape)} {o.dtype}" for o in self.outputs]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<ingot.Model {self.source} inputs={[i.name for i in self.inputs]}>"


def load(path_or_model: Any, shape_dict: "Mapping[str, Sequence[Any]] | None" = None,
         dtype_dict: "Mapping[str, str] | None" = None, example_inputs: Any = None,
         fallback: "str | None" = None, *, cache: bool = True, cache_dir: Any = None) -> Model:
    """Import a model: an ``.onnx`` path / bytes / ``onnx.ModelProto``, or a ``torch.nn.Module``
    with ``example_inputs`` (exported to ONNX in memory).

    ``fallback="onnxruntime"`` keeps the ONNX nodes Ingot cannot convert as opaque ``onnx_node``
    calls (typed by ONNX shape inference) instead of failing; `compile` with the same ``fallback``
    runs them on ONNX Runtime.

    A file or bytes get a content key (`Model.content_key`: SHA-256 of the bytes and the load
    arguments). When the package cache (``cache_dir``, default the kernel cache directory) records
    that these bytes imported before, the import is deferred to the first use of ``model.mod`` /
    ``model.params``, so a warm ``compile`` skips it; ``cache=False`` always imports now.

    Example:
        >>> model = load("resnet50.onnx", shape_dict={"data": [1, 3, 224, 224]})  # doctest: +SKIP
    """
    if _is_graph_module(path_or_model):
        return from_module(path_or_model)
    source = os.fspath(path_or_model) if isinstance(path_or_model, (str, os.PathLike)) else "<model>"
    if _is_torch_module(path_or_model):
        path_or_model, source = _torch_to_onnx(path_or_model, example_inputs), type(path_or_model).__name__
    _check_fallback(fallback)
    args = {"shape_dict": shape_dict, "dtype_dict": dtype_dict, "fallback": fallback}
    if not cache or not _is_model_bytes_or_file(path_or_model):
        return _import_onnx(path_or_model, source, args)[0]
    from . import package_cache

    if isinstance(path_or_model, (bytes, bytearray)):
        data, digest = bytes(path_or_model), None
    else:  # read at most once: the memo knows an unchanged file's digest, else the bytes read are imported
        digest, data = package_cache.file_digest(path_or_model, cache_dir)
    key = package_cache.model_key(data, args, digest)

    def model_bytes() -> bytes:  # the bytes the key names (the file may change after this load)
        return data if data is not None else _read_unchanged(path_or_model, digest)

    known = package_cache.recall_model(key, cache_dir)
    if known is not None:  # imported fine before: defer the import
        return Model(None, {}, known[0], known[1], source, key,
                     importer=lambda: _import_parts(model_bytes(), source, args, origin=source))
    model, keyable = _import_onnx(model_bytes(), source, args, origin=source, path=_file_of(path_or_model))
    if keyable:
        model._content_key = key
        package_cache.remember_model(key, model.inputs, model.outputs, cache_dir)
    return model


def _is_model_bytes_or_file(path_or_model: Any) -> bool:
    """Whether a content key applies: bytes, or a file (a ModelProto has no bytes without serializing
    it; a missing file is reported by `load_model`)."""
    return isinstance(path_or_model, (bytes, bytearray)) or (
        isinstance(path_or_model, (str, os.PathLike)) and os.path.isfile(path_or_model))


def _file_of(path_or_model: Any) -> "str | None":
    return os.fspath(path_or_model) if isinstance(path_or_model, (str, os.PathLike)) else None


def _read_unchanged(path: Any, digest: str) -> bytes:
    """The bytes of model file ``path``, checked to be those `load` keyed the model by."""
    with open(path, "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest() != digest:
        raise ModelInputError(f"{os.fspath(path)}: the model file changed after ingot.load read it (its SHA-256 "
                              f"differs); load it again with ingot.load({os.fspath(path)!r}, ...)")
    return data


def _import_parts(path_or_model: Any, source: str, args: dict, origin: str) -> "tuple[Any, dict]":
    model = _import_onnx(path_or_model, source, args, origin)[0]
    return model._mod, model._params


def _import_onnx(path_or_model: Any, source: str, args: dict, origin: "str | None" = None,
                 path: "str | None" = None) -> "tuple[Model, bool]":
    """Import ONNX (``origin``: the file name for messages, when importing a file's bytes; ``path``: the
    file bytes were read from, `load_model`); returns the model and whether its bytes decide it (not
    when weights are in external data files)."""
    from ingot.frontend.onnx import from_onnx, load_model

    with gc_paused():  # parsing makes many short-lived acyclic objects (see `gc_paused`)
        proto, loaded_from = load_model(path_or_model, path=path)
    # Asked before the external data are loaded (loading resets each tensor's data_location; only
    # bytes keep it: the one case where the answer is used).
    external = _has_external_data(proto)
    if external and path is not None:  # what onnx.load(path) does
        from onnx.external_data_helper import load_external_data_for_model

        load_external_data_for_model(proto, os.path.dirname(os.path.abspath(path)))
    mod, params = from_onnx(proto, shape_dict=args["shape_dict"], dtype_dict=args["dtype_dict"], checked=True,
                            source=origin or loaded_from, keep_unsupported=args["fallback"] is not None,
                            raw=path_or_model if isinstance(path_or_model, bytes) and not external else None)
    main = mod["main"]
    inputs = [TensorInfo(p.name_hint, tuple(d if isinstance(d, int) else str(d) for d in p.struct_info.shape),
                         str(p.struct_info.dtype)) for p in main.params if p.name_hint not in params]
    outputs = _sinfo_tensors(main.ret_struct_info, [o.name for o in proto.graph.output])
    return Model(mod, params, inputs, outputs, source), not external


def _has_external_data(proto: Any) -> bool:
    from onnx import TensorProto

    return any(t.data_location == TensorProto.EXTERNAL for t in proto.graph.initializer)


def _is_graph_module(obj: Any) -> bool:
    from ingot.ir import IRModule

    if isinstance(obj, IRModule):
        return True
    from ingot.graph import Function

    return isinstance(obj, Function)


def from_module(mod: Any, params: "Mapping[str, Any] | None" = None, source: str = "<IRModule>") -> Model:
    """A `Model` from a graph `IRModule` (or one graph `Function`) whose ``main`` is the entry:
    inputs and outputs come from ``main``'s signature (TVM's ``tvm.compile(mod)`` /
    ``relax.build(mod)``; `load` and `compile` call this when given a module).

    ``params`` maps parameter names to arrays bound as constants by `compile` (they are not inputs).

    Example:
        >>> from ingot import graph as G
        >>> bb = G.BlockBuilder()
        >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
        >>> with bb.function("main", [x]):
        ...     bb.emit_func_output(bb.emit(G.op.relu(x)))
        >>> model = from_module(bb.get())
        >>> [(i.name, i.shape) for i in model.inputs], [o.shape for o in model.outputs]
        ([('x', (2, 3))], [(2, 3)])
    """
    from ingot import graph as G
    from ingot.ir import IRModule

    if isinstance(mod, G.Function):
        mod = IRModule({"main": mod})
    if not isinstance(mod, IRModule):
        raise IngotError(f"from_module expects a graph IRModule or graph Function, got {type(mod).__name__}")
    main = mod.functions.get("main")
    if not isinstance(main, G.Function):
        kind = "no function 'main'" if main is None else f"a {type(main).__name__} 'main', not a graph Function"
        raise IngotError(
            f"ingot.compile(IRModule): the module (functions {sorted(mod.functions)}) has {kind}; a model "
            f"needs a graph 'main' (build one with ingot.graph.BlockBuilder or @R.function). For a module of "
            f"TensorIR functions use ingot.build(mod, target)")
    params = dict(params or {})
    inputs = []
    for p in main.params:
        if p.name_hint in params:
            continue
        sinfo = p.struct_info
        if not isinstance(sinfo, G.TensorStructInfo) or sinfo.shape is None:
            raise IngotError(f"ingot.compile(IRModule): parameter {p.name_hint!r} of 'main' has struct info "
                             f"{sinfo}; model inputs must be tensors of known rank and shape")
        inputs.append(TensorInfo(p.name_hint, tuple(d if isinstance(d, int) else str(d) for d in sinfo.shape),
                                 str(sinfo.dtype)))
    outputs = _sinfo_tensors(main.ret_struct_info, [])
    return Model(mod, params, inputs, outputs, source)


def _check_fallback(fallback: "str | None") -> None:
    if fallback not in (None, "onnxruntime"):
        raise IngotError(f"fallback={fallback!r}: the one fallback runtime is \"onnxruntime\" (ONNX ops Ingot "
                         f"cannot compile run on ONNX Runtime), or None (such ops are an error)")


def _is_torch_module(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return mod.startswith("torch") or any(c.__module__.startswith("torch.nn") for c in type(obj).__mro__)


def _torch_to_onnx(module: Any, example_inputs: Any) -> bytes:
    import io

    import torch

    if example_inputs is None:
        raise IngotError("load(torch_module): pass example_inputs=(tensor, ...) to trace the module")
    args = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    buf = io.BytesIO()
    module.eval()
    with torch.no_grad():
        torch.onnx.export(module, args, buf, dynamo=False, opset_version=17)
    return buf.getvalue()


class Package:
    """A compiled model: the graph ``Executable``, the signature, the target.

    Example:
        >>> package = compile(load("m.onnx"))  # doctest: +SKIP
        >>> package.export("m.ingot")  # doctest: +SKIP
    """

    def __init__(self, executable: Any, inputs: list, outputs: list, target: str, source: str = "<model>"):
        self.executable = executable
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.target = str(target)
        self.source = source
        self._vm = None
        # {kernel: how it was scheduled}; with tuning records, an ingot.tune ScheduleReport whose
        # str() counts tuned / default / failed kernels.
        self.schedule_report = dict(getattr(executable, "schedule_report", None) or {})
        self.partition_report: list = []  # BYOC: each candidate op, taken by a backend or not, and why
        self.from_cache = False  # loaded from the package cache by `compile` (`ingot.workflow.package_cache`)
        self.schedule_summary: "str | None" = None  # a cached tuned package: the line `compile` printed

    @property
    def fallback_ops(self) -> list:
        """The rows of `partition_report` for ONNX ops that run on ONNX Runtime (``compile(...,
        fallback="onnxruntime")``): ``onnx_op``, ``node``, ``binding``, ``reason``.

        Example:
            >>> [r["onnx_op"] for r in package.fallback_ops]  # doctest: +SKIP
            ['Det']
        """
        return [r for r in self.partition_report if r.get("onnx_op")]

    def manifest(self) -> dict:
        """The JSON manifest written by `export`."""
        return {"format": "ingot-package", "version": FORMAT_VERSION, "source": self.source, "target": self.target,
                "inputs": [i.to_json() for i in self.inputs], "outputs": [o.to_json() for o in self.outputs],
                "library": LIBRARY}

    def export(self, path: "str | os.PathLike") -> str:
        """Write the package to directory ``path`` (``model.ingot``); nothing is left on failure.

        Example: see the class docstring.
        """
        path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".ingot-export-", dir=parent)
        try:
            self.executable.export_library(os.path.join(tmp, LIBRARY))
            with open(os.path.join(tmp, MANIFEST), "w") as f:
                json.dump(self.manifest(), f, indent=2)
            if os.path.isdir(path):
                shutil.rmtree(path)
            os.replace(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return path

    def executor(self) -> Any:
        """The graph ``Executor`` (created once, shared by every `run` of this package).

        Several threads may run one package at once: the weights and the library are shared
        read-only, each call gets its own workspace arena and outputs (see
        ``ingot.graph.Executor``), and the C code runs without the GIL.
        """
        if self._vm is None:
            import ingot
            from ingot import graph as G

            with _EXECUTOR_LOCK:
                if self._vm is None:
                    self._vm = G.Executor(self.executable, ingot.cpu())
        return self._vm

    def set_num_threads(self, n: "int | None") -> int:
        """Threads for this package's parallel loops, for every later call from any thread
        (``n`` 0 or None: the system default, ``ingot.runtime.threads.default_num_threads``:
        ``OMP_NUM_THREADS``, CPU affinity, cgroup quota); returns the count in effect.

        Example:
            >>> package.set_num_threads(1)  # doctest: +SKIP
            1
        """
        from ingot.runtime.threads import check_num_threads

        n = check_num_threads(n, "Package.set_num_threads(n)")
        lib = getattr(self.executable, "lib", None)
        return n if lib is None else lib.set_num_threads(n)

    def get_num_threads(self) -> int:
        """Threads this package's parallel loops use.

        Example:
            >>> package.get_num_threads()  # doctest: +SKIP
            2
        """
        lib = getattr(self.executable, "lib", None)
        return 1 if lib is None else lib.get_num_threads()

    def __call__(self, inputs: Mapping[str, Any]) -> dict:
        """Same as ``run(self, inputs)``."""
        return run(self, inputs)

    def __repr__(self) -> str:
        return f"<ingot.Package {self.source} target={self.target!r} inputs={[i.name for i in self.inputs]}>"


def compile(model: Any, target: Any = "llvm", tuning_records: Any = None, opt_level: int = 3,  # noqa: A001
            layout: str = "auto", byoc: "Sequence[str] | str | None" = None,
            byoc_policy: "str | None" = None, fallback: "str | None" = None, *, cache: bool = True,
            cache_dir: Any = None) -> Package:
    """Compile a `Model` (or a path, loaded with defaults) for ``target``: bind params, run the graph
    pipeline and build all kernels (``ingot.graph.build``).

    ``tuning_records`` (a database or path) applies tuned schedules when ``ingot.tune`` provides
    them; ``opt_level`` < 1 skips the optional graph optimizations. ``layout="auto"`` runs the
    convolutional part of CPU models in NHWC (inputs and outputs keep the model's layout);
    ``layout="NCHW"`` keeps the model's layout throughout (CUDA always does, for now).

    ``byoc`` names external backends (``["cblas"]``, `ingot.byoc`) that take the ops their pattern tables
    accept (AnnotateTarget → MergeCompilerRegions → PartitionGraph before the build);
    ``package.partition_report`` lists every candidate op, accepted or not and why.
    ``byoc_policy="cost"`` keeps a region external only where it measures faster than Ingot's kernels.

    ``fallback="onnxruntime"``: the ONNX ops Ingot cannot compile (kept by ``load(..., fallback=
    "onnxruntime")``, which a path given here is loaded with) run on ONNX Runtime, in regions of their
    own (`ingot.byoc.onnxruntime`); everything else compiles natively. Their rows in
    ``package.partition_report`` have ``onnx_op`` and ``node`` (``package.fallback_ops`` lists them).

    The compiled package is cached (`ingot.workflow.package_cache`, beside the kernel cache:
    ``cache_dir``, ``$INGOT_CACHE_DIR`` or ``~/.cache/ingot/kernels``) under a key of everything
    that decides it (model bytes or graph, target and host CPU, options, tuning records, Ingot's
    sources, the C compiler); a hit loads it without importing or lowering (``package.from_cache``).
    ``cache=False`` bypasses it (neither read nor written).

    Example:
        >>> package = compile(load("model.onnx"), target="llvm -num-cores=2")  # doctest: +SKIP
        >>> package.from_cache, compile(load("model.onnx"), target="llvm -num-cores=2").from_cache  # doctest: +SKIP
        (False, True)
        >>> package = compile("model_with_det.onnx", fallback="onnxruntime")  # doctest: +SKIP
        >>> [(r["onnx_op"], r["node"]) for r in package.fallback_ops]  # doctest: +SKIP
        [('Det', 'det0')]
    """
    from ingot import graph as G
    from ingot.target import as_target

    from . import package_cache

    _check_fallback(fallback)
    target = as_target(target)  # parsed once here; partitioning, tuning records and the build share it
    if not isinstance(model, Model):
        model = load(model, fallback=fallback, cache=cache, cache_dir=cache_dir)
    options = {"opt_level": opt_level, "layout": layout, "byoc": byoc, "byoc_policy": byoc_policy,
               "fallback": fallback}
    key = _package_key(model, target, options, tuning_records) if cache else None
    if key is not None:
        hit = package_cache.lookup(key, cache_dir)
        if hit is not None:
            package_cache.count("hits")
            hit.source, hit.from_cache = model.source, True
            if tuning_records is not None and hit.schedule_summary:
                import sys

                print(f"ingot.compile: {hit.schedule_summary}", file=sys.stderr)
            return hit
    mod, params = model._imported()
    if params:
        from ingot.graph.transform.bind_params import BindParams

        mod = BindParams("main", params)(mod)
    partition_report: list = []
    backends = ([byoc] if isinstance(byoc, str) else list(byoc)) if byoc else []
    opaque: list = []
    if _has_onnx_nodes(mod):
        from ingot.byoc import onnxruntime as ort_backend  # registers the backend; imports no onnxruntime

        opaque = ort_backend.fallback_report(mod)
    if opaque and fallback is None:
        ops = ", ".join(f"{r['onnx_op']} (node {r['node']!r})" for r in opaque[:5]) + (", ..." if len(opaque) > 5 else "")
        raise IngotError(f"{model.source}: the model holds ONNX ops Ingot cannot compile: {ops}; compile with "
                         f"ingot.compile(model, fallback=\"onnxruntime\") (CLI: --fallback onnxruntime) to run them "
                         f"on ONNX Runtime")
    if opaque and "onnxruntime" not in backends:  # else the byoc partition takes them with the rest
        mod = ort_backend.partition_fallback(mod)
    if byoc:
        from ingot import byoc as B
        from ingot.graph.transform import partition_report as report_of

        for name in backends:
            B.get_backend(name)  # an unknown name fails here, listing the registered backends
        partition_report = [r for r in report_of(mod, backends) if r["op"] != "onnx_node"]
        mod = B.partition(mod, backends, policy=byoc_policy, target=target)
    partition_report = opaque + partition_report
    kwargs: dict = {"layout": layout}
    hook = None
    if tuning_records is not None:
        hook = kwargs["apply_schedule"] = _tuned_schedule_fn(tuning_records, target)
    executable = G.build(mod, target, **kwargs)
    package = Package(executable, model.inputs, model.outputs, str(target), model.source)
    package.partition_report = partition_report
    if hook is not None:
        # Never silent about tuning: say how many kernels got a tuned / default schedule.
        import sys

        package.schedule_report = hook.report(executable.schedule_report)
        print(f"ingot.compile: {package.schedule_report}", file=sys.stderr)
    if key is None:
        package_cache.count("bypassed")
    else:
        package_cache.count("misses")
        package_cache.store(key, package, cache_dir)
    return package


def _package_key(model: Model, target: Any, options: dict, tuning_records: Any) -> "str | None":
    """The package cache key of compiling ``model`` (None: not cacheable): by its content key when
    it has one, else by its graph and params (`ingot.workflow.package_cache.ir_key`)."""
    from . import package_cache

    records = package_cache.records_digest(tuning_records)
    if records is None:
        return None
    model_part = model.content_key
    if model_part is None:
        signature = [[i.to_json() for i in model.inputs], [o.to_json() for o in model.outputs], model.source]
        model_part = package_cache.ir_key(*model._imported(), signature)
    return package_cache.compile_key(model_part, target, options, records)


def _has_onnx_nodes(mod: Any) -> bool:
    from ingot import graph as G
    from ingot.graph.op.opaque import is_onnx_node

    return any(is_onnx_node(b.value) for f in mod.functions.values() if isinstance(f, G.Function)
               for blk in f.body.blocks for b in blk.bindings)


def _tuned_schedule_fn(records: Any, target: Any) -> Any:
    from ingot.tune.apply import apply_records

    return apply_records(records, target)


def load_package(path: "str | os.PathLike") -> Package:
    """Read a package written by `Package.export`.

    Example:
        >>> package = load_package("model.ingot")  # doctest: +SKIP
    """
    path = os.fspath(path)
    manifest_path = os.path.join(path, MANIFEST)
    if not os.path.isfile(manifest_path):
        raise IngotError(f"{path} is not an Ingot package (no {MANIFEST}); create one with `ingot compile`")
    with open(manifest_path) as f:
        manifest = json.load(f)
    if manifest.get("format") != "ingot-package" or manifest.get("version", 0) > FORMAT_VERSION:
        raise IngotError(f"{path}: package format {manifest.get('format')!r} v{manifest.get('version')} is not "
                         f"readable by this Ingot (reads v{FORMAT_VERSION}); recompile the model")
    from ingot.graph.artifact import load_executable

    executable = load_executable(os.path.join(path, manifest.get("library", LIBRARY)))
    return Package(executable, [TensorInfo.from_json(i) for i in manifest["inputs"]],
                   [TensorInfo.from_json(o) for o in manifest["outputs"]], manifest.get("target", "llvm"),
                   manifest.get("source", path))


def check_inputs(inputs: Mapping[str, Any], expected: Sequence[TensorInfo]) -> list[np.ndarray]:
    """The arrays of ``inputs`` in ``expected`` order; a `ModelInputError` names any unknown or
    missing input and any shape/dtype mismatch (expected vs given).

    Example:
        >>> check_inputs({"x": np.zeros((2,), "float32")}, [TensorInfo("x", (2,), "float32")])[0].shape
        (2,)
        >>> check_inputs({"y": 1}, [TensorInfo("x", (2,), "float32")])  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        ModelInputError: unknown input(s) ['y']; the model's inputs are ['x']
        >>> check_inputs(np.zeros((2,), "float32"), [TensorInfo("x", (2,), "float32")])[0].shape  # one input
        (2,)
    """
    names = [e.name for e in expected]
    if not isinstance(inputs, Mapping):
        inputs = _named_inputs(inputs, names)
    unknown = [k for k in inputs if k not in names]
    if unknown:
        raise ModelInputError(f"unknown input(s) {unknown}; the model's inputs are {names}")
    missing = [n for n in names if n not in inputs]
    if missing:
        raise ModelInputError(f"missing input(s) {missing}; the model's inputs are "
                              + ", ".join(f"{e.name} {list(e.shape)} {e.dtype}" for e in expected))
    arrays, dims = [], {}
    for e in expected:
        a = inputs[e.name]
        a = a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else np.asarray(a)
        if e.dtype == "string":  # str/bytes/object arrays of str (ingot.graph.op.string)
            a = _string_input(e.name, a)
        elif str(a.dtype) != e.dtype:
            raise ModelInputError(f"input {e.name!r}: expected dtype {e.dtype}, given {a.dtype}; convert it with "
                                  f".astype({e.dtype!r})")
        ok = a.ndim == len(e.shape)
        for d, s in zip(e.shape, a.shape):
            if isinstance(d, int):
                ok = ok and d == s
            else:
                ok = ok and dims.setdefault(d, s) == s
        if not ok:
            raise ModelInputError(f"input {e.name!r}: expected shape {list(e.shape)}, given {list(a.shape)}")
        arrays.append(np.require(a, requirements="C"))  # ascontiguousarray would make 0-d inputs 1-d
    return arrays


def _string_input(name: str, a: np.ndarray) -> np.ndarray:
    """A string input as an object array of str; anything else is a `ModelInputError` naming it."""
    from ingot.graph.op.string import as_string_array

    try:
        return as_string_array(a, f"input {name!r}")
    except IngotError as exc:
        raise ModelInputError(f"{exc} (the model's input {name!r} has dtype string)") from None


def _named_inputs(inputs: Any, names: "list[str]") -> dict:
    """``inputs`` given without names: one array for a one-input model, or a list/tuple in the
    model's input order."""
    if hasattr(inputs, "shape") and hasattr(inputs, "dtype"):
        if len(names) != 1:
            raise ModelInputError(f"one array given, but the model has {len(names)} inputs {names}; pass a dict "
                                  "{name: array}")
        return {names[0]: inputs}
    if isinstance(inputs, (list, tuple)):
        if len(inputs) != len(names):
            raise ModelInputError(f"{len(inputs)} inputs given, the model has {len(names)} {names}; pass a dict "
                                  "{name: array}")
        return dict(zip(names, inputs))
    raise ModelInputError(f"inputs must be a dict {{name: array}} (or one array, or a list in input order), got "
                          f"{type(inputs).__name__}; the model's inputs are {names}")


def run(package_or_path: Any, inputs: Mapping[str, Any], device: str = "cpu",
        num_threads: "int | None" = None) -> dict:
    """Run a compiled package (or the path of an exported one) on named inputs (a dict; one array
    for a one-input model, or a list in input order, also do); returns ``{output name: numpy array}``.

    ``num_threads`` sets the package's thread count first (as `Package.set_num_threads`; it
    stays for later calls); None keeps the package's count (by default what the system allows:
    ``OMP_NUM_THREADS``, CPU affinity, cgroup quota). Several threads may run one package at
    once (see `Package.executor`).

    Example:
        >>> out = run("model.ingot", {"data": np.zeros((1, 3, 224, 224), "float32")})  # doctest: +SKIP
        >>> out = run(package, {"data": x}, num_threads=1)  # doctest: +SKIP
    """
    if device not in ("cpu", "llvm"):
        raise IngotError(f"run: device {device!r} is not supported yet; use device='cpu'")
    package = package_or_path if isinstance(package_or_path, Package) else load_package(package_or_path)
    if num_threads is not None:
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise IngotError(f"run: num_threads must be a positive int (or None for the package's count), "
                             f"got {num_threads!r}")
        if package.get_num_threads() != num_threads:
            package.set_num_threads(num_threads)
    arrays = check_inputs(inputs, package.inputs)
    out = package.executor()["main"](*arrays)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return {o.name: _output_value(v) for o, v in zip(package.outputs, outs)}


def _output_value(v: Any) -> Any:
    """An output as numpy: an array, or a list of arrays for a sequence output (a tuple of tensors)."""
    if isinstance(v, (list, tuple)):
        return [_output_value(x) for x in v]
    return v.numpy() if hasattr(v, "numpy") else np.asarray(v)


@dataclasses.dataclass
class KernelTime:
    """One kernel's share of a profiled run: ``name``, ``calls`` per run, ``ms`` per run (median over
    the repeats), ``percent`` of the profiled total."""

    name: str
    calls: int
    ms: float
    percent: float


class Profile:
    """Per-kernel times of a package (`profile`): ``kernels`` (slowest first), ``total_ms`` (sum of the
    kernels), ``overhead_ms`` (interpreter time around them). ``str()`` is a table.

    Example:
        >>> print(profile(package, {"data": x}))  # doctest: +SKIP
        kernel                                   calls      ms      %
        fused_conv2d_add_relu                        1   1.234   40.1
    """

    def __init__(self, kernels: list, total_ms: float, run_ms: float):
        self.kernels = sorted(kernels, key=lambda k: -k.ms)
        self.total_ms = total_ms
        self.overhead_ms = max(run_ms - total_ms, 0.0)

    def __str__(self) -> str:
        width = max([len(k.name) for k in self.kernels] + [20])
        lines = [f"{'kernel':{width}} {'calls':>5} {'ms':>9} {'%':>6}"]
        lines += [f"{k.name:{width}} {k.calls:5} {k.ms:9.3f} {k.percent:6.1f}" for k in self.kernels]
        lines.append(f"{'kernels total':{width}} {'':5} {self.total_ms:9.3f} {100.0:6.1f}")
        lines.append(f"{'interpreter overhead':{width}} {'':5} {self.overhead_ms:9.3f}")
        return "\n".join(lines)


def kernel_timed_main(package: Any, on_kernel: Any) -> Any:
    """The package's ``main`` run step by step, calling ``on_kernel(kernel_name, seconds)`` after
    each kernel call (the timing `profile` and in-model validation share).

    Note: kernels are timed through the graph executor's per-step hook (``Executor(on_step=...)``),
    which runs the plan in the interpreter path: the AOT entry is one C call with no steps to see.

    Example:
        >>> # times = []; main = kernel_timed_main(package, lambda k, s: times.append((k, s))); main(x)
    """
    from ingot import graph as G

    def on_step(function: str, step: dict, seconds: float) -> None:
        if step.get("op") in ("call_tir", "call_dps_packed", "call_packed"):
            on_kernel(step.get("func", step["op"]), seconds)

    return G.Executor(package.executable, None, on_step=on_step)["main"]


def profile(package: Any, inputs: Mapping[str, Any], repeat: int = 10) -> Profile:
    """Per-kernel times of ``package`` on ``inputs`` (median over ``repeat`` runs).

    Note: this runs the plan step by step in the Python interpreter path (`kernel_timed_main`:
    the executor's per-step hook) and times each kernel call. Kernel times are the same as in the
    AOT path; only the overhead between them differs.

    Example:
        >>> print(profile(load_package("m.ingot"), {"data": x}))  # doctest: +SKIP
    """
    import statistics
    import time

    if not isinstance(package, Package):
        package = load_package(package)
    arrays = check_inputs(inputs, package.inputs)
    samples: dict = {}
    fn = kernel_timed_main(package, lambda name, sec: samples.setdefault(name, []).append(sec))
    fn(*arrays)  # warm-up (first-touch of the workspace)
    samples.clear()
    runs = []
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        fn(*arrays)
        runs.append(time.perf_counter() - t0)
    reps = max(repeat, 1)
    kernels = []
    for name, times in samples.items():
        calls = len(times) // reps
        per_run = [sum(times[i * calls:(i + 1) * calls]) for i in range(reps)] if calls else [sum(times) / reps]
        kernels.append(KernelTime(name, max(calls, 1), statistics.median(per_run) * 1e3, 0.0))
    total = sum(k.ms for k in kernels)
    for k in kernels:
        k.percent = 100.0 * k.ms / total if total else 0.0
    return Profile(kernels, total, statistics.median(runs) * 1e3)
