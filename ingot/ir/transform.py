"""Pass infrastructure: `Pass`, `Sequential`, `PassContext`, instruments (TVM's ``tvm.transform``).

Note: every transformation in Ingot is a pass from `IRModule` to `IRModule` (STYLE §5). A pass
runs under the current `PassContext`, which decides whether it runs at all (``opt_level``,
``required_pass``, ``disabled_pass``), carries the configuration (validated against a registered
schema, so a typo in a key is an error and not a silently ignored option) and calls the
instruments around each pass (timing, IR dumps). `Sequential` is itself a pass, so pipelines nest.

The layer-specific helpers build on `function_pass`: ``ingot.tir.transform.prim_func_pass``
applies to `PrimFunc`s, the graph layer applies it to ``graph.Function``.

Example:
    >>> from ingot.ir import IRModule
    >>> @module_pass(opt_level=0, name="AddAttr")
    ... def add_attr(mod, ctx):
    ...     return mod.with_attrs(touched=True)
    >>> with PassContext(opt_level=3):
    ...     add_attr(IRModule({})).attrs["touched"]
    True
"""
from __future__ import annotations

import inspect
import os
import re
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from .error import IngotError
from .module import IRModule

__all__ = [
    "PassInfo", "Pass", "ModulePass", "FunctionPass", "Sequential", "PassContext", "PassInstrument",
    "PassTimingInstrument", "PrintIRInstrument", "DumpIR", "module_pass", "function_pass",
    "register_pass_config", "list_pass_configs", "PassConfigError",
]


class PassConfigError(IngotError, ValueError):
    """A `PassContext` got an unknown configuration key or a value of the wrong type."""


# ------------------------------------------------------------------------------------------------
# Configuration schema
# ------------------------------------------------------------------------------------------------

# key -> (expected python type(s), description). Layers register their keys here (TVM registers
# them in C++ with TVM_REGISTER_PASS_CONFIG_OPTION); users can register their own.
_CONFIG_SCHEMA: dict[str, tuple[Any, str]] = {}


def register_pass_config(key: str, value_type: Any, doc: str = "") -> None:
    """Declare a `PassContext` configuration key and the type its value must have.

    Example:
        >>> register_pass_config("my.verbose", bool, "print what my pass does")
        >>> PassContext(config={"my.verbose": True}).config["my.verbose"]
        True
    """
    _CONFIG_SCHEMA[str(key)] = (value_type, doc)


def list_pass_configs() -> dict[str, str]:
    """The registered configuration keys and their descriptions.

    Example:
        >>> "tir.disable_vectorize" in list_pass_configs()
        True
    """
    return {k: doc for k, (_, doc) in sorted(_CONFIG_SCHEMA.items())}


register_pass_config(
    "tir.add_lower_pass", (list, tuple),
    "[(phase, pass), ...]: user passes inserted into the lowering pipeline after phase 0..3",
)
register_pass_config("tir.disable_vectorize", bool, "lower vectorized loops as serial loops")
register_pass_config("tir.noalias", bool, "mark lowered functions' buffer parameters as non-aliasing (default True)")
register_pass_config(
    "tir.UnrollLoop", dict,
    "{'auto_max_step': int, 'explicit_unroll': bool, 'max_extent': int} for the UnrollLoop pass",
)
register_pass_config("tir.disable_compact_buffer", bool, "keep intermediate allocations at their full size")
register_pass_config(
    "tir.disable_unswitch", bool,
    "UnswitchRuntimeGuards: keep guards on run-time sizes inside the tile loops (default False; "
    "True gives the guarded tail tile everywhere, for A/B in benchmarks/dynamic_sequence.py)",
)
register_pass_config(
    "tir.widen_index_casts", bool,
    "Simplify and VectorizeLoop push widening int casts to the index leaves in kernels with run-time dims "
    "(default True; False: the form before #17, for benchmarks/dynamic_kernels.py --compare)",
)
register_pass_config(
    "graph.winograd", bool,
    "PackWeights turns eligible 3x3 stride-1 NHWC convs with constant weights into Winograd F(m, 3) "
    "(default True; False keeps the direct conv, bit-closer to the reference)",
)
register_pass_config(
    "codegen.parallel_runtime", str,
    "how the C backend runs parallel loops: 'pool' (the prelude's ingot_parallel_for, the default) or "
    "'openmp' (omp parallel for)",
)


