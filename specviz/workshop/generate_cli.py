"""`python -m specviz generate`: run the engine once from the command line.

Without --json the text streams out as it is decided (in a terminal, coloured by decision:
accepted green, rejected red and struck through, resampled yellow, bonus blue), then a
summary line. With --json one object is printed: the whole trace, whose
keys include "text", "token_ids" (new tokens only), "events" and "summary".
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from specviz.workshop import progress
from specviz.errors import UserError
from specviz.events import PlainTokenEvent, RunSummary
from specviz.choices import COST_AWARE, DEVICE_MAPS, PRECISIONS, RUNTIMES, SPECULATIVE, help_line
from specviz.limits import FORMAT_CHARS
from specviz.models.catalogue.presets import DEFAULT_PAIR
from specviz.settings import (
    DEFAULTS,
    PROMPT,
    SPECS,
    GenerationSettings,
    check_prompt,
    default_words,
    from_request,
    no_draft_help,
)

# New tokens of the untimed warm-up run, here and in the bench.
WARMUP_TOKENS = 8

# ANSI styles per token kind: colour plus a second cue (strike-through, underline, bold).
STYLES = {
    "accepted": "\x1b[32m",
    "forced": "\x1b[36;3m",  # accepted, and forced by the output format: cyan italic
    "rejected": "\x1b[31;9m",
    "resampled": "\x1b[33;4m",
    "bonus": "\x1b[34;1m",
}
RESET = "\x1b[0m"


def add_arguments(parser: argparse.ArgumentParser, *, warmup: bool = True) -> None:
    """generate's options: the pair, one flag per setting (`add_settings`), and how the pair loads
    (`load_pair` reads them); --no-warmup only where the command warms up (`warmup`)."""
    parser.add_argument("--prompt", required=True, help=PROMPT.help)
    add_pair(parser)
    parser.add_argument("--draft", metavar="SRC", help="draft model: Hub id, local folder or GGUF file (with --target)")
    parser.add_argument("--target", metavar="SRC", help="target model: Hub id, local folder or GGUF file")
    add_settings(parser)
    parser.add_argument("--adaptive", action="store_true", help=f"the same as --policy {COST_AWARE}")
    add_loading(parser)
    parser.add_argument(
        "--device-map",
        choices=DEVICE_MAPS,
        help="auto: spread the target over the GPUs, then the CPU, then disk "
        "(accelerate); the draft stays on the first device (default: SPECVIZ_DEVICE_MAP, else none)",
    )
    parser.add_argument(
        "--max-memory",
        help="with --device-map auto: the most each device may hold, e.g. 0=20GiB,cpu=60GiB "
        "(default: SPECVIZ_MAX_MEMORY, else what each has)",
    )
    if warmup:
        parser.add_argument(
            "--no-warmup",
            action="store_true",
            help="time the first run on the loaded pair as it comes (default: a "
            f"{WARMUP_TOKENS}-token run first, untimed, so the run is timed warm like the bench's)",
        )
    parser.add_argument("--json", action="store_true", help="print one JSON object: the whole trace")


def add_settings(parser: argparse.ArgumentParser) -> None:
    """One flag per GenerationSettings field, from its declaration (`settings.SPECS`): --top-p for
    top_p. Each defaults to None, so `settings_from` takes only what was given (and k follows the
    policy, as everywhere)."""
    for name in SPECS:
        add_setting(parser, name)


def add_setting(parser: argparse.ArgumentParser, name: str, default: Any = None) -> None:
    """The flag of the setting `name`: its type, choices and help from its declaration."""
    s, flag = SPECS[name], "--" + name.replace("_", "-")
    if s.kind == "flag":
        parser.add_argument(flag, action="store_true", default=default, help=s.help)
        return
    listed = f": {help_line(s.registry)}" if s.registry else ""
    shown = default_words(name) if default is None else default
    parser.add_argument(
        flag,
        type=ARG_TYPES[s.kind],
        default=default,
        choices=s.registry.names if s.registry else None,
        help=f"{s.help}{listed} (default: {shown})".replace("%", "%%"),
    )


ARG_TYPES = {"whole": int, "number": float, "choice": str, "string": str}


def add_runtime(parser: argparse.ArgumentParser, more: str = "") -> None:
    """--runtime, as the bench takes it."""
    parser.add_argument(
        "--runtime",
        choices=RUNTIMES.names,
        default=RUNTIMES.default,
        help=f"{SPECS['runtime'].help}: {help_line(RUNTIMES)} (default: %(default)s){more}",
    )


def add_pair(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """--pair. generate leaves it None, to tell it apart from --draft/--target (`pair_spec`)."""
    parser.add_argument(
        "--pair",
        default=default,
        help=f"a model pair: a preset (see `python -m specviz models`) or 'DRAFT -> TARGET' (default: {DEFAULT_PAIR})",
    )


def add_loading(parser: argparse.ArgumentParser, fp32_more: str = "") -> None:
    """--device, --dtype and --fp32-draft: how the pair loads (`loading` reads them)."""
    parser.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda when available)")
    parser.add_argument(
        "--dtype",
        choices=PRECISIONS.names,
        help=f"the target's precision: {help_line(PRECISIONS)} (default: {PRECISIONS.default})",
    )
    parser.add_argument(
        "--fp32-draft",
        action="store_true",
        help=f"keep the draft in the pair's dtype on a CPU (default there: int8{fp32_more})",
    )


def loading(args: argparse.Namespace) -> dict[str, Any]:
    """`engine.load`'s arguments from the flags of `add_loading`."""
    return {"device": args.device, "dtype": args.dtype, "int8_draft": False if args.fp32_draft else None}


