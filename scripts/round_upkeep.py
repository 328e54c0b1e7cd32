"""What a run pays per token outside the target's passes: plain decoding against the cost-aware
default (which on a machine where no draft length pays decodes every round plainly, so any gap
between the two is upkeep), on the llama.cpp runtime, runs interleaved.

    python3.11 scripts/round_upkeep.py [--pair qwen-coder] [--prompt-ids code-fib,prose-history] [--repeats 3]

Every llama.cpp decode is timed (the prompt's prefill included, and the draft's where a round
drafts); per token it prints the median over runs of: the time outside those decodes, the
decodes, and the wall time. It then times one fixed piece of Python (five choices of the
policy, priced on the pair's measured costs, and one top-5 over a row of the vocabulary) back to back, and
once right after each target pass of a plain run: per-round work costs several times its
back-to-back figure once a pass has run between (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from specviz.costs.measure import for_pair  # noqa: E402
from specviz.drafters.cost_aware import CostAwareLength  # noqa: E402
from specviz.engine.generation import run  # noqa: E402
from specviz.engine.load import load  # noqa: E402
from specviz.lm import rows  # noqa: E402
from specviz.lm.llamacpp_runtime import lm as llamacpp_lm  # noqa: E402
from specviz.settings import GenerationSettings  # noqa: E402
from specviz.workshop.bench.prompts import DEFAULT_PROMPTS, load_prompts  # noqa: E402

METHODS = {
    "plain": ("plain", "full"),
    "cost-aware": ("speculative", "full"),
    "cost-aware, minimal": ("speculative", "minimal"),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", default="qwen-coder")
    ap.add_argument("--prompt-ids", default="code-fib,prose-history")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    args = ap.parse_args(argv)
    prompts = {p.id: p for p in load_prompts(DEFAULT_PROMPTS)}
    pair = load(args.pair, with_draft=True, runtime="llama.cpp")
    decode_ms, after = [0.0], []
    original = llamacpp_lm.LlamaCppLM._decode

    def timed(self, *a, **k):
        t0 = time.perf_counter()
        out = original(self, *a, **k)
        decode_ms[0] += (time.perf_counter() - t0) * 1000
        return out

    llamacpp_lm.LlamaCppLM._decode = timed
    base = GenerationSettings(max_new_tokens=args.max_new_tokens, temperature=0.0, runtime="llama.cpp")
    run(pair, "hello", replace(base, max_new_tokens=16))  # warm-up
    per = {name: [] for name in METHODS}
    for pid in args.prompt_ids.split(","):
        for r in range(args.repeats):
            names = list(METHODS)[r % len(METHODS) :] + list(METHODS)[: r % len(METHODS)]
            for name in names:
                mode, record = METHODS[name]
                decode_ms[0] = 0.0
                t0 = time.perf_counter()
                trace = run(pair, prompts[pid].prompt, replace(base, mode=mode, seed=r), record=record)
                wall = (time.perf_counter() - t0) * 1000
                n = len(trace.token_ids)
                per[name].append(((wall - decode_ms[0]) / n, decode_ms[0] / n, wall / n))
    for name, v in per.items():
        outside, passes, wall = (statistics.median(x[i] for x in v) for i in range(3))
        print(f"{name:20s} ms a token: outside the passes {outside:.2f}, passes {passes:.2f}, wall {wall:.2f}")

    policy = CostAwareLength(for_pair(pair), 16)
    row = torch.from_numpy(np.random.default_rng(0).standard_normal((1, pair.vocab_size), dtype=np.float32))

    def work() -> float:
        t0 = time.perf_counter()
        for _ in range(5):
            policy.choose(0.7)
        rows.top(row, 5)
        return (time.perf_counter() - t0) * 1000

    alone = statistics.median(work() for _ in range(200))

    def then_work(self, *a, **k):
        out = timed(self, *a, **k)
        after.append(work())
        return out

    llamacpp_lm.LlamaCppLM._decode = then_work
    run(pair, prompts[args.prompt_ids.split(",")[0]].prompt, replace(base, mode="plain"))
    llamacpp_lm.LlamaCppLM._decode = original
    print(f"a fixed piece of Python: {alone:.3f} ms back to back, {statistics.median(after):.3f} ms right after a pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
