"""`python -m specviz lossless`: run the losslessness lab on a p and q of your choice."""

from __future__ import annotations

import argparse
import json

HELP = "Monte Carlo check that the acceptance rule reproduces p exactly"

DEFAULT_Q = "0.5,0.2,0.2,0.1"
DEFAULT_P = "0.15,0.35,0.1,0.4"
TOLERANCE_SE = 5  # what counts as a match, in standard errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--q", default=DEFAULT_Q, help=f"draft distribution, comma-separated (default {DEFAULT_Q})")
    parser.add_argument("--p", default=DEFAULT_P, help=f"target distribution, comma-separated (default {DEFAULT_P})")
    parser.add_argument("--samples", type=int, default=1_000_000, help="number of drafted tokens to simulate (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def run(args: argparse.Namespace) -> int:
    from specviz.lossless import parse_distribution, simulate

    result = simulate(parse_distribution(args.p, "p"), parse_distribution(args.q, "q"), args.samples, args.seed)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(_table(result))
    return 0


def _table(r) -> str:
    lines = [f"{'token':>5}  {'p':>8}  {'q':>8}  {'min(p,q)':>8}  {'residual':>8}  {'measured':>9}  {'|error|':>9}  {'error/SE':>8}"]
    for i, (p, q, res, m, e, se) in enumerate(zip(r.p, r.q, r.residual, r.measured, r.abs_error, r.std_error)):
        z = e / se if se > 0 else (0.0 if e == 0 else float("inf"))
        lines.append(f"{i:>5}  {p:>8.4f}  {q:>8.4f}  {min(p, q):>8.4f}  {res:>8.4f}  {m:>9.6f}  {e:>9.6f}  {z:>8.2f}")
    lines += [
        "",
        f"acceptance rate {r.acceptance_rate:.6f}   overlap sum min(p,q) {r.overlap:.6f}   "
        f"difference {r.acceptance_z:.2f} standard errors",
        f"{r.samples:,} samples, seed {r.seed}, {r.seconds:.2f} s",
    ]
    worst = max(r.max_z, r.acceptance_z)
    if worst <= TOLERANCE_SE:
        lines.append(f"Output matches p within {TOLERANCE_SE} standard errors: the rule is lossless.")
    else:
        lines.append(f"Output is {worst:.1f} standard errors from the prediction: something is wrong.")
    return "\n".join(lines)
