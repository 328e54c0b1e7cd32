"""Speculative against plain decoding: the race replay, tokens over time, the comparison
table and the greedy identity check.

The replay needs no JavaScript: `race_frame` says what each column shows at time t from the
recorded `t_end_s` of every event, so the app animates by stepping t.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from specviz.run_stats import rounds_of
from specviz.choices import PLAIN, SPECULATIVE
from specviz.events import Event, PlainTokenEvent, RoundEvent, RunSummary, Trace
from specviz.viz.inspector import NEAR_TIE_LOGITS
from specviz.viz.palette import ACCEPTED, TARGET, empty_figure, style_figure
from specviz.viz.text import esc, panel_html, paragraphs_html, quoted, table_html, words_html
from specviz.viz.tokens import tokens_html

Run = Trace | Sequence[Event]
REPLAY_FRAME_S = 0.1  # one replay frame every 100 ms of screen time
MAX_REPLAY_FRAMES = 1200  # two minutes of screen time at most


def _events(run: Run) -> list[Event]:
    return list(run.events if isinstance(run, Trace) else run)


def race_end_s(*runs: Run) -> float:
    """When the slower run finished: the end of the replay's time axis."""
    return max((e.t_end_s for run in runs for e in _events(run)), default=0.0)


def replay_times(end_s: float, speed: float) -> list[float]:
    """The race's time at each frame of a replay at `speed` times the measured pace, one frame
    per REPLAY_FRAME_S of screen time. A race longer than MAX_REPLAY_FRAMES frames is replayed
    faster, so the count stays bounded whatever times a trace holds."""
    if not (math.isfinite(end_s) and end_s > 0 and math.isfinite(speed) and speed > 0):
        return [0.0]
    step = max(REPLAY_FRAME_S * speed, end_s / MAX_REPLAY_FRAMES)
    frames = math.ceil(end_s / step)
    return [min(i * step, end_s) for i in range(frames + 1)]


def race_column_html(run: Run, t_s: float, name: str) -> str:
    """One column of the race at time t: a caption and the tokens known by then."""
    events = _events(run)
    shown = [e for e in events if e.t_end_s <= t_s]
    done = bool(events) and len(shown) == len(events)
    n = max((r.new_tokens for r in rounds_of(shown)), default=0) + sum(isinstance(e, PlainTokenEvent) for e in shown)
    when = f"done: {n} tokens in {events[-1].t_end_s:.2f} s" if done else f"{n} tokens at {t_s:.2f} s"
    return f'<div class="sv-race-caption">{esc(name)} \u00b7 {esc(when)}</div>' + tokens_html(shown)


def race_frame(spec_trace: Run, plain_trace: Run, t_s: float) -> tuple[str, str]:
    """(speculative column, plain column) as HTML, showing what each run had at t_s seconds."""
    return race_column_html(spec_trace, t_s, SPECULATIVE), race_column_html(plain_trace, t_s, PLAIN)


def _curve(events: list[Event]) -> tuple[list[float], list[int]]:
    t, n = [0.0], [0]
    for e in events:
        t.append(e.t_end_s)
        n.append(e.new_tokens if isinstance(e, RoundEvent) else n[-1] + 1)
    return t, n


def tokens_vs_time_figure(
    spec_trace: Run, plain_trace: Run | None = None, title: str | None = "Tokens over time"
) -> go.Figure:
    """Step lines of tokens generated against seconds for both runs."""
    spec = _events(spec_trace)
    plain = _events(plain_trace) if plain_trace is not None else []
    if not spec and not plain:
        return empty_figure("No run yet", title)
    fig = go.Figure()
    for events, name, colour in ((spec, SPECULATIVE, ACCEPTED), (plain, PLAIN, TARGET)):
        if events:
            t, n = _curve(events)
            fig.add_scatter(
                x=t,
                y=n,
                name=name,
                mode="lines",
                line={"shape": "hv", "color": colour, "width": 2.5},
                hovertemplate=f"{name}: %{{y}} tokens at %{{x:.2f}} s<extra></extra>",
            )
    fig.update_layout(
        xaxis={"title": "seconds", "rangemode": "tozero"},
        yaxis={"title": "tokens", "rangemode": "tozero"},
        hovermode="x unified",
    )
    return style_figure(fig, title, height=300)


