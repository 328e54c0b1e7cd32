"""Per-round timeline: how long the draft and the verify pass took, and what they gained."""

from __future__ import annotations

from collections.abc import Iterable

import plotly.graph_objects as go

from specviz.run_stats import rounds_of
from specviz.events import Event, RoundEvent
from specviz.viz.palette import BONUS, DRAFT, NEUTRAL, RESAMPLED, TARGET, empty_figure, style_figure, whole_dtick


def round_timeline_figure(events: Iterable[Event], title: str | None = "Time per round") -> go.Figure:
    """Stacked bars of draft ms and verify ms per round, with tokens gained and the k each
    round drafted (the policy's choice) on a second axis.

    The tokens-gained markers are blue when the round ended with a bonus token (all drafts
    accepted) and amber when it ended with a replacement.
    """
    rounds = rounds_of(events)
    if not rounds:
        return empty_figure("No rounds yet", title)
    x = [r.index for r in rounds]
    fig = go.Figure()
    _add_time_bars(fig, rounds, x)
    _add_token_lines(fig, rounds, x)
    top = max(max(r.gained for r in rounds), max(r.k for r in rounds) + 1)
    fig.update_layout(
        barmode="stack",
        legend={"traceorder": "normal"},
        xaxis={"title": "round", "tick0": 0, "dtick": whole_dtick(max(x) - min(x) + 1)},
        yaxis={"title": "ms", "rangemode": "tozero"},
        yaxis2={
            "title": "tokens",
            "overlaying": "y",
            "side": "right",
            "showgrid": False,
            "range": [0, top + 0.5],
            "tick0": 0,
            "dtick": whole_dtick(top, 5),
        },
    )
    return style_figure(fig, title)


def _add_time_bars(fig: go.Figure, rounds: list[RoundEvent], x: list[int]) -> None:
    """Each round's draft ms and verify ms, stacked, at `x` (the rounds' indices)."""
    fig.add_bar(
        x=x,
        y=[r.draft_ms for r in rounds],
        name="draft",
        marker_color=DRAFT,
        customdata=[r.k for r in rounds],
        hovertemplate="round %{x}: draft %{y:.0f} ms (k = %{customdata})<extra></extra>",
    )
    fig.add_bar(
        x=x,
        y=[r.verify_ms for r in rounds],
        name="verify",
        marker_color=TARGET,
        hovertemplate="round %{x}: verify %{y:.0f} ms<extra></extra>",
    )


def _add_token_lines(fig: go.Figure, rounds: list[RoundEvent], x: list[int]) -> None:
    """On the second axis: the tokens each round gained (blue after a bonus, amber after a
    replacement) and the k it drafted."""
    gained = [r.gained for r in rounds]
    bonus = [r.emitted is not None and r.emitted.kind == "bonus" for r in rounds]
    fig.add_scatter(
        x=x,
        y=gained,
        name="tokens gained",
        yaxis="y2",
        mode="lines+markers",
        line={"color": NEUTRAL, "width": 1},
        marker={
            "color": [BONUS if b else RESAMPLED for b in bonus],
            "size": 8,
            "symbol": ["diamond" if b else "circle" for b in bonus],
        },
        customdata=[r.accepted for r in rounds],
        hovertemplate="round %{x}: %{y} tokens (%{customdata} drafts accepted)<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=[r.k for r in rounds],
        name="k drafted",
        yaxis="y2",
        mode="lines",
        line={"color": DRAFT, "width": 1.5, "dash": "dot", "shape": "hvh"},
        hovertemplate="round %{x}: drafted k = %{y}<extra></extra>",
    )
