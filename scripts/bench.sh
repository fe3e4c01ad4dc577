#!/usr/bin/env bash
# The main job: install what is missing, build, time every operator x layout x dtype against
# its torch peer and write the GPU's results (bench/run.py; arguments go to it). Without a GPU
# it builds the CPU reference alone (BANKOPS_CPU_ONLY=0 builds the CUDA sources anyway) and
# times that instead.
set -euo pipefail
source "$(dirname "$0")/prepare.sh"
install_missing matplotlib
if [[ -z ${BANKOPS_CPU_ONLY:-} ]] && ! gpu_visible; then
  export BANKOPS_CPU_ONLY=1
fi
build
"$PY" bench/run.py "$@"
