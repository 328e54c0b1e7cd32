"""Acceptance statistics of a run, measured, against what the i.i.d. model predicts."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import plotly.graph_objects as go

from specviz.run_stats import judged, length_stats, position_stats, predicted_histogram, rounds_of
from specviz.events import Event
from specviz.viz.live_stats import live_stats
from specviz.viz.palette import ACCEPTED, DRAFT, NEUTRAL, PLAIN_LINE, TARGET, empty_figure, style_figure
from specviz.viz.text import plotly_text


def acceptance_by_position(events: Iterable[Event]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For draft positions 1..K: (times judged, times accepted, mean overlap when judged)."""
    events = list(events)
    counts = position_stats(events)
    overlap = np.zeros(len(counts.reached))
    for r in rounds_of(events):
        for i in range(judged(r)):
            overlap[i] += r.positions[i].overlap if i < len(r.positions) else 0.0
    return counts.reached, counts.accepted, overlap / np.maximum(counts.reached, 1)


def acceptance_by_position_figure(
    events: Iterable[Event], title: str | None = "Acceptance by position in the draft"
) -> go.Figure:
    """Bars: measured acceptance at each draft position; markers: mean overlap there.

    A position is only judged when every draft before it was accepted, so later positions
    have fewer samples (shown in the hover and as n under each bar).
    """
    judged, accepted, overlap = acceptance_by_position(events)
    if judged.sum() == 0:
        return empty_figure("No drafts judged yet", title)
    pos = np.arange(1, len(judged) + 1)
    has = judged > 0
    rate = np.where(has, accepted / np.maximum(judged, 1), np.nan)
    fig = go.Figure()
    fig.add_bar(
        x=pos,
        y=rate,
        name="measured acceptance",
        marker_color=ACCEPTED,
        customdata=np.stack([accepted, judged], axis=-1),
        text=[f"n={n}" for n in judged],
        textposition="outside",
        hovertemplate="position %{x}: %{customdata[0]} of %{customdata[1]} accepted (%{y:.0%})<extra></extra>",
    )
    fig.add_scatter(
        x=pos[has],
        y=overlap[has],
        name="mean overlap \u03b2",
        mode="markers",
        marker={"color": NEUTRAL, "symbol": "line-ew-open", "size": 22, "line": {"width": 3, "color": NEUTRAL}},
        hovertemplate="position %{x}: mean overlap %{y:.2f}<extra></extra>",
    )
    fig.update_layout(
        xaxis={"title": "position in the draft", "dtick": 1},
        yaxis={"title": "acceptance", "range": [0, 1.15], "tickformat": ".0%"},
    )
    return style_figure(fig, title)


def accepted_length_figure(
    events: Iterable[Event],
    alpha: float | None = None,
    title: str | None = "Drafts accepted per round",
    model_name: str | None = None,
) -> go.Figure:
    """Histogram of accepted drafts per round (`specviz.run_stats.length_stats`'s rounds)
    against the truncated-geometric prediction.

    alpha defaults to the run's mean overlap (the expected acceptance). A gap between the two
    means acceptances are not independent: easy stretches of text accept whole drafts.
    `model_name` names the prediction in the legend (default: "predicted (alpha = ...)").
    """
    events = list(events)
    lengths = length_stats(events)
    if not lengths.rounds:
        return empty_figure("No finished rounds yet", title)
    if alpha is None:
        alpha = live_stats(events).mean_overlap
    expected = predicted_histogram(alpha, lengths.k)
    measured = np.bincount(lengths.accepted, minlength=len(expected))
    n = np.arange(len(expected))
    fig = go.Figure()
    fig.add_bar(
        x=n,
        y=measured,
        name="measured",
        marker_color=ACCEPTED,
        hovertemplate="%{x} accepted: %{y} rounds<extra></extra>",
    )
    fig.add_scatter(
        x=n,
        y=expected,
        mode="lines+markers",
        name=plotly_text(model_name) if model_name else f"predicted (\u03b1 = {alpha:.2f})",
        line={"color": NEUTRAL, "dash": "dot"},
        marker={"color": NEUTRAL},
        hovertemplate="%{x} accepted: %{y:.1f} rounds expected<extra></extra>",
    )
    fig.update_layout(
        xaxis={"title": "drafts accepted in the round", "dtick": 1}, yaxis={"title": "rounds", "rangemode": "tozero"}
    )
    return style_figure(fig, title)


def speedup_comparison_figure(
    predicted: float,
    measured: float,
    predicted_with_cost: float | None = None,
    title: str | None = "Speedup over plain decoding",
) -> go.Figure:
    """Bars: the formula's speedup, the formula with the measured verify cost, the measured one."""
    bars = [
        ("predicted", predicted, DRAFT),
        ("predicted, measured verify cost", predicted_with_cost, TARGET),
        ("measured", measured, ACCEPTED),
    ]
    names, values, colours = (list(c) for c in zip(*(b for b in bars if b[1] is not None)))
    fig = go.Figure(
        go.Bar(
            x=names,
            y=values,
            marker_color=colours,
            text=[f"{v:.2f}\u00d7" for v in values],
            textposition="outside",
            hovertemplate="%{x}: %{y:.2f}\u00d7<extra></extra>",
            showlegend=False,
        )
    )
    fig.add_hline(y=1, line=PLAIN_LINE, annotation_text="plain decoding", annotation_position="top left")
    fig.update_layout(
        yaxis={"title": "\u00d7 plain decoding", "rangemode": "tozero", "range": [0, max(values + [1]) * 1.2]}
    )
    return style_figure(fig, title, height=300)
