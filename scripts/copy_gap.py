"""The copying drafters against the copy oracle, replayed on a cost curve, prompt by prompt.

Suffix decoding and prompt lookup replay along the bundled target's greedy answers with their
own code and the cost-aware policy (`workshop.tournament.replay`, as the tournament replays
them), priced on a stored cost curve (assets/cost_curves.json); the copy oracle (the longest
copy of earlier text at every round, drafted for free, `tournament.oracle`) is priced on the
same curve. Each row gives the predicted speedup over plain decoding and the share of the
oracle's speed. Three groups, reported apart: the calibration corpus the copy priors were tuned
on (assets/copy_calibration.json, answers stored there), the bench's edit group and its
edit-heldout group (answers made here once with llama.cpp and cached).

    python scripts/copy_gap.py [--curve "AMD EPYC, llama.cpp"] [--groups calib,edit,edit-heldout] [--json]

The first run on a machine decodes the bench's edit prompts plainly (loads the target: heavy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout, not an install

from specviz.drafters import make_drafter, make_length  # noqa: E402
from specviz.models.files.cache import cache_root  # noqa: E402
from specviz.settings import GenerationSettings  # noqa: E402
from specviz.workshop.bench.prompts import DEFAULT_PROMPTS, load_prompts  # noqa: E402
from specviz.workshop.tournament import oracle  # noqa: E402
from specviz.workshop.tournament.contestants import settings_for  # noqa: E402
from specviz.workshop.tournament.curves import stored  # noqa: E402
from specviz.workshop.tournament.price import Prices, plain  # noqa: E402
from specviz.workshop.tournament.replay import Clock, greedy_path, replay  # noqa: E402
from specviz.workshop.tournament.text import PASTED, Text  # noqa: E402

CALIBRATION = Path(__file__).resolve().parent.parent / "assets" / "copy_calibration.json"
PAIR, MAX_NEW_TOKENS, K = "qwen-coder", 256, 16
DRAFTERS = ("suffix", "lookup")


def bench_answers(kinds: set[str]) -> dict[str, dict]:
    """The target's greedy answers to the bench prompts of `kinds`, made once and cached."""
    path = cache_root() / "copy-gap-answers.json"
    have = json.loads(path.read_text()) if path.is_file() else {}
    todo = [p for p in load_prompts(DEFAULT_PROMPTS) if p.kind in kinds and p.id not in have]
    if todo:
        from specviz import engine
        from specviz.engine.load import load
        from specviz.lm.prompt import encode_prompt, stop_ids

        pair = load(PAIR, with_draft=False, runtime="llama.cpp")
        settings = GenerationSettings(max_new_tokens=MAX_NEW_TOKENS, mode="plain")
        for p in todo:
            trace = engine.run(pair, p.prompt, settings)
            ids = encode_prompt(pair, p.prompt, settings)
            have[p.id] = {"kind": p.kind, "prompt_ids": ids, "answer_ids": list(trace.token_ids)}
            have[p.id]["stop_ids"] = sorted(stop_ids(pair))
            print(f"{p.id}: {len(trace.token_ids)} tokens", file=sys.stderr)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(have))
    return {k: v for k, v in have.items() if v["kind"] in kinds}


def texts(group: str) -> dict[str, Text]:
    if group == "calib":
        stored_answers = json.loads(CALIBRATION.read_text(encoding="utf-8"))["answers"][PAIR]
        items = {k: {**v, "stop_ids": stored_answers["stop_ids"]} for k, v in stored_answers["texts"].items()}
    else:
        items = bench_answers({group})
    settings = GenerationSettings(max_new_tokens=MAX_NEW_TOKENS)
    return {
        k: Text(v["prompt_ids"], v["answer_ids"], settings, frozenset(v["stop_ids"]), len(v["answer_ids"]), PASTED)
        for k, v in items.items()
    }


def replayed_ms(text: Text, name: str, curve) -> float:
    """The drafter's cost-aware run along the text, priced on the curve (a draft-free drafter)."""
    cost = curve.cost.with_draft(0.0)
    pair = SimpleNamespace(name=PAIR, runtime=curve.runtime, cost_model=cost, draft=None, device="cpu")
    settings = settings_for(text.settings, name, "cost-aware", K)
    length, clock, prices = make_length(pair, settings), Clock(), Prices(cost, 0.0, free=True)
    if hasattr(length, "_clock"):
        length._clock = clock  # the policy times its rounds on the curve's clock
    rounds = replay(
        text,
        make_drafter(pair, settings),
        length,
        greedy_path(text.answer_ids),
        after_round=lambda r: clock.advance(prices.round_ms(r)),
    )
    return prices.run(rounds).ms


def rows(group: str, curve) -> list[dict]:
    out = []
    for tid, text in texts(group).items():
        copy_runs = {oracle.COPY: oracle.copy_runs(text, oracle.COPY)}
        oracle_ms = oracle.best_rounds(copy_runs, {oracle.COPY: 0.0}, curve.cost, text.n).ms
        plain_ms = plain(text.n - 1, curve.cost).ms
        row = {"group": group, "id": tid, "tokens": text.n, "oracle_speedup": round(plain_ms / oracle_ms, 3)}
        for name in DRAFTERS:
            ms = replayed_ms(text, name, curve)
            row[f"{name}_speedup"] = round(plain_ms / ms, 3)
            row[f"{name}_of_oracle"] = round(oracle_ms / ms, 3)
        out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--curve", default="AMD EPYC, llama.cpp", help="a curve's name in assets/cost_curves.json")
    ap.add_argument("--groups", default="calib,edit,edit-heldout")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    curves = {c.name: c for c in stored()}
    if args.curve not in curves:
        ap.error(f"--curve: one of {', '.join(curves)}")
    table = [r for g in args.groups.split(",") for r in rows(g, curves[args.curve])]
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    print(f"| group | prompt | oracle | {' | '.join(f'{d} (of oracle)' for d in DRAFTERS)} |")
    print("|---|---|---|" + "---|" * len(DRAFTERS))
    for g in args.groups.split(","):
        group = [r for r in table if r["group"] == g]
        for r in group:
            cells = [f"{r[f'{d}_speedup']:.2f}x ({r[f'{d}_of_oracle']:.2f})" for d in DRAFTERS]
            print(f"| {g} | {r['id']} | {r['oracle_speedup']:.2f}x | " + " | ".join(cells) + " |")
        mean = lambda key: statistics.geometric_mean(r[key] for r in group)  # noqa: E731
        cells = [f"{mean(f'{d}_speedup'):.2f}x ({mean(f'{d}_of_oracle'):.2f})" for d in DRAFTERS]
        print(f"| {g} | geometric mean | {mean('oracle_speedup'):.2f}x | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
