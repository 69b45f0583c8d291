"""The backend interface: `Backend` (patterns + codegen), `RuntimeModule`, the backend registry.

Note: the registry is explicit and small (a dict from name to backend instance): this is where
users extend Ingot. `register_backend` also hands the backend's pattern table and codegen to
the graph layer (`ingot.graph.external`), which the partitioning passes and the build consult.

Example:
    >>> from ingot.byoc import Backend, Pattern, RuntimeModule
    >>> class Doubler(RuntimeModule):
    ...     def __init__(self, symbol):
    ...         self.symbol = symbol
    ...     def run(self, x, out):
    ...         out[...] = 2 * x
    ...     def save_to_bytes(self):
    ...         return self.symbol.encode()
    ...     @classmethod
    ...     def load_from_bytes(cls, data):
    ...         return cls(data.decode())
    >>> class Demo(Backend):
    ...     name = "doc_demo"
    ...     def patterns(self):
    ...         return [Pattern("doc_demo.relu", "relu")]
    ...     def codegen(self, func, target):
    ...         return Doubler(func.attrs["global_symbol"])
    >>> register_backend(Demo)
    >>> get_backend("doc_demo").name
    'doc_demo'
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.graph.external import Pattern, register_codegen, register_patterns


class RuntimeModule:
    """What a backend's codegen returns for one region: runs it, saves and loads itself.

    ``run(*inputs, *outputs)`` is destination passing: C-contiguous numpy arrays, the region's
    parameters in order (its constants last, lifted by the build) then its outputs, written in
    place. ``save_to_bytes()`` / ``load_from_bytes(data)`` (a classmethod) make it part of an exported
    model; the manifest names the class by ``loader`` (``"package.module:Class"``), so the class
    must be importable in the loading process. A module that cannot work on the loading host (a
    missing library) raises an error naming the package to install.

    Example: see `ingot.byoc.base`.
    """

    def run(self, *args: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__}.run(*inputs, *outputs) is not implemented")

    def save_to_bytes(self) -> bytes:
        raise NotImplementedError(f"{type(self).__name__}.save_to_bytes() is not implemented")

    @classmethod
    def load_from_bytes(cls, data: bytes) -> "RuntimeModule":
        raise NotImplementedError(f"{cls.__name__}.load_from_bytes(data) is not implemented")

    def c_entry(self) -> "int | None":
        """Optional: the address of a C function ``int32_t f(void **args)`` (data pointers of the
        inputs then the outputs; 0 on success) running the region. With one, a static model calls
        the region from its AOT C entry (no Python on the hot path); None: the plan runs on the
        executor's interpreter, which calls `run`."""
        return None

    @property
    def loader(self) -> str:
        """``"module:Class"`` of this module's class (written to the manifest)."""
        cls = type(self)
        return f"{cls.__module__}:{cls.__qualname__}"


class Backend:
    """An external code generator: ``name``, ``patterns()`` and ``codegen(func, target)``.

    ``patterns()`` returns `Pattern` entries (operator name, ``check(call) -> None | reason``,
    ``after=`` for epilogues); ``codegen(func, target)`` gets one region function (a graph
    `Function` with attrs ``Compiler`` and ``global_symbol``, its constants lifted to trailing
    parameters) and returns a `RuntimeModule`.

    Example: see `ingot.byoc.base`.
    """

    name: str = ""

    def patterns(self) -> "Sequence[Pattern]":
        raise NotImplementedError(f"backend {self.name!r}: patterns() is not implemented")

    def codegen(self, func: Any, target: Any) -> RuntimeModule:
        raise NotImplementedError(f"backend {self.name!r}: codegen(func, target) is not implemented")


_BACKENDS: "dict[str, Backend]" = {}


def register_backend(backend: Any) -> None:
    """Register a `Backend` class or instance under its ``name`` (replacing an earlier one).

    Example: see `ingot.byoc.base`.
    """
    instance = backend() if isinstance(backend, type) else backend
    if not isinstance(instance, Backend) or not instance.name:
        raise TypeError(f"register_backend: expected a Backend subclass with a `name`, got {backend!r}")
    _BACKENDS[instance.name] = instance
    register_patterns(instance.name, list(instance.patterns()))
    register_codegen(instance.name, instance.codegen)
    return None


def get_backend(name: str) -> Backend:
    """The backend registered as ``name``.

    Example:
        >>> get_backend("cblas").name
        'cblas'
    """
    try:
        return _BACKENDS[name]
    except KeyError:
        raise KeyError(f"no BYOC backend {name!r}; registered: {list_backends()} "
                       f"(register yours with ingot.byoc.register_backend)") from None


def list_backends() -> "list[str]":
    """Names of the registered backends.

    Example:
        >>> "cblas" in list_backends()
        True
    """
    return sorted(_BACKENDS)


def partition(mod: Any, targets: "Sequence[str] | str", policy: "str | None" = None, target: Any = "llvm") -> Any:
    """AnnotateTarget → MergeCompilerRegions → PartitionGraph in one call.

    ``policy="cost"`` then keeps a region external only where it measures faster than Ingot's own
    kernels for ``target`` (`ingot.byoc.policy.keep_faster`, which also returns its measurements).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 8), "float32"))
        >>> w = G.Var("w", G.TensorStructInfo((4, 8), "float32"))
        >>> bb = G.BlockBuilder()
        >>> with bb.function("main", [x, w]):
        ...     bb.emit_func_output(bb.emit(G.op.relu(bb.emit(G.op.linear(x, w)))))
        >>> sorted(partition(bb.get(), ["cblas"]).function_names)
        ['cblas_main_0', 'main']
    """
    from ingot.graph.transform import AnnotateTarget, MergeCompilerRegions, PartitionGraph

    targets = [targets] if isinstance(targets, str) else list(targets)
    for t in targets:
        get_backend(t)
    if policy not in (None, "cost"):
        raise ValueError(f"partition: policy={policy!r} is not None (every region the patterns accept) or "
                         f"'cost' (only regions measured faster than Ingot's kernels)")
    mod = PartitionGraph()(MergeCompilerRegions()(AnnotateTarget(targets)(mod)))
    if policy == "cost":
        from .policy import keep_faster

        mod, _ = keep_faster(mod, target)
    return mod
