#!/usr/bin/env bash
# One GPU, ≈ 8 minutes: install the carried wheels (benchmarks/gpu/fetch_wheels.sh made .whl/), then run the acceptance script into ${1:-$OUT}.
set -euo pipefail; cd "$(dirname "$0")/../.."; if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site; fi; exec python3 benchmarks/gpu/acceptance.py "${1:-${OUT:?give an output folder}}" "${@:2}"
