"""Pytest setup for the doctest run over the package (``pytest --doctest-modules ingot``, part of
scripts/test.sh): docstring examples are tests too (STYLE.md 14).

Note: the examples of the modules listed in ``collect_ignore`` are left out while those modules
are being rewritten (issue 20, "schedules without lab notes", and the CPU-portability work on the
schedule rules): their examples still describe the old knobs. Take a path out of the list when
its rewrite lands and its examples pass (``pytest --doctest-modules <path>``).
"""
collect_ignore = ["ingot/ops/schedule", "ingot/tune/schedule_rule"]
