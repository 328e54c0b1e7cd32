"""The target's pass over n new tokens through transformers' forward and through the loop the
engine runs it in, timed side by side.

    python scripts/target_pass_timing.py [--pair qwen-coder] [--threads 2] [--repeats 3] [--trees]

The pair's target as a load gives it, after 160 random context tokens, logits for every new
position (as a verify pass needs): `lm.torch_runtime.forward_timing.measure_pass_ms` (transformers' forward, what
transformers' `generate` runs) and `lm.timing.target_pass_ms` (the engine's loop:
`lm.torch_runtime.lean` over packed weights where it applies, what the cost model and every speedup use).
Each takes untimed warm-up sweeps, then the median of `--repeats` sweeps over all sizes.
`--trees` adds a tree round's target pass (`LM.feed_tree`: n nodes, each node's parent the
node (i - 1) // 2, as a two-wide tree grows) through both loops.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.costs.measure import MEASURED_SIZES  # noqa: E402
from specviz.lm.torch_runtime.cached import cached_lm  # noqa: E402
from specviz.lm.torch_runtime.lean import model_lm  # noqa: E402
from specviz.engine.load import load  # noqa: E402  (the precision the engine would choose)
from specviz.lm.timing import MEASURE_CONTEXT, median_ms, target_pass_ms  # noqa: E402
from specviz.lm.torch_runtime.forward_timing import measure_pass_ms  # noqa: E402

TREE_SIZES = [5, 9, 17]


@torch.inference_mode()
def tree_pass_ms(lm, vocab_size: int, sizes: list[int], repeats: int) -> dict[int, float]:
    """Median ms of one tree pass of n nodes after MEASURE_CONTEXT cached tokens, cropped back after each."""
    gen = torch.Generator().manual_seed(0)
    lm.feed(torch.randint(0, vocab_size, (MEASURE_CONTEXT,), generator=gen))

    def one_pass(n: int) -> None:
        lm.feed_tree(torch.randint(0, vocab_size, (n,), generator=gen), [(i - 1) // 2 for i in range(n)])
        lm.crop(MEASURE_CONTEXT)

    return median_ms(one_pass, sizes, device=torch.device(lm.device), repeats=repeats)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pair", default="qwen-coder")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trees", action="store_true", help="also time tree passes through both loops")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = load(args.pair)
    sizes = list(MEASURED_SIZES)
    engine = target_pass_ms(pair.target, pair.device, pair.vocab_size, sizes, repeats=args.repeats)
    stock = measure_pass_ms(pair.target, sizes, vocab_size=pair.vocab_size, repeats=args.repeats)
    loop = model_lm(pair.target, pair.device).loop
    print(
        f"pair {pair.name}, target {pair.precision} on {pair.device}, {torch.get_num_threads()} threads; ms a pass by new tokens"
    )
    print("| new tokens | " + " | ".join(str(n) for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    print("| transformers' forward | " + " | ".join(f"{stock[n]:.0f}" for n in sizes) + " |")
    print(f"| engine ({loop}) | " + " | ".join(f"{engine[n]:.0f}" for n in sizes) + " |")
    if args.trees:
        tree_engine = tree_pass_ms(model_lm(pair.target, pair.device), pair.vocab_size, TREE_SIZES, args.repeats)
        tree_stock = tree_pass_ms(cached_lm(pair.target, pair.device), pair.vocab_size, TREE_SIZES, args.repeats)
        print("\n| tree nodes | " + " | ".join(str(n) for n in TREE_SIZES) + " |")
        print("|---|" + "---|" * len(TREE_SIZES))
        print("| tree pass, transformers' forward | " + " | ".join(f"{tree_stock[n]:.0f}" for n in TREE_SIZES) + " |")
        print(f"| tree pass, engine ({loop}) | " + " | ".join(f"{tree_engine[n]:.0f}" for n in TREE_SIZES) + " |")


if __name__ == "__main__":
    main()