def _check_config(config: Mapping[str, Any]) -> dict[str, Any]:
    checked = {}
    for key, value in config.items():
        if key not in _CONFIG_SCHEMA:
            valid = ", ".join(sorted(_CONFIG_SCHEMA))
            raise PassConfigError(
                f"PassContext: unknown config key {key!r}. Valid keys: {valid}. "
                "Register a new key with ingot.transform.register_pass_config(key, type)."
            )
        value_type, _ = _CONFIG_SCHEMA[key]
        if value_type is bool and isinstance(value, int) and value in (0, 1):
            value = bool(value)
        if not isinstance(value, value_type):
            names = "/".join(t.__name__ for t in (value_type if isinstance(value_type, tuple) else (value_type,)))
            raise PassConfigError(
                f"PassContext: config {key!r} expects a value of type {names}, got {type(value).__name__}: {value!r}"
            )
        checked[key] = value
    return checked


# ------------------------------------------------------------------------------------------------
# PassContext and instruments
# ------------------------------------------------------------------------------------------------


class PassInstrument:
    """Base of pass instruments: hooks called around passes run under a `PassContext`.

    Override any of the hooks; ``should_run`` returning False skips the pass.

    Example:
        >>> class CountPasses(PassInstrument):
        ...     def __init__(self): self.count = 0
        ...     def run_after_pass(self, mod, info): self.count += 1
        >>> counter = CountPasses()
        >>> with PassContext(instruments=[counter]):
        ...     _ = module_pass(lambda m, c: m, name="Nop")(IRModule({}))
        >>> counter.count
        1
    """

    @property
    def name(self) -> str:
        return type(self).__name__

    def enter_pass_ctx(self) -> None:
        """Called when the `PassContext` holding this instrument is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when the `PassContext` holding this instrument is exited."""

    def should_run(self, mod: IRModule, info: "PassInfo") -> bool:
        """Whether the pass described by ``info`` should run on ``mod``."""
        return True

    def run_before_pass(self, mod: IRModule, info: "PassInfo") -> None:
        """Called before a pass runs, with its input."""

    def run_after_pass(self, mod: IRModule, info: "PassInfo") -> None:
        """Called after a pass ran, with its output."""


class PassTimingInstrument(PassInstrument):
    """Times every pass; `render` returns a table of the times (nested passes indented).

    Example:
        >>> timing = PassTimingInstrument()
        >>> with PassContext(instruments=[timing]):
        ...     _ = module_pass(lambda m, c: m, name="Nop")(IRModule({}))
        >>> "Nop" in timing.render()
        True
    """

    def __init__(self) -> None:
        self.records: list[tuple[int, str, float]] = []  # (depth, pass name, seconds)
        self._stack: list[tuple[int, float]] = []

    def enter_pass_ctx(self) -> None:
        # A new context starts a new table; the last one stays readable after the context exits.
        self.records = []
        self._stack = []

    def run_before_pass(self, mod: IRModule, info: "PassInfo") -> None:
        self.records.append((len(self._stack), info.name, 0.0))
        self._stack.append((len(self.records) - 1, time.perf_counter()))

    def run_after_pass(self, mod: IRModule, info: "PassInfo") -> None:
        index, start = self._stack.pop()
        depth, name, _ = self.records[index]
        self.records[index] = (depth, name, time.perf_counter() - start)

    def render(self) -> str:
        """The per-pass times as text, one line per pass run, nested passes indented."""
        lines = ["pass timing (ms):"]
        for depth, name, seconds in self.records:
            lines.append(f"{'  ' * (depth + 1)}{name}: {seconds * 1e3:.3f}")
        return "\n".join(lines)


class PrintIRInstrument(PassInstrument):
    """Prints the module after each pass (or before, with ``before=True``); ``passes`` filters by name.

    Example:
        >>> with PassContext(instruments=[PrintIRInstrument(passes=["Nothing"])]):
        ...     _ = module_pass(lambda m, c: m, name="Nop")(IRModule({}))
    """

    def __init__(self, before: bool = False, passes: "Iterable[str] | None" = None, stream: Any = None) -> None:
        self.before = before
        self.passes = None if passes is None else set(passes)
        self.stream = stream

    def _emit(self, mod: IRModule, info: "PassInfo", when: str) -> None:
        if self.passes is not None and info.name not in self.passes:
            return
        print(f"# IR {when} {info.name}\n{_module_text(mod)}", file=self.stream)

    def run_before_pass(self, mod: IRModule, info: "PassInfo") -> None:
        if self.before:
            self._emit(mod, info, "before")

    def run_after_pass(self, mod: IRModule, info: "PassInfo") -> None:
        if not self.before:
            self._emit(mod, info, "after")


