"""The same prompt at several temperatures: measured acceptance, tokens per round and speedup
over plain decoding, run by run.

    rows = sweep(pair, prompt, settings, [0, 0.3, 0.7, 1.0]).rows

Each run is the engine's own (`specviz.engine.start`) with only the temperature changed, so
the seed, k and policy stay as given. Speedup is the run's tokens per second over plain
decoding's, 1000 / plain_ms_per_token, where the one-token target pass comes from the pair's
cost model (the run's summary carries it as `speedup_vs_plain` when the engine records it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TextIO

from specviz import limits
from specviz.choices import SPECULATIVE
from specviz.errors import UserError, shown
from specviz.events import Trace
from specviz.models.progress import Progress
from specviz.workshop.cli import parse_list
from specviz.settings import GenerationSettings

DEFAULT_TEMPERATURES = "0,0.3,0.7,1.0"
SWEEP_MAX_NEW_TOKENS = 48  # short runs: a sweep of four on the bundled pair stays in minutes


@dataclass
class SweepRow:
    temperature: float
    acceptance: float  # accepted / judged drafts
    mean_overlap: float
    tokens_per_round: float
    tokens_per_s: float
    speedup: float  # over plain decoding of the target
    plain_ms_per_token: float  # what the speedup divides by
    new_tokens: int
    rounds: int
    stop_reason: str


@dataclass
class Sweep:
    rows: list[SweepRow]
    cancelled: bool = False  # stopped before every temperature had run
    out_of_time: bool = False  # stopped by the sweep's wall-time limit (limits.SWEEP_WALL_S)
    traces: list[Trace] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [asdict(r) for r in self.rows], "cancelled": self.cancelled, "out_of_time": self.out_of_time}


def parse_temperatures(text: str, name: str = "temperatures") -> list[float]:
    """'0,0.7' -> [0.0, 0.7]: each a temperature the settings accept, no repeats, at most
    limits.TEMPERATURES of them. `name`: the field or flag, for a refusal."""
    text = limits.TEMPERATURES_CHARS.check_text(str(text))
    temps = parse_list(name, text, float, like=DEFAULT_TEMPERATURES)
    if not temps:
        raise UserError(f"give at least one temperature, like {DEFAULT_TEMPERATURES}")
    limits.TEMPERATURES.check(len(temps))
    if len(set(temps)) != len(temps):
        raise UserError(f"each temperature once (got {shown(text)})")
    for t in temps:
        GenerationSettings(temperature=t)  # refused here, in words, if out of range
    return temps


def wall_left(started: float, max_wall_s: float | None) -> float:
    """Seconds the next run of a sweep begun at `started` (time.monotonic()) may take: what is
    left of the sweep's own limit (limits.SWEEP_WALL_S), and at most a run's `max_wall_s`.
    0 when nothing is left: the sweep stops there, so one click never holds the model for hours."""
    left = max(0.0, limits.SWEEP_WALL_S.value - (time.monotonic() - started))
    return left if max_wall_s is None else min(max_wall_s, left)


def plain_ms_per_token(trace: Trace, cost_model: Mapping | None = None) -> float | None:
    """The one-token target pass a speedup divides by: the summary's own figure, else V(1) of
    the given cost model, else of the one the trace recorded."""
    ms = getattr(trace.summary, "plain_ms_per_token", None)
    if ms:
        return float(ms)
    model = cost_model or trace.meta.get("cost_model")
    if model:
        return float(min(v for n, v in model["verify"].items() if int(n) == 1))
    return None


def row_of(trace: Trace, temperature: float, cost_model: Mapping | None = None) -> SweepRow:
    s = trace.summary
    plain_ms = plain_ms_per_token(trace, cost_model)
    speedup = getattr(s, "speedup_vs_plain", None) or (s.tokens_per_s * plain_ms / 1000 if plain_ms else 0.0)
    return SweepRow(
        temperature,
        s.acceptance_rate,
        s.mean_overlap,
        s.tokens_per_round,
        s.tokens_per_s,
        float(speedup),
        float(plain_ms or 0.0),
        s.new_tokens,
        s.rounds,
        s.stop_reason,
    )


def sweep(
    pair,
    prompt: str,
    settings: GenerationSettings,
    temperatures: Sequence[float],
    *,
    should_stop: Callable[[], bool] | None = None,
    on_progress: Progress | None = None,
    cost_model: Mapping | None = None,
    max_wall_s: float | None = None,
) -> Sweep:
    """One speculative run per temperature, in order. `should_stop` is checked before every
    round; a run it stops is dropped and the sweep returns the rows so far, cancelled.
    `on_progress(fraction, message)` follows the rounds. `cost_model` (a CostModel.to_dict())
    gives the plain speed when the runs do not record one; else the pair's is measured or
    read from its cache."""
    from specviz import engine

    if settings.mode != SPECULATIVE:
        raise UserError("a temperature sweep compares speculative runs: use --mode speculative")
    temps = list(temperatures)
    limits.TEMPERATURES.check(len(temps))
    out, started = Sweep(rows=[]), time.monotonic()
    for i, t in enumerate(temps):
        if should_stop is not None and should_stop():
            out.cancelled = True
            break
        wall_s = wall_left(started, max_wall_s)
        if wall_s <= 0:
            out.cancelled = out.out_of_time = True
            break
        run_settings = replace(settings, temperature=float(t))
        generation = engine.start(pair, prompt, run_settings, should_stop=should_stop, max_wall_s=wall_s)
        for event in generation:
            if on_progress is not None:
                done = min(getattr(event, "new_tokens", 0) / run_settings.max_new_tokens, 1.0)
                on_progress((i + done) / len(temps), f"temperature {t:g}: {getattr(event, 'new_tokens', 0)} tokens")
        trace = generation.trace()
        if trace.summary.stop_reason == "cancelled":
            out.cancelled = True
            break
        if cost_model is None and plain_ms_per_token(trace) is None:
            from specviz.costs.measure import for_pair

            cost_model = for_pair(pair).to_dict()
        out.rows.append(row_of(trace, float(t), cost_model))
        out.traces.append(trace)
    if on_progress is not None and not out.cancelled:
        on_progress(1.0, "done")
    return out


def table(rows: Sequence[SweepRow]) -> str:
    lines = ["temperature  acceptance  overlap  tokens/round  tokens/s  speedup  tokens  stop"]
    for r in rows:
        lines.append(
            f"{r.temperature:>11g}  {r.acceptance:>10.0%}  {r.mean_overlap:>7.2f}  {r.tokens_per_round:>12.2f}  "
            f"{r.tokens_per_s:>8.2f}  {r.speedup:>6.2f}\u00d7  {r.new_tokens:>6}  {r.stop_reason}"
        )
    if rows:
        lines.append(
            f"speedup: tokens/s over plain decoding's {1000 / rows[0].plain_ms_per_token:.2f} tokens/s "
            f"(one target pass: {rows[0].plain_ms_per_token:.0f} ms)"
            if rows[0].plain_ms_per_token
            else ""
        )
    return "\n".join(lines)


# --- `python -m specviz sweep` ---------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from specviz.workshop import generate_cli

    generate_cli.add_arguments(parser, warmup=False)  # a sweep runs no warm-up to skip
    parser.add_argument(
        "--temperatures",
        default=DEFAULT_TEMPERATURES,
        help="comma-separated temperatures, each run once (default: %(default)s; --temperature is ignored)",
    )
    parser.set_defaults(max_new_tokens=SWEEP_MAX_NEW_TOKENS)


def run(args: argparse.Namespace) -> int:
    from specviz.workshop import generate_cli
    from specviz.lm.prompt import check_prompt

    settings = generate_cli.settings_from(args)
    temperatures = parse_temperatures(args.temperatures, "--temperatures")
    check_prompt(args.prompt)
    if settings.mode != SPECULATIVE:
        raise UserError("a temperature sweep compares speculative runs: use --mode speculative")
    pair = generate_cli.load_pair(args, settings)
    return report(pair, args.prompt, settings, temperatures, as_json=args.json, out=sys.stdout)


def report(
    pair,
    prompt: str,
    settings: GenerationSettings,
    temperatures: Sequence[float],
    *,
    as_json: bool,
    out: TextIO,
    cost_model: Mapping | None = None,
) -> int:
    """Run the sweep on a loaded pair and print it (the testable part of `run`)."""
    progress = None if as_json else (lambda f, m: print(f"  {f:4.0%} {m}", file=sys.stderr))
    result = sweep(pair, prompt, settings, temperatures, on_progress=progress, cost_model=cost_model)
    if as_json:
        out.write(json.dumps(result.to_dict()) + "\n")
    else:
        out.write(table(result.rows) + "\n")
    return 0