def settings_from(args: argparse.Namespace) -> GenerationSettings:
    """The settings the arguments name (`--adaptive` is `--policy cost-aware`)."""
    if args.adaptive and args.policy not in (None, COST_AWARE):
        raise UserError(f"--adaptive means --policy {COST_AWARE}: drop one of --adaptive and --policy {args.policy}")
    values = {name: getattr(args, name) for name in SPECS if getattr(args, name, None) is not None}
    values["policy"] = COST_AWARE if args.adaptive else (args.policy or DEFAULTS.policy)
    if values.get("output_spec", "").startswith("@"):  # --output-spec @schema.json: the file's text
        values["output_spec"] = read_spec(values["output_spec"][1:])
    return from_request(values)


def read_spec(path: str) -> str:
    """An output format's schema, pattern, choices or grammar from a file, bounded before it is read."""
    limit = FORMAT_CHARS.value
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(int(limit) + 1)
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read the output format from {path}: {e}") from None
    return FORMAT_CHARS.check_text(text)


def pair_spec(args: argparse.Namespace, needs_draft: bool) -> str | tuple[str, str]:
    """The pair --pair or --draft/--target name; a run that `needs_draft` refuses a target alone."""
    if args.pair and (args.draft or args.target):
        raise UserError("give either --pair or --draft/--target, not both")
    if args.draft and not args.target:
        raise UserError("--draft needs a --target to draft for")
    if args.target and not args.draft and needs_draft:
        raise UserError(f"--target alone gives no draft model: add --draft SRC, or {no_draft_help(flag=True)}")
    if args.target:
        return (args.draft, args.target) if args.draft else args.target
    return args.pair or DEFAULT_PAIR


