"""specviz's plain decoding against transformers' generate, alternated in one process.

    python scripts/plain_ab.py [--pair qwen-coder] [--max-new-tokens 128] [--pairs 3] [--prompt-id ID]

The same model object, prompt (the first example, or a bench prompt by id, through the chat
template), stop ids and greedy decoding; one warm-up of each, then `--pairs` runs of each in
turn, so a machine whose speed drifts (this one's did by 20 % within a minute) slows both
alike. Prints tokens/s of each and their ratio per pair.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.workshop.bench.prompts import DEFAULT_PROMPTS, load_prompts, select  # noqa: E402
from specviz.engine import run  # noqa: E402
from specviz.engine.load import load  # noqa: E402
from specviz.lm.prompt import encode_prompt, stop_ids  # noqa: E402
from specviz.settings import GenerationSettings  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="qwen-coder")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument(
        "--prompt-id", help="a prompt of the bench's set (assets/bench_prompts.json) instead of the first example"
    )
    args = ap.parse_args()
    if args.prompt_id:
        prompt = select(load_prompts(DEFAULT_PROMPTS), ids=[args.prompt_id])[0].prompt
    else:
        prompt = json.loads((ROOT / "assets" / "examples.json").read_text())["examples"][0]["prompt"]
    pair = load(args.pair, with_draft=False)
    settings = GenerationSettings(mode="plain", max_new_tokens=args.max_new_tokens)
    ids = torch.tensor([encode_prompt(pair, prompt, settings)], device=pair.device)

    def transformers_plain() -> tuple[float, int]:
        with torch.inference_mode():
            t = time.perf_counter()
            out = pair.target.generate(
                ids,
                max_new_tokens=args.max_new_tokens,
                do_sample=False,
                eos_token_id=sorted(stop_ids(pair)),
                pad_token_id=0,
            )
            n = out.shape[1] - ids.shape[1]
            return n / (time.perf_counter() - t), n

    def specviz_plain() -> tuple[float, int]:
        t = time.perf_counter()
        trace = run(pair, prompt, settings)
        return trace.summary.new_tokens / (time.perf_counter() - t), trace.summary.new_tokens

    transformers_plain(), specviz_plain()  # warm-up
    print(
        f"{pair.name}, target {pair.precision}, {torch.get_num_threads()} threads, {args.max_new_tokens} new tokens at most"
    )
    for _ in range(args.pairs):
        (a, na), (b, nb) = transformers_plain(), specviz_plain()
        print(
            f"transformers {a:.2f} tok/s ({na} tokens)  specviz {b:.2f} tok/s ({nb} tokens)  ratio {b / a:.3f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
