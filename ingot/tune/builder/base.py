"""`Builder`: turns scheduled candidates into loadable artifacts (TVM's ``ms.Builder``).

Example:
    >>> BuilderResult(artifact_path="/tmp/x.so").ok
    True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence


@dataclass(frozen=True)
class BuilderInput:
    """A scheduled IRModule (or PrimFunc) to build for ``target`` (a string or Target).

    Example:
        >>> # BuilderInput(sch.mod, "llvm -num-cores=2")
    """

    mod: Any
    target: Any


@dataclass(frozen=True)
class BuilderResult:
    """Path of the built shared library, or the error message.

    Example:
        >>> BuilderResult(error_msg="CompileError: ...").ok
        False
    """

    artifact_path: Optional[str] = None
    error_msg: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.artifact_path is not None and self.error_msg is None


class Builder:
    """Base class: ``build(inputs) -> results`` (same order, one result per input).

    Example:
        >>> # results = builder.build([BuilderInput(mod, "llvm")])
    """

    def build(self, inputs: Sequence[BuilderInput]) -> "list[BuilderResult]":
        raise NotImplementedError

    def shutdown(self) -> None:
        """Release worker processes (no-op by default)."""
