"""`python -m specviz lossless`: run the losslessness lab on a p and q of your choice.

With --bugs: the exact rule beside four mistakes real implementations ship, each on the same
p and q with the same draws, and how far each output lands from p at the temperature.
"""

from __future__ import annotations

import argparse
import json


DEFAULT_Q = "0.5,0.2,0.2,0.1"
DEFAULT_P = "0.15,0.35,0.1,0.4"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--q", default=DEFAULT_Q, help=f"draft distribution, comma-separated (default {DEFAULT_Q})")
    parser.add_argument("--p", default=DEFAULT_P, help=f"target distribution, comma-separated (default {DEFAULT_P})")
    parser.add_argument(
        "--samples", type=int, default=1_000_000, help="number of drafted tokens to simulate (default 1,000,000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument(
        "--bugs",
        action="store_true",
        help="run the exact rule beside the mistakes people ship (argmax-accept, replacement-from-p, "
        "q-before-temperature, p-without-temperature); --json keys them by rule name",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="with --bugs: the sampling temperature; p and q are read as the distributions at "
        "temperature 1 (default 0.7: the temperature mistakes are invisible at 1)",
    )


def run(args: argparse.Namespace) -> int:
    from specviz.errors import UserError
    from specviz.workshop.lossless import DEFAULT_TEMPERATURE, bug_gallery, parse_distribution, simulate

    if args.bugs:
        temperature = DEFAULT_TEMPERATURE if args.temperature is None else args.temperature
        rules = bug_gallery(
            parse_distribution(args.p, "p"), parse_distribution(args.q, "q"), temperature, args.samples, args.seed
        )
        print(json.dumps({name: r.to_dict() for name, r in rules.items()}) if args.json else _bugs_table(rules))
        return 0
    if args.temperature is not None:
        raise UserError("--temperature applies to --bugs only (the plain lab checks p and q as given)")
    result = simulate(parse_distribution(args.p, "p"), parse_distribution(args.q, "q"), args.samples, args.seed)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(_table(result))
    return 0


def _table(r) -> str:
    from specviz.workshop.lossless import Z_TOLERANCE, z_scores

    lines = [
        f"{'token':>5}  {'p':>8}  {'q':>8}  {'min(p,q)':>8}  {'residual':>8}  {'measured':>9}  {'|error|':>9}  {'error/SE':>8}"
    ]
    zs = z_scores(r.abs_error, r.std_error)
    for i, (p, q, res, m, e, z) in enumerate(zip(r.p, r.q, r.residual, r.measured, r.abs_error, zs)):
        lines.append(f"{i:>5}  {p:>8.4f}  {q:>8.4f}  {min(p, q):>8.4f}  {res:>8.4f}  {m:>9.6f}  {e:>9.6f}  {z:>8.2f}")
    lines += [
        "",
        f"acceptance rate {r.acceptance_rate:.6f}   overlap sum min(p,q) {r.overlap:.6f}   "
        f"difference {r.acceptance_z:.2f} standard errors",
        f"{r.samples:,} samples, seed {r.seed}, {r.seconds:.2f} s",
    ]
    worst = max(r.max_z, r.acceptance_z)
    if worst <= Z_TOLERANCE:
        lines.append(f"Output matches p within {Z_TOLERANCE} standard errors: the rule is lossless.")
    else:
        lines.append(f"Output is {worst:.1f} standard errors from the prediction: something is wrong.")
    return "\n".join(lines)


def _bugs_table(rules: dict) -> str:
    from specviz.workshop.lossless import Z_TOLERANCE

    first = next(iter(rules.values()))
    t = first.temperature

    def dist(values) -> str:
        return " ".join(f"{v:.4f}" for v in values)

    width = max(len(dist(first.target)), len("output frequencies"))
    lines = [
        f"p at T = {t:g} (what the output should be): {dist(first.target)}",
        f"q at T = {t:g} (what every rule drafts from): {dist(first.draft)}",
        f"{first.samples:,} draws per rule, seed {first.seed}",
        "",
        f"{'rule':<22}  {'output frequencies':<{width}}  {'TV':>8}  {'SE':>8}  {'exact TV':>8}  {'max z':>7}  verdict",
    ]
    for name, r in rules.items():
        verdict = "within noise" if r.within_noise else "measurably off"
        lines.append(
            f"{name:<22}  {dist(r.measured):<{width}}  {r.tv:>8.5f}  {r.tv_std_error:>8.5f}  "
            f"{r.tv_expected:>8.5f}  {r.max_z:>7.1f}  {verdict}"
        )
    lines += [
        "",
        f"TV: total variation distance of the output frequencies from p at T = {t:g}, with its standard error (SE);",
        "exact TV: the rule's TV in the limit of many draws, from its output distribution in closed form;",
        f"max z: the largest gap between a token's frequency and p at T, in standard errors (within noise: <= {Z_TOLERANCE}).",
        f"Sampling noise alone gives an exact rule a TV of about {first.tv_noise:.5f}, not 0.",
        "",
    ]
    lines += [f"{name} ({r.title}): {r.in_practice}" for name, r in rules.items() if name != "exact"]
    return "\n".join(lines)
