"""`ingot.driver`: `lower` and `build` for tensor programs (TVM's ``tvm.driver``).

`build` lives in ``build.py`` (code generation) and is loaded on first use, so importing the
driver for `lower` does not pull in the code generators.

Example:
    >>> from ingot.driver import lower
    >>> callable(lower)
    True
"""
from __future__ import annotations

from ingot.support import lazy_exports

from .lower import get_lowering_pipeline, lower

__all__ = ["lower", "get_lowering_pipeline", "build"]


# build loads the code generators: on first use only.
__getattr__, __dir__ = lazy_exports(__name__, {"build": ("ingot.driver.build", "build")})
