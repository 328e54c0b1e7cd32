"""How often the target's greedy text in another precision agrees with its fp32 text.

    flock /tmp/specviz-heavy.lock python3.11 scripts/precision_agreement.py [--limit 4]
        [--max-new-tokens 64] [--dtypes bfloat16,int8] [--pair qwen-coder] [--json]

Plain greedy decoding of the target alone (specviz's loop) on the first bench prompts, once
per precision. For each prompt and precision: whether all tokens match fp32's, how many
leading tokens do, and where they first differ, fp32's top-2 logit gap there (a small gap is
a near-tie that rounding can flip). Also the precision the loader's `auto` chooses here.
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

from specviz import engine  # noqa: E402
from specviz.lm.prompt import encode_prompt  # noqa: E402
from specviz.workshop.bench.prompts import DEFAULT_PROMPTS, load_prompts, select  # noqa: E402
from specviz.lm import clear_loaded, load_pair  # noqa: E402
from specviz.lm.torch_runtime.devices import choose_device  # noqa: E402
from specviz.lm.torch_runtime.precision import choose_precision  # noqa: E402

from specviz.lm.torch_runtime.precision import cache_file  # noqa: E402
from specviz.models.catalogue.sources import resolve  # noqa: E402
from specviz.settings import GenerationSettings  # noqa: E402


def greedy_runs(pair_name: str, dtype: str, prompts, max_new_tokens: int) -> dict[str, list[int]]:
    pair = load_pair(pair_name, with_draft=False, dtype=dtype)
    settings = GenerationSettings(max_new_tokens=max_new_tokens, mode="plain")
    out = {}
    for p in prompts:
        out[p.id] = engine.run(pair, p.prompt, settings).token_ids
    return out


@torch.inference_mode()
def top2_gap(pair, prompt: str, token_ids: list[int]) -> float:
    """fp32's top-2 logit gap for the next token after the prompt and `token_ids`."""
    ids = encode_prompt(pair, prompt, GenerationSettings(mode="plain")) + token_ids
    logits = pair.target(input_ids=torch.tensor([ids]), logits_to_keep=1).logits[0, -1, : pair.vocab_size].float()
    top = logits.topk(2).values
    return float(top[0] - top[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="qwen-coder")
    ap.add_argument("--limit", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--dtypes", default="bfloat16", help="precisions compared with float32, comma-separated")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    prompts = select(load_prompts(DEFAULT_PROMPTS), limit=args.limit)

    t0 = time.perf_counter()
    runs = {"float32": greedy_runs(args.pair, "float32", prompts, args.max_new_tokens)}
    fp32 = load_pair(args.pair, with_draft=False, dtype="float32")
    others = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for dtype in others:
        runs[dtype] = greedy_runs(args.pair, dtype, prompts, args.max_new_tokens)

    rows = []
    for dtype in others:
        for p in prompts:
            a, b = runs["float32"][p.id], runs[dtype][p.id]
            same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            row = {"dtype": dtype, "prompt": p.id, "tokens": len(a), "identical": a == b, "agreeing_prefix": same}
            if a != b and same < min(len(a), len(b)):
                row["fp32_top2_gap_at_difference"] = round(top2_gap(fp32, p.prompt, a[:same]), 4)
            rows.append(row)

    dev = choose_device(None)
    # the decision engine.load made (or would read), timed through the engine's loop
    decided = cache_file(resolve(args.pair).target.key, dev)
    auto = choose_precision(dev, "auto", cache_file=decided) if decided.is_file() or dev.type == "cuda" else None
    result = {
        "pair": args.pair,
        "max_new_tokens": args.max_new_tokens,
        "threads": torch.get_num_threads(),
        "auto_choice": None if auto is None else {"precision": auto.target, "reason": auto.reason},
        "rows": rows,
        "summary": {
            dtype: {
                "identical_prompts": sum(r["identical"] for r in rows if r["dtype"] == dtype),
                "prompts": sum(r["dtype"] == dtype for r in rows),
                "agreeing_tokens": sum(r["agreeing_prefix"] for r in rows if r["dtype"] == dtype),
                "tokens": sum(r["tokens"] for r in rows if r["dtype"] == dtype),
            }
            for dtype in others
        },
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    clear_loaded()
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    if result["auto_choice"]:
        print(f"auto chooses {result['auto_choice']['precision']}: {result['auto_choice']['reason']}")
    for r in rows:
        gap = f", fp32 top-2 gap there {r['fp32_top2_gap_at_difference']}" if "fp32_top2_gap_at_difference" in r else ""
        verdict = "identical" if r["identical"] else f"first differs at token {r['agreeing_prefix']}{gap}"
        print(
            f"{r['dtype']:9} {r['prompt']:16} {r['agreeing_prefix']:3}/{r['tokens']} leading tokens agree with fp32: {verdict}"
        )
    for dtype, s in result["summary"].items():
        print(
            f"{dtype}: {s['identical_prompts']}/{s['prompts']} prompts identical to fp32, "
            f"{s['agreeing_tokens']}/{s['tokens']} tokens before the first difference"
        )
    print(f"({result['wall_s']} s, {result['threads']} threads)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
