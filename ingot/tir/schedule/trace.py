"""`Trace`: the recorded instructions of a schedule, with the decisions of its sampling steps.

Note: the trace is a product (STYLE §1). It prints as the Python that replays it, serializes to
versioned JSON, replays on a fresh schedule (optionally with other decisions: that is how the
tuner mutates a program), and can be simplified (unused lookups and samples dropped).

JSON form (version 1)::

    {"version": 1,
     "insts": [[kind_name, inputs, attrs, outputs], ...],
     "decisions": [[inst_index, decision], ...]}

Inputs are RV names (``"b0"``, ``"l1"``, ``"v2"``: the prefix says the kind), ``null``, numbers,
``{"str": text}`` for string literals, or lists of those; attributes are plain JSON values;
outputs are RV names.

Example:
    >>> # sch = Schedule(mod); b = sch.get_block("C"); print(sch.trace)
    >>> # b0 = sch.get_block(name="C", func_name="main")
"""
from __future__ import annotations

import json
from typing import Any, Callable, Optional, Sequence

from .instruction import RV_TYPES, Instruction, InstructionKind, rv_class

TRACE_JSON_VERSION = 1


class Trace:
    """Instructions plus the decisions taken by sampling instructions.

    Example:
        >>> t = Trace()
        >>> str(t)
        '# (empty trace)'
    """

    def __init__(self, insts: Sequence[Instruction] = (), decisions: "Optional[dict[Instruction, Any]]" = None):
        self.insts: list[Instruction] = list(insts)
        self.decisions: dict[Instruction, Any] = dict(decisions or {})

    # -- building ----------------------------------------------------------------------------------
    def append(self, inst: Instruction, decision: Any = None) -> None:
        """Add an instruction (with its decision if it samples)."""
        self.insts.append(inst)
        if decision is not None:
            self.decisions[inst] = decision

    def pop(self) -> "Instruction | None":
        """Remove and return the last instruction (None when empty)."""
        if not self.insts:
            return None
        inst = self.insts.pop()
        self.decisions.pop(inst, None)
        return inst

    def get_decision(self, inst: Instruction) -> Any:
        return self.decisions.get(inst)

    def copy(self) -> "Trace":
        return Trace(self.insts, self.decisions)

    def with_decision(self, inst: Instruction, decision: Any, remove_postproc: bool = True) -> "Trace":
        """A copy with ``inst``'s decision replaced (instructions after postproc dropped if asked).

        Example:
            >>> # t2 = sch.trace.with_decision(sch.trace.insts[2], [8, 16], remove_postproc=True)
        """
        if inst not in self.decisions and not inst.kind.is_sampling:
            raise ValueError(f"instruction {inst.kind.name} is not a sampling instruction; it has no decision")
        insts = _without_postproc(self.insts) if remove_postproc else list(self.insts)
        decisions = {i: d for i, d in self.decisions.items() if i in set(insts)}
        decisions[inst] = decision
        return Trace(insts, decisions)

    def simplified(self, remove_postproc: bool) -> "Trace":
        """Drop pure instructions (lookups, samples) whose outputs nothing uses.

        Example:
            >>> # sch.trace.simplified(remove_postproc=True)
        """
        insts = _without_postproc(self.insts) if remove_postproc else list(self.insts)
        used: set[int] = set()
        kept: list[Instruction] = []
        for inst in reversed(insts):
            if inst.kind.is_pure and not any(id(o) in used for o in inst.outputs) and inst.outputs:
                continue
            kept.append(inst)
            for x in _flat(inst.inputs):
                if isinstance(x, RV_TYPES):
                    used.add(id(x))
        kept.reverse()
        return Trace(kept, {i: d for i, d in self.decisions.items() if i in set(kept)})

    # -- replay ------------------------------------------------------------------------------------
    def apply_to_schedule(
        self,
        sch: Any,
        remove_postproc: bool = False,
        decision_provider: "Optional[Callable[[Instruction, list, list, Any], Any]]" = None,
    ) -> None:
        """Replay every instruction on ``sch`` (which records them in its own trace).

        ``decision_provider(inst, inputs, attrs, decision)`` may return a different decision for
        a sampling instruction (the tuner's mutators use it).

        Example:
            >>> # sch2 = Schedule(mod); sch.trace.apply_to_schedule(sch2)
        """
        rv_map: dict[int, Any] = {}
        for inst in self.insts:
            if remove_postproc and inst.kind.name == "enter_postproc":
                break
            inputs = [translate_rvs(x, rv_map) for x in inst.inputs]
            decision = self.decisions.get(inst)
            if decision_provider is not None and inst.kind.is_sampling:
                decision = decision_provider(inst, inputs, list(inst.attrs), decision)
            outputs = inst.kind.apply(sch, inputs, list(inst.attrs), decision)
            if len(outputs) != len(inst.outputs):
                from .error import ScheduleError

                raise ScheduleError(
                    f"replaying {inst.kind.name}: got {len(outputs)} outputs, the trace recorded {len(inst.outputs)}",
                    "the schedule being replayed on has a different structure than the one the trace came "
                    "from (e.g. a different number of loops); replay on a copy of the original function",
                )
            for old, new in zip(inst.outputs, outputs):
                rv_map[id(old)] = new

    # -- printing ----------------------------------------------------------------------------------
    def as_python(self, remove_postproc: bool = False) -> list[str]:
        """The Python lines that replay the trace on a schedule named ``sch``.

        Example:
            >>> # sch.trace.as_python() -> ['b0 = sch.get_block(name="C", func_name="main")', ...]
        """
        names = _Namer()
        lines: list[str] = []
        for inst in self.insts:
            if remove_postproc and inst.kind.name == "enter_postproc":
                break
            inputs = [names.text(x) for x in inst.inputs]
            outputs = [names.define(o) for o in inst.outputs]
            lines.append(inst.kind.as_python(inputs, list(inst.attrs), self.decisions.get(inst), outputs))
        return lines

    def __str__(self) -> str:
        lines = self.as_python()
        return "\n".join(lines) if lines else "# (empty trace)"

    __repr__ = __str__

    def show(self) -> None:
        print(self)

    # -- JSON ---------------------------------------------------------------------------------------
    def as_json(self, remove_postproc: bool = False) -> dict:
        """The JSON-ready form (see the module note); ``json.dumps`` it to store.

        Example:
            >>> Trace().as_json()
            {'version': 1, 'insts': [], 'decisions': []}
        """
        names = _Namer()
        insts = []
        decisions = []
        for index, inst in enumerate(self.insts):
            if remove_postproc and inst.kind.name == "enter_postproc":
                break
            inputs = [names.json(x) for x in inst.inputs]
            outputs = [names.define(o) for o in inst.outputs]
            insts.append([inst.kind.name, inputs, _jsonable(list(inst.attrs)), outputs])
            if inst in self.decisions:
                decisions.append([index, _jsonable(self.decisions[inst])])
        return {"version": TRACE_JSON_VERSION, "insts": insts, "decisions": decisions}

    @staticmethod
    def apply_json_to_schedule(json_obj: "dict | list | str", sch: Any) -> None:
        """Replay a trace saved as JSON on ``sch`` (TVM's spelling of
        ``Trace.from_json(json_obj).apply_to_schedule(sch)``).

        Example:
            >>> from ingot import te
            >>> from ingot.tir import Schedule
            >>> A = te.placeholder((64,), name="A")
            >>> B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
            >>> sch = Schedule(te.create_prim_func([A, B]))
            >>> _ = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 8])
            >>> sch2 = Schedule(te.create_prim_func([A, B]))
            >>> Trace.apply_json_to_schedule(sch.trace.as_json(), sch2)
            >>> import ingot; ingot.ir.structural_equal(sch.mod, sch2.mod)
            True
        """
        Trace.from_json(json_obj).apply_to_schedule(sch)

    @staticmethod
    def from_json(data: "dict | str") -> "Trace":
        """Rebuild a trace from `as_json`'s output (a dict or its JSON text).

        Example:
            >>> Trace.from_json('{"version": 1, "insts": [], "decisions": []}').insts
            []
        """
        if isinstance(data, str):
            data = json.loads(data)
        if isinstance(data, list):  # TVM's bare [insts, decisions] form
            data = {"version": TRACE_JSON_VERSION, "insts": data[0], "decisions": data[1] if len(data) > 1 else []}
        version = data.get("version")
        if version != TRACE_JSON_VERSION:
            raise ValueError(
                f"trace JSON has version {version!r}; this Ingot reads version {TRACE_JSON_VERSION}. "
                "Re-record the trace with this version, or convert it"
            )
        rvs: dict[str, Any] = {}
        insts: list[Instruction] = []
        for entry in data["insts"]:
            kind_name, inputs, attrs, outputs = entry
            kind = InstructionKind.get(kind_name)
            inputs = [_from_json_input(x, rvs, kind_name) for x in inputs]
            outs = []
            for name in outputs:
                rv = rv_class(name[0])()
                rvs[name] = rv
                outs.append(rv)
            insts.append(Instruction(kind, inputs, _freeze_json(attrs), outs))
        decisions = {insts[i]: _freeze_json(d) for i, d in data.get("decisions", [])}
        return Trace(insts, decisions)


