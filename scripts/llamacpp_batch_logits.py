"""How far llama.cpp's logits over a pass of several tokens are from one-token passes.

    python scripts/llamacpp_batch_logits.py --prompt-id heldout-sql-rename [--chunk 5]

The target's plain greedy answer to a bench prompt is fed back to the target's GGUF through
llama-cpp-python alone (no specviz pass): once a token at a time, once in chunks as a
speculative round's verify pass feeds it. Prints how many argmaxes differ and the size of the
logit differences: a greedy speculative run on llama.cpp can only flip a top-2 near tie whose
gap is below these differences (the page and `viz.race.identity_check` show the gap).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import llama_cpp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz.engine import run  # noqa: E402
from specviz.engine.load import load  # noqa: E402
from specviz.lm.prompt import encode_prompt  # noqa: E402
from specviz.settings import DEFAULTS  # noqa: E402


def rows(path: str, context: list[int], answer: list[int], chunk: int, threads: int) -> np.ndarray:
    """The logits predicting each answer token, the answer fed `chunk` tokens a pass."""
    m = llama_cpp.Llama(model_path=path, n_ctx=4096, n_threads=threads, logits_all=True, verbose=False)
    m.eval(context)
    for i in range(0, len(answer), chunk):
        m.eval(answer[i : i + chunk])
    scores = np.array(m.scores[: len(context) + len(answer)])
    return scores[len(context) - 1 : -1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt-id", default="heldout-sql-rename")
    ap.add_argument("--chunk", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=192)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    prompts = {p["id"]: p for p in json.loads((ROOT / "assets" / "bench_prompts.json").read_text())["prompts"]}
    pair = load("qwen-coder", runtime="llama.cpp")
    settings = replace(DEFAULTS, max_new_tokens=args.max_new_tokens, temperature=0.0, mode="plain")
    prompt = prompts[args.prompt_id]["prompt"]
    answer = list(run(pair, prompt, settings).token_ids)
    context = encode_prompt(pair, prompt, settings)
    path = str(Path.home() / ".cache" / "specviz" / "gguf" / "qwen2.5-coder-1.5b-instruct.gguf")
    one, chunked = rows(path, context, answer, 1, args.threads), rows(path, context, answer, args.chunk, args.threads)
    diff = np.abs(one - chunked)
    flips = np.nonzero(one.argmax(1) != chunked.argmax(1))[0].tolist()
    top2 = np.sort(one, axis=1)[:, -2:]
    print(f"{args.prompt_id}: {len(answer)} answer tokens, chunks of {args.chunk} against one token a pass")
    print(f"  one-token rows give the plain answer: {int((one.argmax(1) == np.array(answer)).sum())} of {len(answer)}")
    print(
        f"  |logit difference|: median {np.median(diff):.3f}, p99 {np.quantile(diff, 0.99):.3f}, max {diff.max():.3f}"
    )
    print(f"  argmax differs at {flips}; smallest top-2 gap on the answer {float((top2[:, 1] - top2[:, 0]).min()):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
