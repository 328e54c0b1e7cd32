"""`python -m specviz COMMAND`: each command lives beside the code it drives.

A command module exposes `add_arguments(parser)` and `run(args) -> int`; its one line of help
is here, so that modules are imported only when their command runs and `--help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, NoReturn, TypeVar

from specviz.errors import UserError

# name: (module, one line of help)
COMMANDS = {
    "models": ("specviz.workshop.models_cli", "list the model pairs, or prepare one ahead of time (--prepare NAME)"),
    "generate": ("specviz.workshop.generate_cli", "generate text with speculative or plain decoding"),
    "lossless": ("specviz.workshop.lossless_cli", "Monte Carlo check that the acceptance rule reproduces p exactly"),
    "bench": ("specviz.workshop.bench.cli", "benchmark specviz against transformers' generate on one pair"),
    "sweep": (
        "specviz.workshop.labs.sweep",
        "run one prompt at several temperatures: acceptance, tokens per round, speedup",
    ),
    "batching": (
        "specviz.workshop.labs.batching",
        "time passes over several sequences at once and predict the speedup by batch size",
    ),
    "export": (
        "specviz.workshop.production.export_cli",
        "write what a run found (the pair, drafter and best k) as a vLLM, SGLang, llama.cpp or transformers command",
    ),
    "metrics": (
        "specviz.workshop.production.metrics_cli",
        "read an engine's speculative metrics (vLLM, SGLang, llama.cpp) and predict what its drafting gains",
    ),
    "train-head": (
        "specviz.workshop.training.cli",
        "train a draft head on the target's own hidden states over local text (the head drafter)",
    ),
    "schema": ("specviz.events", "print the JSON Schema of a trace file (docs/trace.schema.json)"),
}


def command(name: str):
    """The module of the command `name`, imported now: its `add_arguments` and `run`, and what
    another command may call of it (`models --prepare` trains a head through `train-head`'s)."""
    return importlib.import_module(COMMANDS[name][0])


def check_range(flag: str, value, lo, hi=None) -> None:
    """Refuse a flag's value below `lo` or above `hi` (None: no bound above), in every command's words."""
    if value is not None and not (lo <= value and (hi is None or value <= hi)):
        bound = f"{lo:,} or more" if hi is None else f"from {lo:,} to {hi:,}"
        raise UserError(f"{flag} must be {bound} (got {value:,})")


T = TypeVar("T")

# What each item of a comma-separated list must be, in a refusal's words.
ITEM_WORDS: dict[Callable, str] = {int: "whole numbers", float: "numbers", str: "names"}


def parse_list(
    flag: str, text: object, item: Callable[[str], T] = str, *, like: str = "", skip_blank: bool = True
) -> list[T]:
    """'a, b,,c' -> [item('a'), item('b'), item('c')]: each part between commas, stripped, read by
    `item` (int, float or str). A blank part is skipped, or refused where not `skip_blank`. A part
    `item` cannot read is refused naming `flag` and the part, in every command's words; `like`
    is an example of a good value."""
    example = f", like {like}" if like else ""
    if not isinstance(text, str):
        raise UserError(f"{flag} must be {ITEM_WORDS[item]} separated by commas{example} (got {text!r})")
    values = []
    for part in (p.strip() for p in text.split(",")):
        if not part and skip_blank:
            continue
        try:
            values.append(item(part))
        except ValueError:
            raise UserError(
                f"{flag} must be {ITEM_WORDS[item]} separated by commas{example} ({part!r} is not one)"
            ) from None
    return values


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments get one line on stderr (what is wrong, and where help is), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = OneLineParser(prog="python -m specviz", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, line) in COMMANDS.items():
        sub.add_parser(name, help=line, add_help=False)
    if not argv or argv[0] not in COMMANDS:
        parser.print_help() if not argv or argv[0] in ("-h", "--help") else parser.parse_args(argv)
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    name = argv[0]
    module, line = command(name), COMMANDS[name][1]
    cmd = OneLineParser(prog=f"python -m specviz {name}", description=line)
    module.add_arguments(cmd)
    args = cmd.parse_args(argv[1:])
    try:
        return module.run(args)
    except UserError as e:
        print(f"specviz {name}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"specviz {name}: interrupted", file=sys.stderr)
        return 130
