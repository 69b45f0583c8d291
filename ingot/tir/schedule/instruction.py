"""Random variables and instructions: what a trace is made of.

Note: a primitive's *instruction kind* is declared next to the primitive (STYLE §2) as an
`InstructionKind` with its input and attribute names. From that one declaration the kind knows
how to replay itself (call ``sch.<name>(...)``), print itself as Python, and (de)serialize its
inputs; primitives with unusual needs pass their own ``printer``. Kinds register by name so that
`Trace.from_json` can find them; that registry is internal to the schedule package.

Input spec names: ``"loop"`` is one input passed by keyword; ``"factors[]"`` collects the
remaining inputs into a list passed by keyword; ``"*loops"`` passes the remaining inputs
positionally. Inputs are random variables, ints, floats, None or strings; attributes are plain
JSON values.

Example:
    >>> kind = InstructionKind("unroll", inputs=("loop",), register=False)
    >>> kind.as_python(["l1"], [], None, [])
    'sch.unroll(loop=l1)'
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence


class BlockRV:
    """A handle to a block of the scheduled function (resolved through the schedule).

    Example:
        >>> # b0 = sch.get_block("C"); sch.get(b0).name_hint -> 'C'
    """

    __slots__ = ()
    prefix = "b"

    def __repr__(self) -> str:
        return f"BlockRV({id(self):#x})"


class LoopRV:
    """A handle to a loop of the scheduled function (resolved through the schedule).

    Example:
        >>> # i, j, k = sch.get_loops(b0); sch.get(i).extent
    """

    __slots__ = ()
    prefix = "l"

    def __repr__(self) -> str:
        return f"LoopRV({id(self):#x})"


class ExprRV:
    """A handle to an integer value (e.g. a sampled tile factor).

    Example:
        >>> # v = sch.sample_categorical([1, 2, 4], [0.2, 0.3, 0.5]); sch.get(v) -> 4
    """

    __slots__ = ()
    prefix = "v"

    def __repr__(self) -> str:
        return f"ExprRV({id(self):#x})"


RV_TYPES = (BlockRV, LoopRV, ExprRV)
_RV_BY_PREFIX = {cls.prefix: cls for cls in RV_TYPES}

_KINDS: dict[str, "InstructionKind"] = {}


class InstructionKind:
    """The kind of an instruction: name, input/attr names, whether it samples, how it prints.

    ``is_pure``: has no effect on the IR (lookups, sampling), so `Trace.simplified` may drop it
    when its outputs are unused. ``is_sampling``: takes a ``decision``. ``returns_list``: the
    method returns a list (printed ``a, b = ...``; ``a, = ...`` for one element).

    Example:
        >>> k = InstructionKind("split", inputs=("loop", "factors[]"), attrs=("preserve_unit_iters",),
        ...                     returns_list=True, register=False)
        >>> k.as_python(["l1", "None", "4"], [True], None, ["l2", "l3"])
        'l2, l3 = sch.split(loop=l1, factors=[None, 4], preserve_unit_iters=True)'
    """

    def __init__(
        self,
        name: str,
        inputs: Sequence[str] = (),
        attrs: Sequence[str] = (),
        is_pure: bool = False,
        is_sampling: bool = False,
        returns_list: bool = False,
        printer: "Optional[Callable[[list[str], list[Any], Any, list[str]], str]]" = None,
        register: bool = True,
    ):
        self.name = name
        self.inputs = tuple(inputs)
        self.attrs = tuple(attrs)
        self.is_pure = is_pure or is_sampling
        self.is_sampling = is_sampling
        self.returns_list = returns_list
        self.printer = printer
        if register:
            if name in _KINDS:
                raise ValueError(f"instruction kind {name!r} is declared twice")
            _KINDS[name] = self

    @staticmethod
    def get(name: str) -> "InstructionKind":
        """The registered kind called ``name`` (raises KeyError naming the known kinds)."""
        _load_primitives()
        try:
            return _KINDS[name]
        except KeyError:
            raise KeyError(f"unknown schedule instruction {name!r}; known: {sorted(_KINDS)}") from None

    # -- replay ------------------------------------------------------------------------------------
    def split_inputs(self, inputs: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
        """Inputs as (positional args, keyword args) following the input spec."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        pos = 0
        for name in self.inputs:
            if name.startswith("*"):
                args.extend(inputs[pos:])
                pos = len(inputs)
            elif name.endswith("[]"):
                kwargs[name[:-2]] = list(inputs[pos:])
                pos = len(inputs)
            else:
                kwargs[name] = inputs[pos] if pos < len(inputs) else None
                pos += 1
        return args, kwargs

    def apply(self, sch: Any, inputs: Sequence[Any], attrs: Sequence[Any], decision: Any) -> list[Any]:
        """Run the primitive on ``sch`` (inputs already translated to ``sch``'s RVs); returns outputs."""
        args, kwargs = self.split_inputs(inputs)
        kwargs.update(zip(self.attrs, attrs))
        if self.is_sampling:
            kwargs["decision"] = decision
        result = getattr(sch, self.name)(*args, **kwargs)
        if result is None:
            return []
        if isinstance(result, (list, tuple)):
            return list(result)
        return [result]

    # -- printing ----------------------------------------------------------------------------------
    def as_python(self, inputs: list[str], attrs: list[Any], decision: Any, outputs: list[str]) -> str:
        """The Python line that replays this instruction (inputs/outputs already as names/text)."""
        if self.printer is not None:
            return self.printer(inputs, attrs, decision, outputs)
        parts: list[str] = []
        pos = 0
        for name in self.inputs:
            if name.startswith("*"):
                parts.extend(inputs[pos:])
                pos = len(inputs)
            elif name.endswith("[]"):
                parts.append(f"{name[:-2]}=[{', '.join(inputs[pos:])}]")
                pos = len(inputs)
            else:
                parts.append(f"{name}={inputs[pos]}")
                pos += 1
        parts.extend(f"{n}={_py(a)}" for n, a in zip(self.attrs, attrs))
        if self.is_sampling and decision is not None:
            parts.append(f"decision={_py(decision)}")
        call = f"sch.{self.name}({', '.join(parts)})"
        if not outputs:
            return call
        if self.returns_list:
            lhs = outputs[0] + "," if len(outputs) == 1 else ", ".join(outputs)
        else:
            lhs = outputs[0]
        return f"{lhs} = {call}"


def _py(value: Any) -> str:
    """Python literal text of an attribute or decision."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    return repr(value)


class Instruction:
    """One recorded primitive call: ``kind``, ``inputs`` (RVs and literals), ``attrs``, ``outputs``.

    Example:
        >>> # inst = sch.trace.insts[0]; inst.kind.name -> 'get_block'
    """

    __slots__ = ("kind", "inputs", "attrs", "outputs")

    def __init__(self, kind: InstructionKind, inputs: Sequence[Any], attrs: Sequence[Any], outputs: Sequence[Any]):
        self.kind = kind
        self.inputs = tuple(inputs)
        self.attrs = tuple(attrs)
        self.outputs = tuple(outputs)

    def __repr__(self) -> str:
        return f"Instruction({self.kind.name}, inputs={list(self.inputs)}, attrs={list(self.attrs)})"


def rv_class(prefix: str) -> type:
    """The RV class of a printed name's prefix (``"b"`` → `BlockRV`)."""
    return _RV_BY_PREFIX[prefix]


_LOADED = False


def _load_primitives() -> None:
    """Import every primitive module so their kinds are registered (needed by `Trace.from_json`)."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from . import primitives  # noqa: F401
