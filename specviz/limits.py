"""The sizes and counts a visitor sends that are not generation settings, each bounded once.

The page, the API (and the MCP tools it serves) and the command line check the same limit
before any work that grows with the value, and refuse in one line that names the value, the
limit and the environment variable that changes it:

    k_max is 5000000; the limit is 64 (SPECVIZ_MAX_K)

A limit is read from its environment variable each time it is checked; the page checks them all
at launch (`check_environment`), so a bad setting stops it there in one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from specviz.errors import UserError


class LimitError(UserError):
    """A size or count over its limit."""


@dataclass(frozen=True)
class Limit:
    name: str  # what is counted, as a refusal names it
    default: float
    env: str  # the environment variable that changes it
    what: str  # one line for the table in docs/DEPLOYING.md
    unit: str = ""  # after the numbers in a refusal: "bytes", "characters"

    @property
    def value(self) -> float:
        return self.read(os.environ)

    def read(self, env: Mapping[str, str]) -> float:
        """The limit as `env` sets it, or its default; LimitError for a value that is not a number above 0."""
        raw = env.get(self.env)
        if raw is None or not raw.strip():
            return self.default
        try:
            v = float(raw)
        except ValueError:
            v = float("nan")
        if not 0 < v < float("inf"):
            raise LimitError(f"{self.env} is {raw!r}; it must be a number above 0 (default {_show(self.default)})")
        return int(v) if float(self.default).is_integer() and v.is_integer() else v

    def check(self, value: float, name: str | None = None):
        """`value`, or LimitError when it is over the limit."""
        limit = self.value
        if value > limit:
            unit = f" {self.unit}" if self.unit else ""
            raise LimitError(
                f"{name or self.name} is {_show(value)}{unit}; the limit is {_show(limit)}{unit} ({self.env})"
            )
        return value

    def check_text(self, text: str, name: str | None = None) -> str:
        """`text`, or LimitError when it holds more characters than the limit."""
        self.check(len(text), name)
        return text


def _show(x: float) -> str:
    """A number in a refusal: whole numbers with thousands separators, huge ones as 1e+300."""
    if abs(x) >= 1e15:
        return f"{float(x):.3g}"
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


METRICS_BYTES = Limit(
    "the metrics payload",
    2_000_000,
    "SPECVIZ_MAX_METRICS_BYTES",
    "bytes of a metrics payload (Prometheus text or JSON) read by the Production tab, API and CLI",
    "bytes",
)
METRICS_LINE = Limit(
    "a Prometheus line",
    4_096,
    "SPECVIZ_MAX_METRICS_LINE",
    "characters of one Prometheus sample line, its labels included",
    "characters",
)
METRICS_POSITIONS = Limit(
    "the position label",
    256,
    "SPECVIZ_MAX_POSITIONS",
    "draft positions in a metrics payload: the largest `position` label, an `acceptance_histogram`'s entries less one",
)
METRICS_OBJECTS = Limit(
    "the number of JSON objects",
    10_000,
    "SPECVIZ_MAX_METRICS_OBJECTS",
    "JSON responses read at once (a list, JSON lines or a stream)",
)
K_MAX = Limit("k_max", 64, "SPECVIZ_MAX_K", "the longest draft `best_k` searches, and `speedup`'s k")
DISTRIBUTION_ENTRIES = Limit(
    "entries", 1_024, "SPECVIZ_MAX_DISTRIBUTION", "entries of the Lossless lab's p and q (page, API, CLI)"
)
DISTRIBUTION_CHARS = Limit(
    "the distribution",
    65_536,
    "SPECVIZ_MAX_DISTRIBUTION_CHARS",
    "characters of the Lossless lab's p or q as typed",
    "characters",
)
SAMPLES = Limit(
    "samples", 20_000_000, "SPECVIZ_MAX_SAMPLES", "draws of one Lossless lab run (each rule's, in the bug gallery)"
)
TEMPERATURES = Limit("the number of temperatures", 8, "SPECVIZ_MAX_TEMPERATURES", "temperatures in one sweep")
TEMPERATURES_CHARS = Limit(
    "the temperatures", 200, "SPECVIZ_MAX_TEMPERATURES_CHARS", "characters of the sweep's list", "characters"
)
SWEEP_WALL_S = Limit(
    "the sweep's wall time",
    600,
    "SPECVIZ_MAX_SWEEP_S",
    "seconds one temperature sweep may hold the model, all its runs together",
    "s",
)
BATCH_SIZE = Limit("the batch size", 64, "SPECVIZ_MAX_BATCH", "sequences in one pass of the batching lab")
BATCH_SIZES = Limit("the number of batch sizes", 8, "SPECVIZ_MAX_BATCH_SIZES", "batch sizes the batching lab times")
REPEATS = Limit("repeats", 20, "SPECVIZ_MAX_REPEATS", "timed passes per size in the batching lab")
PAIR_CHARS = Limit(
    "the pair", 512, "SPECVIZ_MAX_PAIR_CHARS", "characters of a pair: a preset, or 'DRAFT -> TARGET'", "characters"
)
FORMAT_CHARS = Limit(
    "the output format",
    32_000,
    "SPECVIZ_MAX_FORMAT_CHARS",
    "characters of an output format's schema, pattern, list or grammar",
    "characters",
)
FORMAT_DEPTH = Limit("the schema's nesting", 24, "SPECVIZ_MAX_FORMAT_DEPTH", "levels of nesting of a JSON schema")
FORMAT_ALTERNATIVES = Limit(
    "the alternatives",
    1_000,
    "SPECVIZ_MAX_FORMAT_ALTERNATIVES",
    "alternatives of an output format: a list's strings, a schema's enum values and anyOf / oneOf branches together",
)
GRAMMAR_FUEL = Limit(
    "the grammar's compile work",
    2_000_000,
    "SPECVIZ_MAX_GRAMMAR_FUEL",
    "llguidance's lexer fuel for compiling an output format (about 50,000 a millisecond)",
)
GRAMMAR_STATES = Limit(
    "the grammar's lexer states",
    50_000,
    "SPECVIZ_MAX_GRAMMAR_STATES",
    "lexer states llguidance may build for an output format (its memory: 1-2 kB each)",
)
GRAMMAR_SIZE = Limit(
    "the grammar's size", 100_000, "SPECVIZ_MAX_GRAMMAR_SIZE", "symbols in the productions of a compiled output format"
)

TOURNAMENT_TOKENS = Limit(
    "the answer",
    512,
    "SPECVIZ_MAX_TOURNAMENT_TOKENS",
    "tokens of the answer a tournament replays every drafter over (page, API, MCP, CLI)",
    "tokens",
)
TOURNAMENT_CONTEXT = Limit(
    "the prompt and answer",
    4_096,
    "SPECVIZ_MAX_TOURNAMENT_CONTEXT",
    "tokens of a tournament's prompt and answer together, read by one target pass",
    "tokens",
)
TOURNAMENT_CHARS = Limit(
    "the answer",
    40_000,
    "SPECVIZ_MAX_TOURNAMENT_CHARS",
    "characters of an answer pasted into a tournament, before its tokenizer reads it",
    "characters",
)

UPLOADS_MEMORY = Limit(
    "the memory of uploaded traces",
    1_500_000_000,
    "SPECVIZ_MAX_UPLOADS_MEMORY",
    "bytes of memory the page's uploaded traces may hold, all sessions together (each counted at 13 times its file)",
    "bytes",
)

ALL = tuple(v for v in list(globals().values()) if isinstance(v, Limit))  # every limit above, in order


def check_distribution_text(text: str, name: str) -> str:
    """A distribution as typed ('0.5,0.2,...'), bounded before it is split or parsed."""
    DISTRIBUTION_CHARS.check_text(text, name)
    DISTRIBUTION_ENTRIES.check(text.count(",") + 1, f"{name}'s length")
    return text


def check_environment() -> None:
    """Every limit's variable read once, so a bad one stops a launch in one line."""
    for lim in ALL:
        lim.read(os.environ)


def table() -> str:
    """The limits as Markdown rows: what, default, environment variable."""
    return "\n".join(f"| {lim.what} | {_show(lim.default)} | `{lim.env}` |" for lim in ALL)
