"""`python -m specviz train-head`: train the target's draft head here, from local text only.

The target reads Python source of the installed packages (`corpus.py`) on the runtime
`--runtime` names (auto: the one measured faster here); its states train a head
(`train.py`), which is stored under the cache's `heads/` with what it was trained on and its
held-out acceptance. The head drafter (`--drafter head`) then finds it for that target.
"""

from __future__ import annotations

import argparse
import time

from specviz.choices import RUNTIMES
from specviz.models import DEFAULT_PAIR
from specviz.workshop import progress
from specviz.workshop.training.train import Plan

# Shares of the time budget: the target reading source, then answering requests made from
# it (a decoding token costs several read ones); training gets the rest.
READ_SHARE = 0.35
ANSWER_SHARE = 0.25
# The command's defaults, which `train_for` takes too (the vocabulary subset's and the seed's are `Plan`'s).
TOKENS = 60_000  # of source the target reads
ANSWER_TOKENS = 12_000  # the target writes answering requests made from the source
MINUTES = 30.0  # for reading and training together, at most
WINDOW = 512  # tokens of one file the target reads at a time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from specviz.workshop.generate_cli import add_runtime

    parser.add_argument("--pair", help=f"the preset whose target gets a head (default {DEFAULT_PAIR})")
    parser.add_argument("--target", metavar="SRC", help="or a target model: Hub id, local folder or GGUF file")
    add_runtime(parser)
    parser.add_argument(
        "--tokens", type=int, default=TOKENS, help="tokens of source the target reads (default %(default)s)"
    )
    parser.add_argument(
        "--answer-tokens",
        type=int,
        default=ANSWER_TOKENS,
        help="tokens the target writes answering requests made from the source (default %(default)s)",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=MINUTES,
        help="time for reading and training together, at most (default %(default)s)",
    )
    parser.add_argument(
        "--subset",
        type=int,
        default=Plan.subset,
        help="vocabulary the head reads out, most frequent first (default %(default)s)",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=WINDOW,
        choices=range(16, 4097),
        metavar="16..4096",
        help="tokens of one file the target reads at a time (default %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=Plan.seed)


def run(args: argparse.Namespace) -> int:
    from specviz.workshop.cli import check_range

    check_range("--tokens", args.tokens, 1_000, 2_000_000)
    check_range("--answer-tokens", args.answer_tokens, 0, 500_000)
    check_range("--minutes", args.minutes, 0.5, 600)
    check_range("--seed", args.seed, 0, 2**32 - 1)
    check_range("--subset", args.subset, 64, 1_000_000)
    train_for(
        args.target or args.pair or DEFAULT_PAIR,
        runtime=args.runtime,
        tokens=args.tokens,
        answer_tokens=args.answer_tokens,
        minutes=args.minutes,
        subset=args.subset,
        window=args.window,
        seed=args.seed,
    )
    return 0


def train_for(
    spec,
    *,
    runtime: str = RUNTIMES.default,
    tokens: int = TOKENS,
    answer_tokens: int = ANSWER_TOKENS,
    minutes: float = MINUTES,
    subset: int = Plan.subset,
    window: int = WINDOW,
    seed: int = Plan.seed,
):
    """Train the head of `spec`'s target and store it where the head drafter finds it."""
    from specviz.drafters.head import head_path, target_label
    from specviz.drafters.head_model import save
    from specviz.costs.runtime_choice import choose
    from specviz.lm import load_pair
    from specviz.workshop.training import corpus, states, train
    from specviz.workshop.training.tables import target_tables

    start = time.perf_counter()
    runtime = choose(spec, runtime).runtime
    pair = load_pair(spec, with_draft=False, runtime=runtime, progress=_say)
    files = corpus.source_files(seed)
    _say(0.0, f"{len(files):,} source files; the target ({runtime}) reads up to {tokens:,} tokens of them")
    budget_s = minutes * 60
    parts = {
        "source": states.collect(
            pair, corpus.windows(files, pair.tokenizer, window), tokens, _say, deadline=start + READ_SHARE * budget_s
        )
    }
    if answer_tokens:  # requests from files the reading did not reach
        asked = corpus.requests(files[::-1])
        parts["answers"] = states.answer(
            pair, asked, answer_tokens, _say, deadline=start + (READ_SHARE + ANSWER_SHARE) * budget_s
        )
    plan = train.Plan(subset=subset, seconds=max(10.0, budget_s - (time.perf_counter() - start)), seed=seed)
    head, info = train.train_head(
        parts,
        target_tables(pair),
        plan,
        label=target_label(pair),
        runtime=runtime,
        corpus=corpus.DESCRIPTION,
        progress=_say,
    )
    path = head_path(target_label(pair))
    save(head, info, path)
    print(f"head for {info.target}: {path}")
    print(
        f"{', '.join(f'{n:,} {k} tokens' for k, n in info.tokens.items())}; {info.steps:,} steps "
        f"({info.precision}); {info.seconds:.0f} s training, {time.perf_counter() - start:.0f} s in all"
    )
    for name, rates in info.acceptance.items():
        print(
            f"held-out greedy acceptance by draft position, {name}: {', '.join(f'{a:.2f}' for a in rates)} "
            f"(the subset of {info.subset:,} tokens holds {info.subset_coverage[name]:.1%} of the target's choices)"
        )
    return head, info


_say = progress.lines(per_percent=True)
