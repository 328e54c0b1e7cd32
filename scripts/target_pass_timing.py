"""The target's pass over n new tokens through transformers' forward and through the loop the
engine runs it in, timed side by side.

    python scripts/target_pass_timing.py [--pair qwen-coder] [--threads 2] [--repeats 3]

The pair's target as a load gives it, after 160 random context tokens, logits for every new
position (as a verify pass needs): `models.timing.measure_pass_ms` (transformers' forward, what
transformers' `generate` runs) and `drafters.cost_model.target_pass_ms` (the engine's loop:
`lm.lean` over packed weights where it applies, what the cost model and every speedup use).
Each takes untimed warm-up sweeps, then the median of `--repeats` sweeps over all sizes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.drafters.cost_model import MEASURED_SIZES, target_pass_ms  # noqa: E402
from specviz.lm.lean import model_lm, loop_name  # noqa: E402
from specviz.models.loader import load_pair  # noqa: E402
from specviz.models.timing import measure_pass_ms  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pair", default="qwen-coder")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = load_pair(args.pair)
    sizes = list(MEASURED_SIZES)
    engine = target_pass_ms(pair, sizes, repeats=args.repeats)
    stock = measure_pass_ms(pair.target, sizes, vocab_size=pair.vocab_size, repeats=args.repeats)
    loop = loop_name(model_lm(pair.target, pair.device))
    print(f"pair {pair.name}, target {pair.precision} on {pair.device}, {torch.get_num_threads()} threads; ms a pass by new tokens")
    print("| new tokens | " + " | ".join(str(n) for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    print("| transformers' forward | " + " | ".join(f"{stock[n]:.0f}" for n in sizes) + " |")
    print(f"| engine ({loop}) | " + " | ".join(f"{engine[n]:.0f}" for n in sizes) + " |")


if __name__ == "__main__":
    main()
