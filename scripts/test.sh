#!/usr/bin/env bash
# Set up Ingot with its development extras and run the whole test suite, and the docstring
# examples of the package (--doctest-modules on ingot/; conftest.py lists what is left out).
# Usage: bash scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e ".[dev]"
# Kernels compiled by the tests go to a fresh cache so a run never depends on an old one.
export INGOT_CACHE_DIR="${INGOT_CACHE_DIR:-$(mktemp -d -t ingot-cache-XXXXXX)}"
set +e
python3 -m pytest tests ingot --doctest-modules -p no:cacheprovider "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "no tests were collected" >&2
fi
exit "$status"
