"""`ingot.driver`: `lower` and `build` for tensor programs (TVM's ``tvm.driver``).

`build` lives in ``build.py`` (code generation) and is loaded on first use, so importing the
driver for `lower` does not pull in the code generators.

Example:
    >>> from ingot.driver import lower
    >>> callable(lower)
    True
"""
from __future__ import annotations

import importlib
from typing import Any

from .lower import get_lowering_pipeline, lower

__all__ = ["lower", "get_lowering_pipeline", "build"]


def __getattr__(name: str) -> Any:
    if name == "build":
        value = importlib.import_module("ingot.driver.build").build
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ingot.driver' has no attribute {name!r}")