def _without_postproc(insts: Sequence[Instruction]) -> list[Instruction]:
    out = []
    for inst in insts:
        if inst.kind.name == "enter_postproc":
            break
        out.append(inst)
    return out


def _flat(items: Any):
    for x in items:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def translate_rvs(x: Any, rv_map: dict[int, Any]) -> Any:
    """An instruction input with every random variable replaced by ``rv_map[id(rv)]`` (nested
    lists followed): how a trace's inputs are moved onto the schedule it is replayed on.

    Example:
        >>> # inputs = [translate_rvs(x, rv_map) for x in inst.inputs]   # rv_map: id(old rv) -> new rv
    """
    if isinstance(x, RV_TYPES):
        try:
            return rv_map[id(x)]
        except KeyError:
            raise ValueError(f"trace uses {x!r} before any instruction defines it") from None
    if isinstance(x, (list, tuple)):
        return [translate_rvs(v, rv_map) for v in x]
    return x


class _Namer:
    """Names RVs in order of definition: b0, l1, v2, ... (one counter, TVM style)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def define(self, rv: Any) -> str:
        name = self.names.get(id(rv))
        if name is None:
            name = f"{rv.prefix}{len(self.names)}"
            self.names[id(rv)] = name
        return name

    def text(self, x: Any) -> str:
        if isinstance(x, RV_TYPES):
            return self.names.get(id(x)) or self.define(x)
        if isinstance(x, (list, tuple)):
            return "[" + ", ".join(self.text(v) for v in x) + "]"
        if isinstance(x, str):
            return '"' + x + '"'
        return repr(x)

    def json(self, x: Any) -> Any:
        if isinstance(x, RV_TYPES):
            return self.names.get(id(x)) or self.define(x)
        if isinstance(x, (list, tuple)):
            return [self.json(v) for v in x]
        if isinstance(x, str):
            return {"str": x}
        return _jsonable(x)


def _from_json_input(x: Any, rvs: dict[str, Any], kind_name: str) -> Any:
    if isinstance(x, str):
        try:
            return rvs[x]
        except KeyError:
            raise ValueError(f"trace JSON: instruction {kind_name!r} uses {x!r} before it is defined") from None
    if isinstance(x, dict) and "str" in x:
        return x["str"]
    if isinstance(x, list):
        return [_from_json_input(v, rvs, kind_name) for v in x]
    return x


def _jsonable(x: Any) -> Any:
    if isinstance(x, tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if hasattr(x, "item") and not isinstance(x, (int, float, str, bool)):  # numpy scalars
        return x.item()
    return x


def _freeze_json(x: Any) -> Any:
    # JSON gives lists; keep them as lists (decisions and attrs are compared by value).
    return x
