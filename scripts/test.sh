#!/usr/bin/env bash
# Set up Ingot with its development extras and run the whole test suite, then the docstring
# examples of the package (--doctest-modules on ingot/; conftest.py lists what is left out).
# Usage: bash scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e ".[dev]"
# Kernels compiled by the tests go to a fresh cache so a run never depends on an old one.
export INGOT_CACHE_DIR="${INGOT_CACHE_DIR:-$(mktemp -d -t ingot-cache-XXXXXX)}"
set +e
# Tests run in parallel, one worker per core (at most 4): most are single-threaded gcc + Python, so
# two workers halve CI time on a 2-core machine. Kernels that fork OpenMP threads share the cores.
python3 -m pytest tests -p no:cacheprovider -n auto --maxprocesses 4 "$@"
status=$?
# The package's docstring examples (STYLE.md 14), in a run of their own: --doctest-modules over
# tests/ would import every tests/*/conftest.py as the same module name "conftest" and fail.
python3 -m pytest ingot --doctest-modules -p no:cacheprovider
doctest_status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "no tests were collected" >&2
fi
if [ "$status" -eq 0 ]; then
  status=$doctest_status
fi
exit "$status"
