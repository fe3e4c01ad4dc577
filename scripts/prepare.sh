# Sourced by test.sh, bench.sh and sanitize.sh: install_missing and build, which they call.
# Nothing is installed where it is already present (the GPU machine has no network).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
# Console scripts pip installs (ninja) land beside this Python, which PATH may not list.
PATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"

# install_missing MODULE...: pip installs those of the modules (and torch, setuptools, ninja)
# that are not importable, printing pip's own progress.
install_missing() {
  local missing=() module
  for module in "$@" torch setuptools; do
    "$PY" -c "import $module" 2>/dev/null || missing+=("$module")
  done
  command -v ninja >/dev/null 2>&1 || missing+=(ninja)
  if ((${#missing[@]})); then
    echo "bankops: installing ${missing[*]}"
    if [[ " ${missing[*]} " == *" torch "* ]]; then
      echo "bankops: torch with CUDA is about 5.6 GB; without a GPU the CPU wheel is under 1 GB (README, Install)"
    fi
    "$PY" -m pip install "${missing[@]}"
  fi
}

# gpu_visible: whether torch sees a CUDA GPU.
gpu_visible() {
  "$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null
}

# build: bankops._C in place (setup.py; BANKOPS_CPU_ONLY chooses the CUDA sources or not), the
# log in build.log. Prints ninja's line for each file compiled as it is done and, while a file
# takes long, how long the build has run; a failed build prints its first error.
build() {
  local log=$PWD/build.log start=$SECONDS seen=0 quiet_since=$SECONDS lines pid rc
  echo "bankops: building bankops._C (log: $log)"
  "$PY" setup.py build_ext --inplace >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    lines=$(wc -l <"$log")
    if ((lines > seen)); then
      # "[3/9] c++ ... -c /root/ops/gemm.cpp -o ..." -> "bankops: [3/9] ops/gemm.cpp"
      if sed -n "$((seen + 1)),${lines}p" "$log" | grep -E '^\[[0-9]+/[0-9]+\] |^bankops:| -shared ' |
          sed -E "s#^(\[[0-9]+/[0-9]+\]) .* -c ([^ ]+) -o .*#bankops: \1 \2#; s#^.* -shared .*#bankops: linking#;
                  s#$PWD/##g"; then
        quiet_since=$SECONDS
      fi
      seen=$lines
    fi
    if ((SECONDS - quiet_since >= 20)); then
      echo "bankops: still compiling, $((SECONDS - start)) s so far"
      quiet_since=$SECONDS
    fi
  done
  wait "$pid" && rc=0 || rc=$?
  if ((rc)); then
    local first
    # the compiler's first error, else ninja's or Python's, else setup.py's own message
    first=$( (grep -n -m1 -E '\berror\b' "$log" || grep -n -m1 -E '^FAILED|Traceback|^bankops: ' "$log") | cut -d: -f1)
    echo "bankops: the build failed (exit $rc) after $((SECONDS - start)) s;" \
      "its first error (line ${first:-?} of $log):"
    if [[ -n $first ]]; then  # up to 8 lines, ending before ninja's next line
      sed -n "${first},$((first + 7))p" "$log" | sed -E '2,${/^\[[0-9]+\/[0-9]+\] |^ninja: /,$d}'
    else
      tail -n 20 "$log"
    fi
    exit 1
  fi
  echo "bankops: built in $((SECONDS - start)) s"
}
