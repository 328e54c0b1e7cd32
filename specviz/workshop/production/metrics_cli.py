"""`python -m specviz metrics FILE`: an engine's speculative metrics, read back and judged.

FILE is Prometheus text from /metrics (vLLM, llama-server --metrics), a JSON response (vLLM's
per-request metrics, SGLang's meta_info, llama-server's /completion), or a specviz trace; "-"
reads standard input. The speedup is predicted with --target-ms / --draft-ms / --verify-ms
typed in, or with the cost model measured for a pair (--pair) on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the payload: a file, or - for standard input")
    parser.add_argument("--target-ms", type=float, help="T: a one-token pass of the target, ms")
    parser.add_argument("--draft-ms", type=float, default=0.0, help="D: one drafted token, ms (0 for n-gram drafters)")
    parser.add_argument("--verify-ms", type=float, help="a pass over k + 1 tokens, ms (default: T, as on a GPU)")
    parser.add_argument("--pair", help="predict with this pair's cost model as measured on this machine (cached)")
    parser.add_argument("--json", action="store_true", help="print the counts and verdicts as JSON")


def run(args: argparse.Namespace) -> int:
    from specviz.errors import UserError
    from specviz.workshop.production.metrics import read
    from specviz.workshop.production.judge import cost_of, judge

    from specviz.limits import METRICS_BYTES

    most = int(METRICS_BYTES.value) + 1  # one byte past the limit is enough to refuse it
    try:
        if args.file == "-":
            data = sys.stdin.buffer.read(most)
        else:
            with open(args.file, "rb") as f:
                data = f.read(most)
    except OSError as e:
        raise UserError(f"cannot read {args.file}: {e.strerror}") from None
    if len(data) == most:
        METRICS_BYTES.check(
            os.path.getsize(args.file) if args.file != "-" else most,
            args.file if args.file != "-" else "standard input (read so far)",
        )
    counts = read(data)
    cost = cost_of(target_ms=args.target_ms, draft_ms=args.draft_ms, verify_ms=args.verify_ms, pair=args.pair)
    results = [judge(c, cost) for c in counts]
    if args.json:
        print(json.dumps([r.to_dict() for r in results], ensure_ascii=False, indent=1))
        return 0
    for r in results:
        print("\n".join(r.lines()))
    return 0
