#!/usr/bin/env bash
# The tests: install what is missing, build (the CUDA sources wherever nvcc and a CUDA torch
# are, GPU or not: CI's compile check; BANKOPS_CPU_ONLY=1 skips them), run pytest. Arguments
# go to pytest; those that name tests (paths, node ids) replace the default selection, tests/.
set -euo pipefail
source "$(dirname "$0")/prepare.sh"
install_missing pytest numpy matplotlib
# tests/test_properties.py needs hypothesis: installed on its own so that a machine without a
# network skips that file (it says why) instead of stopping here.
if ! "$PY" -c "import hypothesis" 2>/dev/null; then
  echo "bankops: installing hypothesis"
  "$PY" -m pip install hypothesis || echo "bankops: no hypothesis; tests/test_properties.py skips"
fi
build
selection=(tests)
for arg in "$@"; do
  if [[ $arg != -* && -e ${arg%%::*} ]]; then selection=(); fi
done
"$PY" -m pytest "${selection[@]}" -q "$@"
