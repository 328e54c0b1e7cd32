#!/usr/bin/env bash
# What a lent GPU machine can check without the bundled weights (it receives only the working
# tree): under 8 minutes, one JSON report.
#
#   scripts/gpu_check.sh [OUT_DIR]
#
# 1. Exactness on CUDA: the loops' and the engine's tests on tiny random models built
#    in-process (both loops against transformers' forward; greedy speculative = plain for
#    every drafter, trees included).
# 2. Pass costs on CUDA: random-weight models with the bundled pair's configs
#    (assets/model_configs), V(n) and D in bf16 on the torch runtime, timed by the cost
#    model's own code, beside transformers' generate on the same model objects
#    (scripts/gpu_random_costs.py). Random-weight timings: no acceptance, no speedup.
# 3. Only where the bundled pair is in the cache (SPECVIZ_CACHE pointing at a prepared
#    cache): the bench subset beside transformers' generate, greedy, six prompts.
# The report: OUT_DIR/gpu_check.json (also printed).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-check-out}
mkdir -p "$out"
start=$(date +%s)
python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' || { echo '{"error": "torch sees no CUDA device"}'; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1 || true

SPECVIZ_TEST_DEVICE=cuda timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_lm_lean.py tests/test_engine.py \
  > "$out/tests.txt" 2>&1
tests_rc=$?
timeout 180 python3 scripts/gpu_random_costs.py --device cuda --out "$out/costs.json" > "$out/costs.log" 2>&1
costs_rc=$?
bench_rc=skipped
if [ "$(python3 -m specviz models 2>/dev/null | grep -A3 '^qwen-coder' | grep -c 'cache: converted')" = 2 ]; then
  timeout 150 python3 -m specviz bench --device cuda --dtype bfloat16 --max-new-tokens 128 --limit 6 \
    --methods hf-plain,hf-assisted,sv-plain,sv-adaptive --out "$out/greedy" > "$out/bench.log" 2>&1
  bench_rc=$?
fi
OUT="$out" TESTS_RC=$tests_rc COSTS_RC=$costs_rc BENCH_RC=$bench_rc ELAPSED=$(( $(date +%s) - start )) python3 - <<'PY'
import json, os
from pathlib import Path
out = Path(os.environ["OUT"])
def read(name):
    p = out / name
    return p.read_text().strip() if p.is_file() else ""
report = {
    "gpu": read("gpu.txt"),
    "exactness_tests": {"rc": int(os.environ["TESTS_RC"]), "summary": (read("tests.txt").splitlines() or [""])[-1]},
    "random_weight_costs": json.loads(read("costs.json")) if read("costs.json") else {"rc": int(os.environ["COSTS_RC"]), "log": read("costs.log")[-2000:]},
    "bench": os.environ["BENCH_RC"] if os.environ["BENCH_RC"] == "skipped" else {"rc": int(os.environ["BENCH_RC"]), "table": read("greedy/bench.md")},
    "elapsed_s": int(os.environ["ELAPSED"]),
}
(out / "gpu_check.json").write_text(json.dumps(report, indent=1))
print(json.dumps(report, indent=1))
PY
[ "$tests_rc" = 0 ] && [ "$costs_rc" = 0 ]
