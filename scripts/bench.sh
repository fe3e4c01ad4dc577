#!/usr/bin/env bash
# The main job: install what is missing, build, time every operator x layout x dtype against
# its torch peer, write bench/results.json, bench/RESULTS.md and bench/plots/.
set -euo pipefail
source "$(dirname "$0")/prepare.sh" matplotlib
"$PY" bench/run.py "$@"
