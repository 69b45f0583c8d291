"""Compilation targets (TVM's ``tvm.target.Target``).

Note: a target is described by a TVM-style string ``"<kind> -key=value -flag ..."``. Kinds
``"llvm"`` and ``"c"`` both mean "CPU through the C backend" (Ingot prints C and compiles it with
the system compiler; the name ``llvm`` is accepted because it is what TVM users write);
``"cuda"`` means NVIDIA GPUs. The canonical string (``str(target)``) sorts options, so two
targets that mean the same thing compare and hash equal — the target is part of cache keys.

Example:
    >>> t = Target("llvm -mcpu=znver5 -num-cores=2")
    >>> (t.kind, t.mcpu, t.num_cores, t.vector_width_bits, t.is_cpu)
    ('llvm', 'znver5', 2, 512, True)
    >>> str(Target("cuda -arch=sm_90"))
    'cuda -arch=sm_90'
"""
from __future__ import annotations

import os
import re
import shlex
import threading
from dataclasses import replace
from functools import lru_cache
from typing import Any, Mapping

from ingot.cpu_model import CpuModel, host_cpu, named_cpu

__all__ = ["Target", "TargetError", "host_vector_width_bits"]


class TargetError(ValueError):
    """A malformed target string or an unknown kind/option."""


# kind -> {option: type}; "bool" options are flags (``-fast-math``) or ``-opt=true``.
_OPTION_TYPES: dict[str, dict[str, str]] = {
    "llvm": {"mcpu": "str", "mtune": "str", "mtriple": "str", "mattr": "list", "num-cores": "int",
             "vector-width": "int", "opt-level": "int", "fast-math": "bool", "keys": "list",
             "link-params": "bool", "cc": "str", "host": "str"},
    "cuda": {"arch": "str", "max_threads_per_block": "int", "max_shared_memory_per_block": "int",
             "thread_warp_size": "int", "max_num_threads": "int", "keys": "list", "host": "str"},
}
_OPTION_TYPES["c"] = dict(_OPTION_TYPES["llvm"])
_KINDS = tuple(_OPTION_TYPES)

def host_vector_width_bits() -> int:
    """Widest SIMD register of this machine (AVX-512 → 512, AVX2 → 256, else 128): `host_cpu`'s.

    Example:
        >>> host_vector_width_bits() in (128, 256, 512)
        True
    """
    return host_cpu().vector_bits


def _parse_value(kind: str, key: str, raw: "str | None", text: str) -> Any:
    types = _OPTION_TYPES[kind]
    if key not in types:
        raise TargetError(
            f"target {text!r}: unknown option -{key} for kind {kind!r}; valid options are "
            + ", ".join(f"-{k}" for k in sorted(types))
        )
    typ = types[key]
    if typ == "bool":
        if raw is None or raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise TargetError(f"target {text!r}: option -{key} expects true/false, got {raw!r}")
    if raw is None or raw == "":
        raise TargetError(f"target {text!r}: option -{key} needs a value, e.g. -{key}=...")
    if typ == "int":
        try:
            value = int(raw)
        except ValueError:
            raise TargetError(f"target {text!r}: option -{key} expects an integer, got {raw!r}") from None
        if value <= 0:
            raise TargetError(f"target {text!r}: option -{key} must be positive, got {value}")
        return value
    if typ == "list":
        return tuple(v for v in raw.split(",") if v)
    return raw


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return shlex.quote(str(value)) if " " in str(value) else str(value)