class DumpIR(PassInstrument):
    """Writes the module to ``dump_dir/NNN_<pass>.txt`` after each pass (the input as ``000_input.txt``).

    Example:
        >>> import tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> with PassContext(instruments=[DumpIR(d)]):
        ...     _ = module_pass(lambda m, c: m, name="Nop")(IRModule({}))
        >>> sorted(os.listdir(d))
        ['000_input.txt', '001_Nop.txt']
    """

    def __init__(self, dump_dir: "str | os.PathLike[str]") -> None:
        self.dump_dir = os.fspath(dump_dir)
        self.counter = 0

    def enter_pass_ctx(self) -> None:
        os.makedirs(self.dump_dir, exist_ok=True)
        self.counter = 0

    def _write(self, mod: IRModule, name: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        path = os.path.join(self.dump_dir, f"{self.counter:03d}_{safe}.txt")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(_module_text(mod) + "\n")
        self.counter += 1

    def run_before_pass(self, mod: IRModule, info: "PassInfo") -> None:
        if self.counter == 0:
            self._write(mod, "input")

    def run_after_pass(self, mod: IRModule, info: "PassInfo") -> None:
        self._write(mod, info.name)


def _module_text(mod: Any) -> str:
    if isinstance(mod, IRModule):
        return "\n\n".join(f"# from {name}\n{func}" for name, func in mod.items())
    return str(mod)


_CONTEXT_STACK = threading.local()


class PassContext:
    """The settings passes run under: optimization level, configuration, forced/disabled passes, instruments.

    Use it as a context manager; `PassContext.current()` is the innermost active one (a default
    context with ``opt_level=2`` when none is active).

    Example:
        >>> with PassContext(opt_level=3, config={"tir.disable_vectorize": True}) as ctx:
        ...     PassContext.current().config["tir.disable_vectorize"]
        True
    """

    def __init__(
        self,
        opt_level: int = 2,
        config: "Mapping[str, Any] | None" = None,
        required_pass: Sequence[str] = (),
        disabled_pass: Sequence[str] = (),
        instruments: Sequence[PassInstrument] = (),
    ) -> None:
        if not isinstance(opt_level, int) or not 0 <= opt_level <= 4:
            raise PassConfigError(f"PassContext: opt_level must be an int in 0..4, got {opt_level!r}")
        for label, names in (("required_pass", required_pass), ("disabled_pass", disabled_pass)):
            if isinstance(names, str):
                raise PassConfigError(f"PassContext: {label} must be a list of pass names, got the string {names!r}")
        for inst in instruments:
            if not isinstance(inst, PassInstrument):
                raise PassConfigError(
                    f"PassContext: instrument {inst!r} is not a PassInstrument; subclass ingot.transform.PassInstrument"
                )
        self.opt_level = opt_level
        self.config = _check_config(dict(config or {}))
        self.required_pass = frozenset(required_pass)
        self.disabled_pass = frozenset(disabled_pass)
        self.instruments = tuple(instruments)

    # -- context management ------------------------------------------------------------------------
    @staticmethod
    def _stack() -> list["PassContext"]:
        stack = getattr(_CONTEXT_STACK, "stack", None)
        if stack is None:
            stack = _CONTEXT_STACK.stack = []
        return stack

    @staticmethod
    def current() -> "PassContext":
        """The innermost active `PassContext`, or a default one.

        Example:
            >>> PassContext.current().opt_level
            2
        """
        stack = PassContext._stack()
        return stack[-1] if stack else PassContext()

    def __enter__(self) -> "PassContext":
        PassContext._stack().append(self)
        for inst in self.instruments:
            inst.enter_pass_ctx()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            for inst in self.instruments:
                inst.exit_pass_ctx()
        finally:
            PassContext._stack().pop()

    # -- decisions -------------------------------------------------------------------------------------
    def pass_enabled(self, info: "PassInfo") -> bool:
        """Whether a pass with ``info`` runs in this context (disabled < required < opt_level).

        Example:
            >>> ctx = PassContext(opt_level=1, disabled_pass=["Simplify"])
            >>> ctx.pass_enabled(PassInfo("Simplify", 0)), ctx.pass_enabled(PassInfo("Fuse", 2))
            (False, False)
        """
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return info.opt_level <= self.opt_level

    def get_config(self, key: str, default: Any = None) -> Any:
        """The value of config ``key`` (``default`` when unset); the key must be registered."""
        if key not in _CONFIG_SCHEMA:
            raise PassConfigError(f"config key {key!r} is not registered; see ingot.transform.list_pass_configs()")
        return self.config.get(key, default)

    def __repr__(self) -> str:
        return f"PassContext(opt_level={self.opt_level}, config={self.config})"


# ------------------------------------------------------------------------------------------------
# Passes
# ------------------------------------------------------------------------------------------------


class PassInfo:
    """Name, optimization level and required passes of a pass.

    Example:
        >>> PassInfo("Simplify", opt_level=0).name
        'Simplify'
    """

    __slots__ = ("name", "opt_level", "required")

    def __init__(self, name: str, opt_level: int = 0, required: Sequence[str] = ()) -> None:
        self.name = str(name)
        self.opt_level = int(opt_level)
        self.required = tuple(required or ())

    def __repr__(self) -> str:
        return f"PassInfo(name={self.name!r}, opt_level={self.opt_level}, required={list(self.required)})"


class Pass:
    """Base of passes: ``pass(mod) -> mod`` under the current `PassContext`.

    Subclasses implement `transform_module`. Calling a pass checks whether it is enabled, runs
    its required passes that are registered by name, and calls the context's instruments.

    Example:
        >>> class Nop(Pass):
        ...     def __init__(self): super().__init__(PassInfo("Nop"))
        ...     def transform_module(self, mod, ctx): return mod
        >>> Nop()(IRModule({})).function_names
        []
    """

    def __init__(self, info: PassInfo) -> None:
        self.info = info

    @property
    def name(self) -> str:
        return self.info.name

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError(f"pass {self.info.name!r} does not implement transform_module")

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(
                f"pass {self.info.name!r} takes an IRModule, got {type(mod).__name__}; "
                "wrap a function with ingot.IRModule({'main': func})"
            )
        ctx = PassContext.current()
        if not ctx.pass_enabled(self.info):
            return mod
        for required in self.info.required:
            if required in ctx.disabled_pass:
                continue
            factory = _PASS_REGISTRY.get(required)
            if factory is None:
                raise IngotError(
                    f"pass {self.info.name!r} requires pass {required!r}, which is not registered; "
                    "register it with ingot.transform.register_pass(name, factory)"
                )
            mod = factory()(mod)
        return self._run_instrumented(mod, ctx)

    def _run_instrumented(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for inst in ctx.instruments:
            if not inst.should_run(mod, self.info):
                return mod
        for inst in ctx.instruments:
            inst.run_before_pass(mod, self.info)
        result = self.transform_module(mod, ctx)
        if not isinstance(result, IRModule):
            raise TypeError(f"pass {self.info.name!r} returned {type(result).__name__}, expected an IRModule")
        for inst in ctx.instruments:
            inst.run_after_pass(result, self.info)
        return result

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.name!r}, opt_level={self.info.opt_level})"


