#!/usr/bin/env bash
# A Hugging Face Space dry run: a clean virtual environment installed as a Space installs it
# (pre-requirements.txt, then requirements.txt), a fresh HOME and cache, SPACE_ID set,
# `python app.py` on 0.0.0.0:7860; scripts/space_check.py then measures the page, the pair's
# load, peak memory and one run through gradio_client.
#
# Usage: scripts/space_check.sh [--spaces | --both]
#   (none)    a CPU basic Space
#   --spaces  a ZeroGPU Space as far as one can run here: the real `spaces` package with
#             SPACES_ZERO_GPU set (its CUDA emulation on this CPU), the pair placed on CUDA at
#             start, the grants runs would ask for; no GPU service answers here, so the run is
#             expected to be refused by ZeroGPU's client, not to crash
#   --both    both passes, each with a fresh HOME and cache (the venv is shared)
# SPACE_CHECK_WHEELS=DIR: wheels pip may take instead of building (llama-cpp-python's portable
# wheel, built earlier from the same requirements line, saves its 18-minute build).
# Exits non-zero if any pass fails: the page not answering within 60 s, the pair not ready
# within 20 min, peak memory over 16 GB, or a run without a trace (ZeroGPU: a run that crashed).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
  "") passes=(plain) ;;
  --spaces) passes=(spaces) ;;
  --both) passes=(plain spaces) ;;
  *) sed -n '2,19p' "$0"; exit 2 ;;
esac
spaces_pin=$(grep -E '^spaces==' "$repo/requirements-dev.txt")
work=$(mktemp -d /tmp/space-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
step() { echo "== [$(( $(date +%s) - start ))s] $*"; }

step "clean virtual environment in $work/venv"
python3.11 -m venv "$work/venv"
py="$work/venv/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
wheels=()
if [ -n "${SPACE_CHECK_WHEELS:-}" ]; then wheels=(--find-links "$SPACE_CHECK_WHEELS"); fi
step "pip install -r pre-requirements.txt (the torch ZeroGPU runs, as a Space installs it first)"
"$py" -m pip install -q "${wheels[@]}" -r "$repo/pre-requirements.txt"
step "pip install -r requirements.txt"
"$py" -m pip install -q "${wheels[@]}" -r "$repo/requirements.txt"
"$py" -c 'import torch, llama_cpp; print("torch", torch.__version__, "llama-cpp-python", llama_cpp.__version__)'
step "installed in $(( $(date +%s) - start )) s"

status=0
for pass in "${passes[@]}"; do
  if [ "$pass" = spaces ]; then
    step "pip install $spaces_pin"
    "$py" -m pip install -q "$spaces_pin"
    label="requirements.txt + $spaces_pin, SPACES_ZERO_GPU=true"
  else
    label="requirements.txt"
  fi
  step "pass: $label (fresh HOME and cache)"
  zero=(); if [ "$pass" = spaces ]; then zero=(--zero-gpu); fi
  "$py" "$repo/scripts/space_check.py" --work "$work/$pass" --label "$label" "${zero[@]}" || status=1
  cp "$work/$pass/result.json" "/tmp/space-check-$pass.json" 2>/dev/null && echo "figures: /tmp/space-check-$pass.json"
  cp "$work/$pass/app.log" "/tmp/space-check-$pass.log" 2>/dev/null && echo "the app's log: /tmp/space-check-$pass.log"
done
step "done"
exit $status
