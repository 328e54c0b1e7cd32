"""The copying drafters' prior chances, calibrated on a corpus kept apart from the bench's prompts.

A copied token behind a span of s agreeing tokens is accepted, once the token before it is,
with a chance that `drafters/copy_span.py` starts from a prior per span length (PRIOR_ACCEPT)
and then learns from the run's verdicts. This script measures those chances on
assets/copy_calibration.json: prompts that are neither the edit group the drafters were tuned on
nor the edit-heldout group they are measured on, with the bundled target's greedy answers.

    python scripts/calibrate_copy_prior.py --generate   # the target's answers (loads the pair: heavy)
    python scripts/calibrate_copy_prior.py              # the chances per span bin, from those answers

The second step needs no model: suffix decoding and prompt lookup replay along each answer
(`workshop.tournament.replay`, their own code, k = 8, every node verified) with their evidence
never fading, and their verdicts are counted per span bin.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout, not an install

from specviz.choices import PLAIN  # noqa: E402
from specviz.drafters import copy_span  # noqa: E402
from specviz.drafters.length import DraftLength  # noqa: E402
from specviz.drafters.lookup import LookupDrafter  # noqa: E402
from specviz.drafters.suffix import SuffixDrafter  # noqa: E402
from specviz.settings import GenerationSettings  # noqa: E402
from specviz.workshop.tournament.replay import greedy_path, replay  # noqa: E402
from specviz.workshop.tournament.text import PASTED, Text  # noqa: E402

CORPUS = Path(__file__).resolve().parent.parent / "assets" / "copy_calibration.json"
PAIR = "qwen-coder"
K = 8


def generate(max_new_tokens: int, runtime: str) -> None:
    from specviz import engine
    from specviz.engine.load import load
    from specviz.lm.prompt import encode_prompt, stop_ids

    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
    pair = load(PAIR, with_draft=False, runtime=runtime)
    settings = GenerationSettings(max_new_tokens=max_new_tokens, mode=PLAIN)
    answers = {}
    for item in corpus["prompts"]:
        trace = engine.run(pair, item["prompt"], settings)
        answers[item["id"]] = {
            "prompt_ids": encode_prompt(pair, item["prompt"], settings),
            "answer_ids": list(trace.token_ids),
        }
        print(f"{item['id']}: {len(trace.token_ids)} tokens", file=sys.stderr)
    corpus["answers"] = {PAIR: {"stop_ids": sorted(stop_ids(pair)), "texts": answers}}
    CORPUS.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def counts() -> dict[str, list[list[float]]]:
    """Per drafter, per span bin: [accepted, checked] over the corpus."""
    stored = json.loads(CORPUS.read_text(encoding="utf-8"))["answers"][PAIR]
    eos = frozenset(stored["stop_ids"])
    copy_span.MEMORY = copy_span.IDLE_MEMORY = 1.0  # count every verdict, none faded
    out = {}
    for make in (SuffixDrafter, LookupDrafter):
        total = [[0.0, 0.0] for _ in copy_span.SPAN_BINS]
        for item in stored["texts"].values():
            text = Text(
                item["prompt_ids"], item["answer_ids"], GenerationSettings(), eos, len(item["answer_ids"]), PASTED
            )
            drafter = make()
            replay(text, drafter, DraftLength(K), greedy_path(text.answer_ids))
            for b, (accepted, checked) in enumerate(drafter.evidence._bins):
                total[b][0] += accepted
                total[b][1] += checked
        out[make.name] = total
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generate", action="store_true", help="make the target's answers first (loads the pair)")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--runtime", default="llama.cpp")
    args = ap.parse_args()
    if args.generate:
        generate(args.max_new_tokens, args.runtime)
    by_drafter = counts()
    print("| span from | " + " | ".join(f"{d} accepted / checked" for d in by_drafter) + " | both |")
    print("|---|" + "---|" * (len(by_drafter) + 1))
    for b, lo in enumerate(copy_span.SPAN_BINS):
        cells = [f"{c[b][0]:.0f} / {c[b][1]:.0f}" for c in by_drafter.values()]
        acc, chk = (sum(c[b][i] for c in by_drafter.values()) for i in (0, 1))
        print(
            f"| {lo} | " + " | ".join(cells) + f" | {acc / chk:.3f} |"
            if chk
            else f"| {lo} | " + " | ".join(cells) + " | - |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
