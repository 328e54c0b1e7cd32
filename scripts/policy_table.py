"""How the cost-aware policy behaves as drafting gets dearer: a simulation, not a measurement.

    python scripts/policy_table.py [--bench bench-out/bench.json] [--rounds 3000] [--json]

The real `CostAwareLength` runs on a simulated clock: every drafted token costs D, a verify
pass over n tokens costs V(n), each drafted token is accepted with probability alpha
(independently), and the draft reports that same alpha as its confidence (a calibrated
draft). V(n) is the curve the bench measured (`--bench`: its cost model; default: the one
below), scaled to T = V(1) = 1; D is set to 0.05, 0.1 and 0.3 of T. For each D/T and alpha
it prints the mean draft length the policy chose, the share of rounds it decoded plainly,
its simulated speedup over plain decoding and, beside it, the best fixed k and its speedup
from `theory.best_k_with_cost` (what a policy knowing alpha in advance would get).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz import theory  # noqa: E402
from specviz.drafters.cost_aware import CostAwareLength  # noqa: E402
from specviz.cost_model import CostModel  # noqa: E402
from specviz.settings import default_k  # noqa: E402

# V(n) in ms, bundled pair, target in bf16, 2-core AMD EPYC with avx512_bf16 (the bench's
# cost model, 2026-11-30).
MEASURED_V = {1: 126.9, 2: 127.0, 3: 127.6, 4: 127.6, 5: 133.8, 6: 134.9, 8: 139.5, 10: 151.1, 13: 159.0, 17: 170.2}
RATIOS = (0.05, 0.1, 0.3)
ALPHAS = (0.3, 0.5, 0.7, 0.9)


def simulate(
    verify: dict[int, float], d_over_t: float, alpha: float, rounds: int, seed: int = 0, k_max: int | None = None
) -> dict:
    """The policy over `rounds` simulated rounds: mean k, plain share, tokens per T."""
    k_max = k_max or default_k("cost-aware")
    t = verify[1]
    cost = CostModel(verify={n: v / t for n, v in verify.items()}, draft=d_over_t)
    now = [0.0]
    policy = CostAwareLength(cost, k_max, clock=lambda: now[0])
    rng = random.Random(seed)
    tokens, drafted_total, plain = 0, 0, 0
    for _ in range(rounds):
        k = policy.limit()
        drafted = 0
        for _ in range(k):
            drafted += 1
            if not policy.keep_going(alpha):
                break
        accepted = 0
        while accepted < drafted and rng.random() < alpha:
            accepted += 1
        policy.update(drafted, accepted)
        now[0] += cost.round_ms(drafted)
        tokens += accepted + 1
        drafted_total += drafted
        plain += drafted == 0
    best_k, best = theory.best_k_with_cost(alpha, cost, k_max=k_max)
    return {
        "d_over_t": d_over_t,
        "alpha": alpha,
        "mean_k": drafted_total / rounds,
        "plain_rounds": plain / rounds,
        "speedup": tokens / now[0],
        "best_fixed_k": int(best_k),
        "best_fixed_speedup": float(best),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", help="a bench.json whose measured cost model gives V(n)")
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    verify = MEASURED_V
    if args.bench:
        meta = json.loads(Path(args.bench).read_text(encoding="utf-8"))["meta"]
        verify = {int(n): float(v) for n, v in meta["cost_model"]["verify"].items()}
    rows = [simulate(verify, r, a, args.rounds) for r in RATIOS for a in ALPHAS]
    if args.json:
        print(json.dumps({"verify_ms": verify, "rows": rows}, indent=1))
        return 0
    print("| D/T | alpha | policy: mean k | plain rounds | speedup (simulated) | best fixed k | its speedup |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['d_over_t']} | {r['alpha']} | {r['mean_k']:.1f} | {r['plain_rounds']:.0%} | {r['speedup']:.2f}x | "
            f"{r['best_fixed_k']} | {r['best_fixed_speedup']:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
