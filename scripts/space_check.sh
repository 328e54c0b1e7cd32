#!/usr/bin/env bash
# A Hugging Face Space dry run: a clean virtual environment from requirements.txt, a fresh
# HOME and cache, SPACE_ID set, `python app.py` on 0.0.0.0:7860; scripts/space_check.py then
# measures the page, the pair's load, peak memory and one run through gradio_client.
#
# Usage: scripts/space_check.sh [--spaces | --both]
#   (none)    requirements.txt only, as a CPU basic Space installs it
#   --spaces  with the `spaces` package added, as a ZeroGPU Space has it
#   --both    both passes, each with a fresh HOME and cache (the venv is shared)
# Exits non-zero if any pass fails: the page not answering within 60 s, the pair not ready
# within 20 min, peak memory over 16 GB, or a run without a trace.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
  "") passes=(plain) ;;
  --spaces) passes=(spaces) ;;
  --both) passes=(plain spaces) ;;
  *) sed -n '2,12p' "$0"; exit 2 ;;
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
# torch's CPU build (a Space's CPU hardware needs no CUDA libraries): where the package index
# would give the CUDA one, take it from PyTorch's CPU index first; requirements.txt keeps it.
torch_pin=$(grep -E '^torch==' "$repo/requirements.txt")
chosen=$("$py" -m pip install --dry-run --no-deps --ignore-installed -q --report - "$torch_pin" \
  | "$py" -c 'import json, sys; print(json.load(sys.stdin)["install"][0]["metadata"]["version"])')
if [[ "$chosen" != *+cpu ]]; then
  step "torch from the CPU index (the default index offers $chosen)"
  "$py" -m pip install -q --index-url "${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}" "$torch_pin"
fi
step "pip install -r requirements.txt"
"$py" -m pip install -q -r "$repo/requirements.txt"
"$py" -c 'import torch; assert torch.version.cuda is None, torch.__version__; print("torch", torch.__version__)'
step "installed in $(( $(date +%s) - start )) s"

status=0
for pass in "${passes[@]}"; do
  if [ "$pass" = spaces ]; then
    step "pip install $spaces_pin"
    "$py" -m pip install -q "$spaces_pin"
    label="requirements.txt + $spaces_pin"
  else
    label="requirements.txt"
  fi
  step "pass: $label (fresh HOME and cache)"
  "$py" "$repo/scripts/space_check.py" --work "$work/$pass" --label "$label" || status=1
  cp "$work/$pass/result.json" "/tmp/space-check-$pass.json" 2>/dev/null && echo "figures: /tmp/space-check-$pass.json"
done
step "done"
exit $status
