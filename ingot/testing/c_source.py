"""Reading the C that Ingot generates, for tests that check the form of a kernel.

Example:
    >>> src = "/* end of Ingot C prelude */ void f() { for (int32_t k = 0; k < 4; ++k) { a[k] = 0; } }"
    >>> first_loop_body(src, "k")
    '{ a[k] = 0; }'
"""
from __future__ import annotations

import re

__all__ = ["first_loop_body"]

PRELUDE_END = "end of Ingot C prelude"


def first_loop_body(src: str, var: str) -> str:
    """The body (braces included, matched) of the first ``for (<type> var = ...)`` loop of the kernels
    in ``src``: the search starts after the C prelude, whose own loops are not kernel code.

    Example:
        >>> first_loop_body("end of Ingot C prelude\\nfor (int64_t i = 0; i < n; ++i) { if (i) { x(); } }", "i")
        '{ if (i) { x(); } }'
    """
    found = re.compile(rf"for \(\w+ {re.escape(var)} = ").search(src, src.index(PRELUDE_END))
    if found is None:
        raise ValueError(f"no loop over {var!r} after the C prelude")
    pos = src.index("{", found.start())
    depth = 0
    for end in range(pos, len(src)):
        depth += {"{": 1, "}": -1}.get(src[end], 0)
        if depth == 0:
            return src[pos:end + 1]
    raise ValueError(f"unbalanced braces after the loop over {var!r}")
