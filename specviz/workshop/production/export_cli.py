"""`python -m specviz export`: a run's findings as another engine's command or code.

    python -m specviz generate --prompt "..." --json > run.json
    python -m specviz export --trace run.json --format llamacpp

Without --trace, the pair and the drafter with --k as they are.
"""

from __future__ import annotations

import argparse
import json

from specviz.choices import DRAFTERS, FIXED
from specviz.models.catalogue.presets import DEFAULT_PAIR
from specviz.settings import DEFAULTS, GenerationSettings, default_k


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from specviz.workshop.production.export import FORMATS

    parser.add_argument("--format", required=True, choices=FORMATS, help="the engine to export to")
    parser.add_argument(
        "--trace", metavar="FILE", help="a speculative run's trace (generate --json, or the page's download)"
    )
    parser.add_argument("--pair", help=f"a model pair preset, without --trace (default: {DEFAULT_PAIR})")
    parser.add_argument(
        "--drafter", choices=DRAFTERS.names, default=DEFAULTS.drafter, help="without --trace (default: %(default)s)"
    )
    parser.add_argument(
        "--k", type=int, default=default_k(FIXED), help="draft length, without --trace (default: %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object: format, language, text, notes")


def run(args: argparse.Namespace) -> int:
    from specviz.workshop.production import found
    from specviz.workshop.production.export import export

    if args.trace:
        what = found.from_trace(found.read_trace(args.trace))
    else:
        settings = GenerationSettings(drafter=args.drafter, k=args.k)
        what = found.from_settings(args.pair or DEFAULT_PAIR, settings)
    out = export(what, args.format)
    if args.json:
        print(json.dumps(out.to_dict(), ensure_ascii=False, indent=1))
        return 0
    if out.text:
        print(out.text)
    for note in out.notes:
        print(f"# {note}")
    return 0 if out.text else 1
