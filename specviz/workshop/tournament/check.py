"""`python -m specviz tournament-check`: the tournament's predictions against measured runs.

For each prompt: plain greedy decoding gives the text; the tournament replays every drafter
over it on this machine's measured pass costs; then each bench method (`sv-*`, run by the
bench's own `run_specviz`, after an untimed warm-up) runs for real on the same prompt. A row
sets the method's predicted decode rate (tokens after the prefill's first one, per second)
beside its measured one, with their ratio (the goal: within 10 % of 1), and the measured rate
as a share of the tournament's copy oracle on the same text (what a copying drafter left).

    python -m specviz tournament-check --runtime llama.cpp --max-new-tokens 256 \\
        --prompt-ids edit-rename,code-fib --methods sv-adaptive,sv-k4,sv-lookup,sv-suffix
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from specviz.choices import PLAIN
from specviz.settings import MAX_K
from specviz.workshop.bench.methods import parse_method, run_specviz, sv_settings
from specviz.workshop.bench.prompts import DEFAULT_PROMPTS, load_prompts, select
from specviz.workshop.cli import parse_list
from specviz.workshop.generate_cli import add_loading, add_pair, add_runtime, add_setting, loading
from specviz.models.catalogue.presets import DEFAULT_PAIR

GOAL = 0.10  # predicted within this share of measured
DEFAULT_METHODS = "sv-adaptive,sv-k2,sv-k4,sv-lookup,sv-suffix,sv-lookahead"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pair(parser, DEFAULT_PAIR)
    add_runtime(parser)
    add_loading(parser)
    parser.add_argument("--prompts", default=str(DEFAULT_PROMPTS), help="the bench's prompt file")
    parser.add_argument("--prompt-ids", help="comma-separated prompt ids (default: every prompt)")
    parser.add_argument("--methods", default=DEFAULT_METHODS, help=f"bench sv-* methods (default: {DEFAULT_METHODS})")
    add_setting(parser, "max_new_tokens", 128)
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")


def run(args: argparse.Namespace) -> int:
    import torch

    from specviz import engine
    from specviz.engine.load import load
    from specviz.settings import GenerationSettings
    from specviz.workshop import progress

    if args.threads:
        torch.set_num_threads(args.threads)
    methods = [parse_method(n) for n in parse_list("--methods", args.methods)]
    prompts = select(
        load_prompts(args.prompts), ids=parse_list("--prompt-ids", args.prompt_ids) if args.prompt_ids else None
    )
    pair = load(
        args.pair, with_draft=True, progress=progress.lines(terminal_only=True), runtime=args.runtime, **loading(args)
    )
    base = GenerationSettings(max_new_tokens=args.max_new_tokens)
    rows = []
    for p in prompts:
        print(f"{p.id}: the text, the tournament, then {len(methods)} runs ...", file=sys.stderr)
        plain = engine.run(pair, p.prompt, replace(base, mode=PLAIN))
        rows += compare(pair, p.id, p.prompt, plain, methods, base)
    print(json.dumps(rows) if args.json else markdown(rows))
    return 0


def compare(pair, prompt_id: str, prompt, plain, methods, base) -> list[dict]:
    """One prompt's rows: each method's predicted and measured decode rates."""
    from specviz.workshop.tournament.report import measured
    from specviz.workshop.tournament.run import Config, tournament
    from specviz.workshop.tournament.text import from_trace

    result = tournament(pair, from_trace(pair, plain), others=())
    here = result.curves[0].name
    oracle_ms = result.copy_plans[here].ms
    copy_oracle = 1000 * (result.text.n - 1) / oracle_ms if oracle_ms > 0 else 0.0
    rows = []
    for m in methods:
        s = sv_settings(m, base, MAX_K)
        run_specviz(pair, prompt, m, replace(s, max_new_tokens=8))  # untimed warm-up
        sample = run_specviz(pair, prompt, m, s)
        got = measured(sample.trace)
        entry = next((e for e in result.entries if e.drafter == s.drafter and e.config == Config(s.policy, s.k)), None)
        if not got or entry is None or here not in entry.priced:
            continue
        predicted, real = entry.priced[here].tokens_per_s, got[0]["tokens_per_s"]
        rows.append(
            {
                "prompt": prompt_id,
                "method": m.name,
                "predicted": round(predicted, 2),
                "measured": round(real, 2),
                "ratio": round(predicted / real, 3) if real else None,
                "of_copy_oracle": round(real / copy_oracle, 3) if copy_oracle else None,
                "same_tokens": sample.token_ids == plain.token_ids,
            }
        )
    return rows


def markdown(rows: list[dict]) -> str:
    head = (
        "| prompt | method | predicted tok/s | measured tok/s | predicted / measured | within 10 % "
        "| measured / copy oracle | same tokens |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ok = r["ratio"] is not None and abs(r["ratio"] - 1) <= GOAL
        lines.append(
            f"| {r['prompt']} | {r['method']} | {r['predicted']:.2f} | {r['measured']:.2f} | {r['ratio']:.3f} | "
            f"{'yes' if ok else '**no**'} | {r['of_copy_oracle']:.2f} | {'yes' if r['same_tokens'] else '**no**'} |"
        )
    return "\n".join(lines)