class ModulePass(Pass):
    """A pass from a function ``fn(mod, ctx) -> mod`` (build one with `module_pass`)."""

    def __init__(self, fn: Callable[[IRModule, PassContext], IRModule], info: PassInfo) -> None:
        super().__init__(info)
        self.fn = fn

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.fn(mod, ctx)


class FunctionPass(Pass):
    """A pass applying ``fn(func, mod, ctx) -> func`` to every function of ``func_type`` in the module.

    ``func_type`` None means every function. ``fn`` returning None removes the function.
    """

    def __init__(self, fn: Callable[[Any, IRModule, PassContext], Any], info: PassInfo, func_type: Any = None) -> None:
        super().__init__(info)
        self.fn = fn
        self.func_type = func_type

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        functions = {}
        changed = False
        for name, func in mod.items():
            if self.func_type is not None and not isinstance(func, self.func_type):
                functions[name] = func
                continue
            new_func = self.fn(func, mod, ctx)
            changed = changed or new_func is not func
            if new_func is not None:
                functions[name] = new_func
        if not changed:
            return mod
        return IRModule(functions, mod.attrs)


class Sequential(Pass):
    """Runs passes in order; itself a pass, gated by its own ``opt_level``.

    Example:
        >>> p1 = module_pass(lambda m, c: m.with_attrs(a=1), name="A")
        >>> p2 = module_pass(lambda m, c: m.with_attrs(b=2), name="B", opt_level=3)
        >>> with PassContext(opt_level=2):
        ...     sorted(Sequential([p1, p2])(IRModule({})).attrs)
        ['a']
    """

    def __init__(self, passes: Sequence[Pass] = (), opt_level: int = 0, name: str = "sequential",
                 required: Sequence[str] = ()) -> None:
        super().__init__(PassInfo(name, opt_level, required))
        for p in passes:
            if not isinstance(p, Pass):
                raise TypeError(f"Sequential {name!r}: {p!r} is not a Pass; build one with module_pass/prim_func_pass")
        self.passes = tuple(passes)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            mod = p(mod)
        return mod

    def __repr__(self) -> str:
        return f"Sequential({self.info.name!r}, [{', '.join(p.name for p in self.passes)}])"


