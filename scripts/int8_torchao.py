"""The int8 draft two ways: torch.ao's quantize_dynamic (today's) against torchao's quantize_.

    flock /tmp/specviz-heavy.lock python3.11 scripts/int8_torchao.py [--limit 6] [--max-new-tokens 64] [--json]

Loads the pair as the app does (the draft loaded in fp32, then quantized by torch.ao), makes
torchao's int8 copy of the same fp32 draft (Int8DynamicActivationInt8WeightConfig: int8
weights per channel, activations per token) and measures for each draft (fp32 too, for reference): the time to quantize, one drafted token's
ms (a one-token pass after a 160-token context, as the cost model's D), and how often it
agrees with the target: greedy speculative decoding at fixed k on the first bench prompts,
its acceptance rate, and whether the text equals plain greedy decoding's (with a bf16
target a multi-token pass may round a near-tie differently from one-token passes).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from copy import deepcopy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz import engine  # noqa: E402
from specviz.workshop.bench.prompts import DEFAULT_PROMPTS, load_prompts, select  # noqa: E402
from specviz.engine.load import load  # noqa: E402
from specviz.lm.torch_runtime import loader  # noqa: E402
from specviz.models.catalogue.sources import resolve  # noqa: E402
from specviz.lm.torch_runtime.forward_timing import measure_pass_ms  # noqa: E402
from specviz.settings import GenerationSettings  # noqa: E402


def torchao_int8(model: torch.nn.Module) -> torch.nn.Module:
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    copy = deepcopy(model)
    for m in copy.modules():  # back to nn.Linear's own forward: torchao's tensor subclass runs F.linear
        if isinstance(m, torch.nn.Linear) and "forward" in m.__dict__:
            del m.forward
    quantize_(copy, Int8DynamicActivationInt8WeightConfig())
    return copy.eval()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="qwen-coder")
    ap.add_argument("--limit", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import torchao

    prompts = select(load_prompts(DEFAULT_PROMPTS), limit=args.limit)
    # As the app loads it: the target in its auto precision, the draft loaded in fp32 and
    # quantized with torch.ao; the fp32 draft stays loaded beside its int8 copy.
    pair = load(args.pair)
    draft_key = resolve(args.pair).draft.key
    fp32 = next(m.model for key, m in loader._models.items() if key == (draft_key, str(pair.device), torch.float32))
    drafts = {"fp32": (fp32, 0.0), "torch.ao quantize_dynamic": (pair.draft, pair.info["draft"].get("quantize_s", 0.0))}
    t0 = time.perf_counter()
    drafts["torchao Int8DynamicActivationInt8Weight"] = (torchao_int8(fp32), time.perf_counter() - t0)

    plain = {
        p.id: engine.run(
            pair, p.prompt, GenerationSettings(max_new_tokens=args.max_new_tokens, mode="plain", temperature=0.0)
        ).token_ids
        for p in prompts
    }
    settings = GenerationSettings(max_new_tokens=args.max_new_tokens, k=args.k, policy="fixed", temperature=0.0)
    rows = {}
    for name, (model, quantize_s) in drafts.items():
        with torch.inference_mode():
            d = measure_pass_ms(model, [1, 2], vocab_size=pair.vocab_size, repeats=args.repeats)
        variant = dataclasses.replace(pair, draft=model)
        drafted = accepted = same = 0
        for p in prompts:
            trace = engine.run(variant, p.prompt, settings)
            drafted += trace.summary.drafted
            accepted += trace.summary.accepted
            same += trace.token_ids == plain[p.id]
        rows[name] = {
            "quantize_s": round(quantize_s, 1),
            "draft_ms_1": round(d[1], 1),
            "draft_ms_2": round(d[2], 1),
            "acceptance": round(accepted / max(drafted, 1), 4),
            "accepted": accepted,
            "drafted": drafted,
            "outputs_equal_plain": f"{same}/{len(prompts)}",
        }
        print(f"{name}: {rows[name]}", file=sys.stderr, flush=True)
    result = {
        "pair": args.pair,
        "target_precision": pair.precision,
        "k": args.k,
        "prompts": [p.id for p in prompts],
        "max_new_tokens": args.max_new_tokens,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "torchao": torchao.__version__,
        "drafts": rows,
    }
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for name, r in rows.items():
            print(
                f"{name:42} D(1) {r['draft_ms_1']:6.1f} ms  D(2) {r['draft_ms_2']:6.1f} ms  acceptance {r['acceptance']:.3f} "
                f"({r['accepted']}/{r['drafted']})  quantize {r['quantize_s']} s  outputs = plain: {r['outputs_equal_plain']}"
            )
        print(
            f"(target in {pair.precision}, k={args.k}, {len(prompts)} prompts x {args.max_new_tokens} tokens, {result['threads']} threads)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
