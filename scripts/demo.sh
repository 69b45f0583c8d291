#!/usr/bin/env bash
# Set up Ingot with its extras and run the demo: compile a model and run it beside ONNX Runtime.
# Usage: bash scripts/demo.sh [demo args, e.g. --size 96]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e ".[dev]"
exec python3 examples/demo.py "$@"
