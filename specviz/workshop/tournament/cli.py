"""`python -m specviz tournament`: every drafter on one text, predicted here and on other machines.

    python -m specviz tournament --trace run.json                   # a run's own text
    python -m specviz tournament --prompt "..." --answer-file a.txt   # an answer made elsewhere
    python -m specviz tournament --prompt "..." --max-new-tokens 256  # the target's greedy answer, made first

Prints the ranked drafters with the oracles on this machine's pass costs, or everything with
--json (the same dict the page and the API show: `report.to_dict`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specviz.choices import PLAIN
from specviz.errors import UserError
from specviz.models.catalogue.presets import DEFAULT_PAIR
from specviz.settings import DEFAULTS, GenerationSettings, from_request
from specviz.workshop import progress
from specviz.workshop.cli import parse_list
from specviz.workshop.generate_cli import add_loading, add_pair, add_runtime, add_setting, loading


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("the text (one of)")
    src.add_argument("--trace", help="a run's trace file (`generate --json`, the page's download)")
    src.add_argument("--prompt", help="the prompt; with --answer or --answer-file, the answer to replay")
    src.add_argument("--answer", help="an answer made elsewhere (read through the pair's tokenizer)")
    src.add_argument("--answer-file", help="the same, from a file")
    add_pair(parser, DEFAULT_PAIR)
    add_runtime(parser)
    add_loading(parser)
    add_setting(parser, "max_new_tokens", 128)
    add_setting(parser, "temperature", DEFAULTS.temperature)
    add_setting(parser, "raw")
    parser.add_argument("--drafters", help="comma-separated drafters to replay (default: every one the pair runs)")
    parser.add_argument(
        "--curve",
        action="append",
        default=[],
        help="a lent GPU's report from scripts/gpu_random_costs.py, priced beside the stored curves (repeatable)",
    )
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--json", action="store_true", help="print everything as JSON")
    parser.add_argument("--detail", action="store_true", help="with --json: each replay's accepted lengths by round")


def run(args: argparse.Namespace) -> int:
    import torch

    from specviz.engine.load import load
    from specviz.workshop.tournament import curves, run as tournament
    from specviz.workshop.tournament.report import table, to_dict

    if args.threads:
        torch.set_num_threads(args.threads)
    if bool(args.trace) == bool(args.prompt):
        raise UserError("give a --trace, or a --prompt (with --answer or --answer-file, or the target answers it)")
    extra = [curves.from_gpu_report(p) for p in args.curve]
    say = progress.lines(terminal_only=True)
    pair = load(args.pair, with_draft=True, progress=say, runtime=args.runtime, **loading(args))
    text, trace = _text(pair, args)
    drafters = parse_list("--drafters", args.drafters) if args.drafters else None
    result = tournament.tournament(pair, text, others=curves.stored() + extra, drafters=drafters, progress=say)
    d = to_dict(result, texts=token_texts(pair, text.answer_ids), trace=trace, detail=args.detail)
    print(json.dumps(d) if args.json else table(d))
    return 0


def token_texts(pair, ids: list[int]) -> list[str]:
    from specviz.engine.detokenizer import TokenTexts

    texts = TokenTexts(pair.tokenizer)
    return [texts(t) for t in ids]


def _text(pair, args: argparse.Namespace):
    from specviz import engine
    from specviz.workshop.production.found import read_trace
    from specviz.workshop.tournament.text import from_pasted, from_trace

    if args.trace:
        trace = read_trace(args.trace)
        return from_trace(pair, trace), trace
    settings = from_request(
        {"max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "raw": bool(args.raw)}
    )
    answer = args.answer
    if args.answer_file:
        try:
            answer = Path(args.answer_file).read_text(encoding="utf-8")
        except OSError as e:
            raise UserError(f"cannot read {args.answer_file}: {e.strerror}") from None
    if answer is not None:
        return from_pasted(pair, args.prompt, answer, settings), None
    print("decoding the target's answer first ...", file=sys.stderr)
    trace = engine.run(pair, args.prompt, GenerationSettings(**{**settings.to_dict(), "mode": PLAIN}))
    return from_trace(pair, trace), trace
