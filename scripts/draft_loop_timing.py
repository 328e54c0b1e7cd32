"""One drafted token through transformers' forward against specviz's lean loop, alternated.

    python scripts/draft_loop_timing.py [--pair qwen-coder] [--threads 2] [--repeats 12]

The pair's own draft as a load gives it (int8 on a CPU), the same module objects both ways:
`CachedLM` over transformers' forward and `LeanLM` (specviz/lm/torch_runtime/lean.py), each holding 160
random context tokens. Each repeat times 10 one-token feeds (cropped back after each) of one
loop, then of the other, so a machine whose speed drifts slows both alike; the first two
repeats are warm-up. Prints the median ms a drafted token of each and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.lm.torch_runtime.cached import CachedLM, model_forward  # noqa: E402
from specviz.lm.torch_runtime.lean import LeanLM  # noqa: E402
from specviz.engine.load import load  # noqa: E402  (the precision the engine would choose)
from specviz.lm.timing import MEASURE_CONTEXT  # noqa: E402

FEEDS = 10
WARMUP = 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pair", default="qwen-coder")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=12)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = load(args.pair)
    if pair.draft is None:
        sys.exit(f"the pair {args.pair!r} has no draft model")
    draft = pair.draft
    vocab = draft.get_input_embeddings().num_embeddings
    gen = torch.Generator().manual_seed(0)
    context = torch.randint(0, vocab, (MEASURE_CONTEXT,), generator=gen)
    times: dict[str, list[float]] = {"transformers": [], "lean": []}
    with torch.inference_mode():
        lms = {
            "transformers": CachedLM(model_forward(draft), draft.config, pair.device),
            "lean": LeanLM(draft, pair.device),
        }
        for lm in lms.values():
            lm.feed(context)
        for rep in range(WARMUP + args.repeats):
            for name, lm in lms.items():
                t0 = time.perf_counter()
                for _ in range(FEEDS):
                    lm.feed(torch.randint(0, vocab, (1,), generator=gen))
                    lm.crop(MEASURE_CONTEXT)
                if rep >= WARMUP:
                    times[name].append((time.perf_counter() - t0) * 1000 / FEEDS)
    print(
        f"pair {pair.name}, draft {pair.draft_precision}, {torch.get_num_threads()} threads, {args.repeats} x {FEEDS} tokens each"
    )
    for name, v in times.items():
        print(f"{name:>12}: median {statistics.median(v):.1f} ms a drafted token (range {min(v):.1f}-{max(v):.1f})")
    print(f"lean / transformers: {statistics.median(times['lean']) / statistics.median(times['transformers']):.3f}")


if __name__ == "__main__":
    main()
