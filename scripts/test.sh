#!/usr/bin/env bash
# The tests: install what is missing, build, run pytest (extra arguments go to pytest).
set -euo pipefail
source "$(dirname "$0")/prepare.sh" pytest numpy matplotlib
"$PY" -m pytest tests -q -rs "$@"