def load_pair(args: argparse.Namespace, settings: GenerationSettings, **more: Any):
    """The pair the flags of `add_arguments` name, loaded as they say (`more`: load's own, such
    as progress): the one load of every command that takes generate's flags."""
    from specviz.engine.load import load

    return load(
        pair_spec(args, settings.needs_draft),
        with_draft=settings.needs_draft,
        **loading(args),
        device_map=args.device_map,
        max_memory=args.max_memory,
        runtime=settings.runtime,
        **more,
    )


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    check_prompt(args.prompt)
    pair = load_pair(args, settings, progress=progress.lines(terminal_only=True))
    warmup_s = None if args.no_warmup else warm_up(pair, args.prompt, settings)
    code = generate(pair, args.prompt, settings, as_json=args.json, out=sys.stdout)
    if warmup_s is not None and not args.json:
        print(f"(warm-up before it: {warmup_s:.1f} s, {WARMUP_TOKENS} tokens, not counted)", file=sys.stdout)
    return code


def warm_up(pair, prompt: str, settings: GenerationSettings) -> float:
    """A short untimed run of the same settings: the first passes after loading pay for
    kernels and memory that every later run finds ready. Returns its seconds."""
    from specviz import engine

    t0 = time.perf_counter()
    engine.run(pair, prompt, warmup_settings(settings), record="minimal")
    return time.perf_counter() - t0


def warmup_settings(settings: GenerationSettings) -> GenerationSettings:
    """The settings of an untimed warm-up run (here and in the bench): the same, cut short."""
    from dataclasses import replace

    return replace(settings, max_new_tokens=min(WARMUP_TOKENS, settings.max_new_tokens))


def generate(
    pair, prompt: str, settings: GenerationSettings, *, as_json: bool, out: TextIO, color: bool | None = None
) -> int:
    """Run once on a loaded pair and print the result (the testable part of `run`)."""
    from specviz import engine

    generation = engine.start(pair, prompt, settings)
    if as_json:
        for _ in generation:
            pass
        out.write(generation.trace().to_json() + "\n")
        return 0
    color = out.isatty() if color is None else color
    for event in generation:
        out.write(_render(event, color))
        out.flush()
    out.write(RESET + "\n" if color else "\n")
    trace = generation.trace()
    out.write(summary_line(trace.summary, speculative=settings.mode == SPECULATIVE) + "\n")
    return 0


def _render(event, color: bool) -> str:
    """The output text an event adds; in colour, rejected drafts are shown struck through."""
    if isinstance(event, PlainTokenEvent):
        return event.text
    parts = []
    for d in event.drafted:
        if d.decision == "accepted":
            parts.append(_style(d.text, "forced" if d.forced else "accepted", color))
        elif d.decision == "rejected" and color:
            parts.append(_style(d.text, "rejected", color))
    if event.emitted is not None:
        parts.append(_style(event.emitted.text, event.emitted.kind, color))
    return "".join(parts)


def _style(text: str, kind: str, color: bool) -> str:
    return f"{STYLES[kind]}{text}{RESET}" if color and text else text


def summary_line(s: RunSummary, *, speculative: bool) -> str:
    parts = [f"{s.new_tokens} tokens"]
    if speculative:
        parts += [
            f"{s.rounds} rounds",
            f"acceptance {s.acceptance_rate:.0%} ({s.accepted}/{s.drafted})",
            f"mean overlap {s.mean_overlap:.2f}",
            f"{s.tokens_per_round:.2f} tokens/round",
        ]
    parts += [f"{s.tokens_per_s:.2f} tokens/s", f"{s.wall_s:.1f} s", f"T {s.target_ms:.0f} ms"]
    if speculative:
        parts += [f"D {s.draft_ms:.0f} ms", f"policy {s.policy}"]
    if s.plain_ms_per_token:
        parts.append(
            f"{s.speedup_vs_plain:.2f}x plain decoding ({1000 / s.plain_ms_per_token:.2f} tokens/s, measured at load)"
        )
    if s.format_check:
        parts += [
            f"forced {s.forced} ({s.forced_accepted} accepted)",
            f"grammar {s.grammar_ms:.2f} ms/token",
            f"output {s.format_check}",
        ]
    parts += [f"load {s.load_s:.1f} s", f"stop: {s.stop_reason}"]
    return " · ".join(parts)
