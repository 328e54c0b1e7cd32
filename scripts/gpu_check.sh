#!/usr/bin/env bash
# The bench subset on CUDA in bf16, transformers' generate (plain and assisted) beside
# specviz, in one process on the same model objects; under 8 minutes on one GPU.
#
#   scripts/gpu_check.sh [OUT_DIR]
#
# First the loops' and the engine's tests on CUDA (tiny random models built in-process:
# both loops against transformers' forward, greedy speculative = plain for every drafter).
# The bench needs the bundled pair in the cache (`python -m specviz models --prepare qwen-coder`, or
# SPECVIZ_CACHE pointing at a prepared cache) and torch with CUDA. Greedy, then T = 0.7,
# six prompts, 128 new tokens; prints both tables and leaves bench.json/bench.md per run.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-check-out}
python3 - <<'PY' || { echo "FAIL: torch sees no CUDA device"; exit 1; }
import torch, sys
sys.exit(0 if torch.cuda.is_available() else 1)
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
methods=hf-plain,hf-assisted,hf-assisted-k4,hf-assisted-k8,sv-plain,sv-adaptive,sv-heuristic,sv-tree16x2
common=(--device cuda --dtype bfloat16 --max-new-tokens 128 --limit 6 --methods "$methods")
start=$(date +%s)
SPECVIZ_TEST_DEVICE=cuda timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_lm_lean.py tests/test_engine.py
timeout 195 python3 -m specviz bench "${common[@]}" --out "$out/greedy"
timeout 195 python3 -m specviz bench "${common[@]}" --temperature 0.7 --out "$out/t0.7"
echo "gpu_check: done in $(( $(date +%s) - start )) s; tables in $out/greedy/bench.md and $out/t0.7/bench.md"
