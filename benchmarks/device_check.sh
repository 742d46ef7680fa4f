#!/usr/bin/env bash
# The smoke on an NVIDIA GPU (fp32 and bf16), compared with a CPU reference made in the same run.
#
# From a fresh clone:   bash benchmarks/device_check.sh [OUT_DIR]
# It creates its own venv (.venv-device-check, with --system-site-packages so that a torch already
# installed on the machine is reused), installs torch (a CUDA build, from pip) and transformers only if
# they are missing, then `pip install -e .[smoke]`, and prints the comparison tables.
# Environment: PYTHON (default python3), VENV (default .venv-device-check), TORCH_SPEC (default torch),
#              ENVKIT_DEVICE (default cuda), SKIP_VENV=1 to use $PYTHON as it is,
#              COLL_MAX_SIZE (default 64MiB: the collective profile's largest size, with 2 or more GPUs).
# Budget: under 5 minutes once the packages are installed (each step has a timeout).
# Exit status: 0 when every smoke passed and every comparison is within the default thresholds.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$REPO/out/device-check}"
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-$REPO/.venv-device-check}"
DEVICE="${ENVKIT_DEVICE:-cuda}"
T0=$(date +%s)
status=0

say() { printf '\n== %s (t=%ss)\n' "$*" "$(( $(date +%s) - T0 ))"; }

cd "$REPO" || exit 2
mkdir -p "$OUT"

if [ "${SKIP_VENV:-0}" != "1" ]; then
  say "venv $VENV"
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv --system-site-packages "$VENV" || { echo "cannot create the venv"; exit 2; }
  fi
  PY="$VENV/bin/python"
  timeout 60 "$PY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() or '$DEVICE' != 'cuda' else 1)" 2>/dev/null; then
    say "installing ${TORCH_SPEC:-torch} (CUDA build from pip)"
    timeout 900 "$PY" -m pip install -q "${TORCH_SPEC:-torch}" || { echo "cannot install torch"; exit 2; }
  fi
  if ! "$PY" -c "import transformers, accelerate, safetensors, tokenizers, numpy" 2>/dev/null; then
    say "installing transformers"
    timeout 600 "$PY" -m pip install -q transformers accelerate safetensors tokenizers numpy || { echo "cannot install transformers"; exit 2; }
  fi
  say "pip install -e .[smoke]"
  if ! timeout 300 "$PY" -m pip install -q -e ".[smoke]"; then
    echo "warning: pip install -e .[smoke] failed (offline?); running envkit from the source tree instead"
    timeout 300 "$PY" -m pip install -q pydantic typer rich packaging PyYAML jinja2 >/dev/null 2>&1 || true
    export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
  fi
else
  PY="$PYTHON"
  export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
fi

"$PY" - <<'EOF'
import torch, transformers
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), transformers {transformers.__version__}")
if torch.cuda.is_available():
    for i in range(torch.cuda.device_count()):
        print(f"  cuda:{i} {torch.cuda.get_device_name(i)}")
else:
    print("  no CUDA device visible")
EOF

export ENVKIT_CACHE_DIR="$OUT/cache"
envkit() { timeout "$1" "$PY" -m envkit "${@:2}"; }

run_smoke() {  # name, args...
  local name=$1; shift
  say "smoke $name"
  envkit 240 -q smoke --layers --repeat 20 --out "$OUT/$name" "$@"
  local rc=$?
  echo "exit $rc"
  [ $rc -eq 0 ] || status=1
  return $rc
}

run_smoke cpu-fp32 --device cpu --dtype fp32
run_smoke "$DEVICE-fp32" --device "$DEVICE" --dtype fp32
run_smoke "$DEVICE-bf16" --device "$DEVICE" --dtype bf16
NGPU=$("$PY" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)" 2>/dev/null || echo 0)
if [ "$DEVICE" = "cuda" ] && [ "${NGPU:-0}" -ge 2 ]; then
  run_smoke "$DEVICE-bf16-nproc2" --device "$DEVICE" --dtype bf16 --nproc 2
fi
# the collective profile with nccl across every GPU present (nccl needs one GPU per rank: 2 or more);
# every result is checked, the table and report.json's `collectives` section go to $OUT/$DEVICE-collectives
if [ "$DEVICE" = "cuda" ] && [ "${NGPU:-0}" -ge 2 ]; then
  say "collective profile: nccl across $NGPU GPUs, 8 KiB to ${COLL_MAX_SIZE:-64MiB}"
  envkit 600 -q smoke --device cuda --dtype fp32 --repeat 3 --nproc "$NGPU" --collectives \
    --max-size "${COLL_MAX_SIZE:-64MiB}" --out "$OUT/$DEVICE-collectives"
  rc=$?
  echo "exit $rc"
  [ $rc -eq 0 ] || status=1
else
  say "collective profile: skipped ($NGPU GPU(s) visible; nccl needs 2 or more)"
fi

for cand in "$DEVICE-fp32" "$DEVICE-bf16"; do
  if [ -f "$OUT/cpu-fp32/logits.safetensors" ] && [ -f "$OUT/$cand/logits.safetensors" ]; then
    say "compare cpu-fp32 (ref) with $cand"
    envkit 120 compare "$OUT/cpu-fp32" "$OUT/$cand" --html "$OUT/compare-cpu-fp32-vs-$cand.html"
    rc=$?
    echo "exit $rc"
    [ $rc -eq 0 ] || status=1
    envkit 120 compare "$OUT/cpu-fp32" "$OUT/$cand" --json > "$OUT/compare-cpu-fp32-vs-$cand.json" 2>/dev/null
  else
    say "compare cpu-fp32 with $cand: skipped (a run is missing)"
    status=1
  fi
done

say "done: status $status; outputs in $OUT"
exit $status
