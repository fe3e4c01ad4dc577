# Sourced by test.sh and bench.sh: installs what is missing, then builds bankops._C in place.
# Nothing is installed where it is already present (the GPU machine has no network).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
# Console scripts pip installs (ninja) land beside this Python, which PATH may not list.
PATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"

missing=()
for module in "$@" torch setuptools; do
  "$PY" -c "import $module" 2>/dev/null || missing+=("$module")
done
command -v ninja >/dev/null 2>&1 || missing+=(ninja)
if ((${#missing[@]})); then
  echo "bankops: installing ${missing[*]}"
  "$PY" -m pip install --quiet "${missing[@]}"
fi
# tests/test_properties.py needs hypothesis: installed where pytest is asked for, on its own so
# that a machine without a network skips that file (it says why) instead of stopping here.
if [[ " $* " == *" pytest "* ]] && ! "$PY" -c "import hypothesis" 2>/dev/null; then
  echo "bankops: installing hypothesis"
  "$PY" -m pip install --quiet hypothesis || echo "bankops: no hypothesis; tests/test_properties.py skips"
fi

start=$(date +%s)
"$PY" setup.py build_ext --inplace >build.log 2>&1 || { tail -n 60 build.log; echo "bankops: build failed (build.log)"; exit 1; }
grep -h "^bankops:" build.log || true
echo "bankops: built in $(($(date +%s) - start)) s"