def comparison_html(spec: RunSummary, plain: RunSummary) -> str:
    """A table of both runs (wall time, tokens, tokens/s, forward passes) and the headline."""
    rows = [
        ("wall time", f"{spec.wall_s:.2f} s", f"{plain.wall_s:.2f} s"),
        ("new tokens", str(spec.new_tokens), str(plain.new_tokens)),
        ("tokens / s", f"{spec.tokens_per_s:.2f}", f"{plain.tokens_per_s:.2f}"),
        ("target forward passes", str(spec.target_passes), str(plain.target_passes)),
        ("draft forward passes", str(spec.draft_passes), str(plain.draft_passes)),
    ]
    if plain.tokens_per_s > 0 and spec.tokens_per_s > 0:
        ratio = spec.tokens_per_s / plain.tokens_per_s
        verdict = f"Speculative decoding ran at {ratio:.2f}\u00d7 the speed of plain decoding" + (
            " (slower)." if ratio < 1 else "."
        )
    else:
        verdict = "Not enough data to compare speeds yet."
    if plain.target_passes > 0 and spec.new_tokens and plain.new_tokens:
        per_tok = (spec.target_passes / spec.new_tokens) / (plain.target_passes / plain.new_tokens)
        verdict += f" It needed {1 - per_tok:.0%} fewer target passes per token."
    return panel_html(paragraphs_html([verdict]), table_html(["", SPECULATIVE, PLAIN], rows))


def output_tokens(run: Run) -> list[tuple[int, str]]:
    """(id, text) of every output token, in order, from the events."""
    out: list[tuple[int, str]] = []
    for e in _events(run):
        if isinstance(e, RoundEvent):
            out += [(d.id, d.text) for d in e.drafted if d.decision == "accepted"]
            if e.emitted is not None:
                out.append((e.emitted.id, e.emitted.text))
        elif isinstance(e, PlainTokenEvent):
            out.append((e.id, e.text))
    return out


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first token where a and b differ (or where the shorter ends); None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass
class Identity:
    identical: bool
    first_difference: int | None
    compared: int  # tokens in the shorter output
    top2_logit_gap: float | None  # the target's top-2 gap where the speculative run diverged


def _gap_at(run: Run, index: int) -> float | None:
    """The target's top-2 logit gap at the position that produced output token `index`."""
    seen = 0
    for e in _events(run):
        if not isinstance(e, RoundEvent):
            continue
        if index < seen + e.gained:
            pos = index - seen
            return e.positions[pos].top2_logit_gap if pos < len(e.positions) else None
        seen += e.gained
    return None


def identity_check(spec_trace: Run, plain_trace: Run) -> Identity:
    spec, plain = output_tokens(spec_trace), output_tokens(plain_trace)
    i = first_difference([t for t, _ in spec], [t for t, _ in plain])
    gap = _gap_at(spec_trace, i) if i is not None and i < min(len(spec), len(plain)) else None
    return Identity(i is None, i, min(len(spec), len(plain)), gap)


def identity_html(spec_trace: Run, plain_trace: Run) -> str:
    """Token-by-token comparison of the two outputs, in words.

    Greedy speculative decoding (the spec trace's temperature 0) must reproduce plain greedy
    decoding exactly; a difference is explained by the target's top-2 logit gap there (a
    near-tie can flip between a one-token and a multi-token pass in low precision), never hidden.
    """
    spec, plain = output_tokens(spec_trace), output_tokens(plain_trace)
    ident = identity_check(spec_trace, plain_trace)
    if ident.identical:
        words = f"Identical: all {len(spec)} tokens match, token for token."
    elif ident.first_difference >= ident.compared:
        longer = SPECULATIVE if len(spec) > len(plain) else PLAIN
        words = (
            f"The first {ident.compared} tokens are identical; then the {longer} run goes on "
            f"({len(spec)} speculative tokens, {len(plain)} plain)."
        )
    else:
        i = ident.first_difference
        words = f"The outputs first differ at token {i}: speculative {quoted(spec[i][1])}, plain {quoted(plain[i][1])}."
        if ident.top2_logit_gap is not None:
            g = ident.top2_logit_gap
            words += (
                f" The target's top two logits there differ by only {g:.3f}: a near-tie, which rounding in a "
                "multi-token pass can flip."
                if g < NEAR_TIE_LOGITS
                else f" The target's top two logits there differ by {g:.3f}, too much for rounding: this is unexpected."
            )
    if isinstance(spec_trace, Trace) and spec_trace.settings.get("temperature", 0):
        words = (
            "Sampling: the two runs draw different random numbers, so their texts may differ; what they share "
            "is the output distribution (see the lossless lab). "
        ) + words
    return words_html([words])