# Pass factories by name, for PassInfo.required (TVM resolves required passes by registered name).
_PASS_REGISTRY: dict[str, Callable[[], Pass]] = {}


def register_pass(name: str, factory: Callable[[], Pass]) -> None:
    """Register a zero-argument factory so other passes can name ``name`` in ``required``.

    Example:
        >>> register_pass("Nop", lambda: module_pass(lambda m, c: m, name="Nop"))
    """
    _PASS_REGISTRY[str(name)] = factory


def _wrap_class(cls: type, make: Callable[[Callable, PassInfo], Pass], name: "str | None",
                opt_level: int, required: Sequence[str], method: str) -> Callable[..., Pass]:
    """A factory turning a class with a ``transform_*`` method into passes (TVM's decorated classes)."""

    def factory(*args: Any, **kwargs: Any) -> Pass:
        instance = cls(*args, **kwargs)
        if not hasattr(instance, method):
            raise TypeError(f"pass class {cls.__name__} must define {method}()")
        return make(getattr(instance, method), PassInfo(name or cls.__name__, opt_level, required))

    factory.__name__ = cls.__name__
    factory.__doc__ = cls.__doc__
    return factory


def module_pass(fn: "Callable | type | None" = None, opt_level: int = 0, name: "str | None" = None,
                required: "Sequence[str] | None" = None) -> Any:
    """Build a module pass from ``fn(mod, ctx) -> mod``; usable as a decorator with arguments.

    Decorating a class with a ``transform_module(mod, ctx)`` method gives a factory of passes.

    Example:
        >>> @module_pass(opt_level=1)
        ... def drop_all(mod, ctx):
        ...     return IRModule({})
        >>> drop_all.info.name, drop_all.info.opt_level
        ('drop_all', 1)
    """
    required = tuple(required or ())

    def make(func: Any) -> Any:
        if inspect.isclass(func):
            return _wrap_class(func, lambda f, info: ModulePass(f, info), name, opt_level, required, "transform_module")
        if not callable(func):
            raise TypeError(f"module_pass needs a function fn(mod, ctx) -> mod, got {func!r}")
        return ModulePass(func, PassInfo(name or getattr(func, "__name__", "module_pass"), opt_level, required))

    return make if fn is None else make(fn)


def function_pass(fn: "Callable | type | None" = None, opt_level: int = 0, func_type: Any = None,
                  name: "str | None" = None, required: "Sequence[str] | None" = None) -> Any:
    """Build a pass applying ``fn(func, mod, ctx) -> func`` to each function (of ``func_type`` if given).

    Decorating a class with a ``transform_function(func, mod, ctx)`` method gives a factory of passes.

    Example:
        >>> @function_pass(opt_level=0, func_type=str)   # any class works; layers pass PrimFunc etc.
        ... def upper(func, mod, ctx):
        ...     return func.upper()
        >>> upper(IRModule({"f": "abc"}))["f"]
        'ABC'
    """
    required = tuple(required or ())

    def make(func: Any) -> Any:
        if inspect.isclass(func):
            return _wrap_class(func, lambda f, info: FunctionPass(f, info, func_type), name, opt_level, required,
                               "transform_function")
        if not callable(func):
            raise TypeError(f"function_pass needs a function fn(func, mod, ctx) -> func, got {func!r}")
        return FunctionPass(func, PassInfo(name or getattr(func, "__name__", "function_pass"), opt_level, required),
                            func_type)

    return make if fn is None else make(fn)


__all__ += ["register_pass"]