class Target:
    """A compilation target: ``Target("llvm -mcpu=znver5 -num-cores=2")``, ``Target("cuda")``.

    Accepts a string, a dict ``{"kind": "llvm", "mcpu": "znver5", "num-cores": 2}``, or another
    Target. Fields: ``kind``, ``attrs`` (options without the leading ``-``), ``mcpu``,
    ``num_cores`` (default ``os.cpu_count()``), ``vector_width_bits`` (``-vector-width``, else
    from ``-mcpu``, else detected from the host for CPU targets), ``is_cpu``, ``is_cuda``.
    Use as a context manager to make it `Target.current()`.

    Example:
        >>> with Target("llvm -num-cores=2") as t:
        ...     Target.current() is t
        True
        >>> Target("llvm -num-cores=2") == Target({"kind": "llvm", "num-cores": 2})
        True
    """

    __slots__ = ("kind", "attrs", "_canonical")
    _local = threading.local()

    def __init__(self, spec: "str | Mapping[str, Any] | Target", host: "str | Mapping[str, Any] | Target | None" = None):
        """``host`` (or ``-host=...``, TVM's spelling) is the target of the code that launches kernels:
        kept for CUDA (default ``llvm``); a CPU target is its own host, so there it must be a CPU kind
        and `host` returns the target itself.

        Example:
            >>> Target("llvm", host="llvm") == Target("llvm -host=llvm") == Target("llvm")
            True
            >>> str(Target("cuda", host="llvm").host)
            'llvm'
        """
        if isinstance(spec, Target):
            kind, attrs = spec.kind, dict(spec.attrs)
        elif isinstance(spec, Mapping):
            kind, attrs = self._from_dict(dict(spec))
        elif isinstance(spec, str):
            kind, attrs = self._from_string(spec)
        else:
            raise TargetError(
                f"Target expects a string such as 'llvm -mcpu=znver5' or a dict, got {type(spec).__name__}"
            )
        if host is not None:
            attrs["host"] = host if isinstance(host, str) else str(Target(host))
        if "host" in attrs:
            host_target = Target(attrs["host"])
            if kind in ("llvm", "c"):
                if not host_target.is_cpu:
                    raise TargetError(f"target {kind!r} with host {attrs['host']!r}: a CPU target is its own host; "
                                      f"give a CPU host (llvm or c) or leave host out")
                del attrs["host"]  # the CPU target is its own host
            else:
                attrs["host"] = str(host_target)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "attrs", dict(sorted(attrs.items())))
        parts = [kind] + [
            f"-{k}" if v is True else f"-{k}={_format_value(v)}" for k, v in self.attrs.items()
        ]
        object.__setattr__(self, "_canonical", " ".join(parts))

    # -- parsing ----------------------------------------------------------------------------------
    @staticmethod
    def _check_kind(kind: str, text: str) -> str:
        if kind not in _KINDS:
            raise TargetError(f"target {text!r}: unknown kind {kind!r}; valid kinds are {', '.join(_KINDS)}")
        return kind

    @classmethod
    def _from_string(cls, text: str) -> "tuple[str, dict[str, Any]]":
        try:
            tokens = shlex.split(text)
        except ValueError as err:
            raise TargetError(f"target {text!r} is malformed: {err}") from None
        if not tokens:
            raise TargetError(f"empty target string; valid kinds are {', '.join(_KINDS)}")
        kind = cls._check_kind(tokens[0], text)
        attrs: dict[str, Any] = {}
        for tok in tokens[1:]:
            match = re.fullmatch(r"--?([A-Za-z_][A-Za-z0-9_\-]*)(?:=(.*))?", tok)
            if match is None:
                raise TargetError(
                    f"target {text!r}: malformed option {tok!r}; write options as -key=value, "
                    f"e.g. '{kind} -{next(iter(_OPTION_TYPES[kind]))}=...'"
                )
            key, raw = match.group(1), match.group(2)
            attrs[key] = _parse_value(kind, key, raw, text)
        return kind, attrs

    @classmethod
    def _from_dict(cls, spec: dict) -> "tuple[str, dict[str, Any]]":
        text = repr(spec)
        if "kind" not in spec:
            raise TargetError(f"target dict {text} needs a 'kind' ({', '.join(_KINDS)})")
        kind = cls._check_kind(str(spec.pop("kind")), text)
        attrs = {}
        for key, value in spec.items():
            key = str(key).lstrip("-")
            raw = None if value is True else (",".join(value) if isinstance(value, (list, tuple)) else str(value))
            attrs[key] = _parse_value(kind, key, raw, text)
        return kind, attrs

    # -- fields -----------------------------------------------------------------------------------
    def __setattr__(self, name, value):
        raise AttributeError("Target is immutable; build a new one from a string or dict")

    @property
    def host(self) -> "Target":
        """The target of the host code (TVM's ``target.host``): the target itself for CPU targets,
        ``-host`` (default ``llvm``) for CUDA.

        Example:
            >>> Target("llvm -num-cores=2").host == Target("llvm -num-cores=2")
            True
        """
        if self.is_cpu:
            return self
        return Target(self.attrs.get("host", "llvm"))

    @property
    def is_cpu(self) -> bool:
        """True for the CPU kinds (``llvm``, ``c``)."""
        return self.kind in ("llvm", "c")

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def mcpu(self) -> "str | None":
        """The ``-mcpu`` option (``None``: the host CPU)."""
        return self.attrs.get("mcpu")

    @property
    def arch(self) -> "str | None":
        """The CUDA ``-arch`` option (e.g. ``sm_90``)."""
        return self.attrs.get("arch")

    @property
    def num_cores(self) -> int:
        """Threads for parallel loops: ``-num-cores``, else ``os.cpu_count()``."""
        return int(self.attrs.get("num-cores") or os.cpu_count() or 1)

    @property
    def cpu(self) -> CpuModel:
        """The CPU model schedules derive their tiles from (`ingot.cpu_model`): ``-mcpu``'s (the host's
        without one), with ``-num-cores`` as its cores, ``-vector-width`` as its vector width,
        ``-mattr`` adding or removing features and ``-mtune`` as gcc's instruction tuning (the schedules
        do not change with it; what gcc does with their code does: compare ``-mtune=haswell`` with
        ``-mtune=znver3`` on a Zen core, `ingot.cpu_model.ZEN_AVX2_MTUNE`).

        Example:
            >>> c = Target("llvm -mcpu=haswell -num-cores=2").cpu
            >>> (c.name, c.isa, c.vector_registers, c.cores)
            ('haswell', 'avx2', 16, 2)
            >>> Target("llvm -mcpu=znver3 -mtune=znver3").cpu.mtune
            'znver3'
        """
        if not self.is_cpu:
            raise TargetError(f"target {self._canonical!r} is not a CPU target: it has no CPU model")
        cpu = _cpu_model(self.mcpu or "native", self.attrs.get("vector-width"), self.attrs.get("mattr") or (),
                         self.num_cores)
        if self.attrs.get("mtune"):
            cpu = replace(cpu, mtune=str(self.attrs["mtune"]))
        return cpu

    @property
    def vector_width_bits(self) -> int:
        """SIMD register width used to size vector loops (bits).

        Example:
            >>> Target("llvm -mcpu=haswell").vector_width_bits
            256
        """
        if self.is_cuda:
            return 128
        return self.cpu.vector_bits

    def vector_lanes(self, dtype: Any) -> int:
        """How many elements of ``dtype`` fill one vector register.

        Example:
            >>> Target("llvm -mcpu=znver5").vector_lanes("float32")
            16
        """
        from ingot.ir.dtype import DataType

        return max(1, self.vector_width_bits // max(8, DataType(dtype).bits))

    def export(self) -> dict:
        """The target as a dict (``{"kind": ..., **attrs}``), accepted back by `Target`."""
        return {"kind": self.kind, **{k: (list(v) if isinstance(v, tuple) else v) for k, v in self.attrs.items()}}

    # -- context ----------------------------------------------------------------------------------
    @classmethod
    def current(cls, allow_none: bool = True) -> "Target | None":
        """The innermost target entered with ``with target:`` (``None`` if none).

        Example:
            >>> Target.current() is None
            True
        """
        stack = getattr(cls._local, "stack", None)
        if stack:
            return stack[-1]
        if not allow_none:
            raise TargetError("no current target: wrap the call in `with ingot.target.Target('llvm'):`")
        return None

    def __enter__(self) -> "Target":
        stack = getattr(Target._local, "stack", None)
        if stack is None:
            stack = Target._local.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        Target._local.stack.pop()

    # -- value semantics --------------------------------------------------------------------------
    def __str__(self) -> str:
        return self._canonical

    def __repr__(self) -> str:
        return f"Target({self._canonical!r})"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = Target(other)
            except TargetError:
                return False
        return isinstance(other, Target) and other._canonical == self._canonical

    def __hash__(self) -> int:
        return hash(self._canonical)

    def __reduce__(self):
        return (Target, (self._canonical,))


@lru_cache(maxsize=256)
def _cpu_model(mcpu: str, vector_width: "int | None", mattr: tuple, cores: int) -> CpuModel:
    try:
        cpu = named_cpu(mcpu)
    except ValueError as err:
        raise TargetError(str(err)) from None
    if mattr:
        feats = set(cpu.features)
        for entry in mattr:
            (feats.add if entry.startswith("+") else feats.discard)(entry[1:])
        cpu = replace(cpu, features=frozenset(feats))
        if "avx512f" not in feats and cpu.vector_bits > 256:
            cpu = replace(cpu, vector_bits=256 if "avx" in feats else 128, vector_registers=16)
        elif "avx" not in feats and "avx512f" not in feats:
            cpu = replace(cpu, vector_bits=128)
    if vector_width:
        # as TVM's -vector-width: the vector loops' width, whatever the CPU (wider than its
        # registers: GCC splits each vector operation)
        cpu = replace(cpu, vector_bits=int(vector_width))
    return cpu.with_cores(cores)


def as_target(target: "str | Mapping[str, Any] | Target | None") -> Target:
    """``target`` as a `Target`; ``None`` means `Target.current()` or ``"llvm"``.

    Example:
        >>> as_target("c").kind
        'c'
    """
    if target is None:
        return Target.current() or Target("llvm")
    return target if isinstance(target, Target) else Target(target)
