"""The labs' figures: acceptance by position under both definitions and with and without an
output format, mean accepted lengths, hindsight k, the temperature sweep and the batching
prediction.

The per-position and per-round numbers come from specviz.run_stats; the sweep and batching
figures take plain columns (what specviz.workshop.labs measured), so nothing here runs a model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.run_stats import Hindsight, PositionStats, departure_words, length_stats, position_stats
from specviz.events import Event
from specviz.viz.palette import (
    ACCEPTED,
    BONUS,
    DRAFT,
    NEUTRAL,
    PLAIN_LINE,
    REJECTED,
    TARGET,
    empty_figure,
    style_figure,
    whole_dtick,
)
from specviz.viz.text import panel_html, paragraphs_html, table_html

BOTH_DEFINITIONS = "Acceptance by position: both definitions"  # the title of a run's figure and of counts read back
MEASURE_BATCHING = "Press the batching button to measure"  # both batching figures, before a measurement


def position_rates_figure(events: Iterable[Event], title: str | None = BOTH_DEFINITIONS) -> go.Figure:
    """Bars: the conditional rate (accepted / reached) and the unconditional one (accepted /
    rounds that drafted that far, as vLLM and llama.cpp log it) at each draft position.
    Lines: what independent acceptances at the run's alpha predict, alpha and alpha^i."""
    return position_stats_figure(position_stats(events), title)


def position_stats_figure(s: PositionStats, title: str | None = BOTH_DEFINITIONS) -> go.Figure:
    """`position_rates_figure` from counts by position (a run's, or an engine's read back)."""
    if s.reached.sum() == 0:
        return empty_figure("No drafts judged yet", title)
    pos = s.positions
    fig = go.Figure()
    # The same accepted counts over two denominators: the rounds that got there, and that drafted it.
    for rate, name, colour, out_of, words in (
        (s.conditional, "conditional", ACCEPTED, s.reached, "that got there"),
        (s.unconditional, "unconditional (vLLM)", BONUS, s.drafted, "rounds that drafted it"),
    ):
        fig.add_bar(
            x=pos,
            y=rate,
            name=name,
            marker_color=colour,
            customdata=np.stack([s.accepted, out_of], axis=-1),
            hovertemplate="position %{x}: %{customdata[0]} accepted of %{customdata[1]} "
            + words
            + " (%{y:.0%})<extra></extra>",
        )
    fig.add_scatter(
        x=pos,
        y=s.predicted_conditional,
        name=f"model \u03b1 = {s.alpha:.2f}",
        mode="lines",
        line={"color": NEUTRAL, "dash": "dash"},
        hovertemplate="model, conditional: %{y:.0%}<extra></extra>",
    )
    fig.add_scatter(
        x=pos,
        y=s.predicted_unconditional,
        name="model \u03b1^i",
        mode="lines+markers",
        line={"color": NEUTRAL, "dash": "dot"},
        marker={"color": NEUTRAL, "size": 6},
        hovertemplate="model, unconditional: %{y:.0%}<extra></extra>",
    )
    fig.update_layout(
        barmode="group",
        xaxis={"title": "position in the draft", "dtick": 1},
        yaxis={"title": "acceptance", "range": [0, 1.05], "tickformat": ".0%"},
    )
    return style_figure(fig, title)


def lengths_figure(events: Iterable[Event], title: str | None = "Drafts accepted per round") -> go.Figure:
    """The histogram of accepted drafts per round against the truncated geometric at the
    run's measured acceptance. A gap between the two means acceptances are not independent:
    easy stretches of text accept whole drafts."""
    lengths = length_stats(events)
    if not lengths.rounds:
        return empty_figure("No finished rounds yet", title)
    n = np.arange(len(lengths.histogram))
    fig = go.Figure()
    fig.add_bar(
        x=n,
        y=lengths.histogram,
        name="measured",
        marker_color=ACCEPTED,
        hovertemplate="%{x} accepted: %{y} rounds<extra></extra>",
    )
    fig.add_scatter(
        x=n,
        y=lengths.predicted_histogram,
        mode="lines+markers",
        name=f"truncated geometric, measured \u03b1 = {lengths.alpha:.2f}",
        line={"color": NEUTRAL, "dash": "dot"},
        marker={"color": NEUTRAL},
        hovertemplate="%{x} accepted: %{y:.1f} rounds expected<extra></extra>",
    )
    fig.update_layout(
        xaxis={"title": "drafts accepted in the round", "dtick": 1}, yaxis={"title": "rounds", "rangemode": "tozero"}
    )
    return style_figure(fig, title)


def lengths_html(events: Iterable[Event]) -> str:
    """Mean accepted length with and without the bonus token, measured and modelled, and in
    words where the run departs from the geometric model."""
    events = list(events)
    ls = length_stats(events)
    if ls.rounds == 0:
        return paragraphs_html(["No finished round drafted anything yet."], "sv-muted")
    p = ls.predicted_mean_without_bonus
    rows = [
        ("mean acceptance length, with the bonus token (vLLM, llama.cpp)", f"{ls.mean_with_bonus:.2f}", f"{1 + p:.2f}"),
        ("drafts accepted per round, without it", f"{ls.mean_without_bonus:.2f}", f"{p:.2f}"),
    ]
    table = table_html(["", "measured", "geometric model"], rows)
    note = (
        f"Over {ls.rounds} finished rounds that drafted. The model accepts each draft independently with "
        f"probability \u03b1 = {ls.alpha:.2f}, the run's measured acceptance (accepted / judged drafts)."
    )
    return panel_html(table, paragraphs_html([note], "sv-muted"), paragraphs_html(departure_words(events)))


def hindsight_figure(
    h: Hindsight | None, title: str | None = "Draft length: the policy's and hindsight's"
) -> go.Figure:
    """Per round: the k the policy drafted (bars), the drafts accepted (dashes) and the k' that
    would have given the most tokens per ms (diamonds)."""
    if h is None or not h.rounds:
        return empty_figure("No rounds with a cost model to judge them by", title)
    x = [r.index for r in h.rounds]
    fig = go.Figure()
    fig.add_bar(
        x=x,
        y=[r.drafted for r in h.rounds],
        name="drafted (the policy's k)",
        marker_color=DRAFT,
        opacity=0.55,
        hovertemplate="round %{x}: drafted %{y}<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=[r.accepted for r in h.rounds],
        name="accepted",
        mode="markers",
        marker={"symbol": "line-ew-open", "size": 16, "line": {"width": 3, "color": ACCEPTED}},
        hovertemplate="round %{x}: accepted %{y}<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=[r.best_k for r in h.rounds],
        name="best k in hindsight",
        mode="markers",
        marker={"symbol": "diamond", "size": 9, "color": TARGET},
        customdata=[("capped at its length" if r.capped else "") for r in h.rounds],
        hovertemplate="round %{x}: best k' %{y} %{customdata}<extra></extra>",
    )
    top = max(max(r.drafted for r in h.rounds), max(r.best_k for r in h.rounds), 1)
    fig.update_layout(
        xaxis={"title": "round", "dtick": whole_dtick(max(x) - min(x) + 1)},
        yaxis={"title": "draft tokens", "dtick": whole_dtick(top), "rangemode": "tozero"},
    )
    return style_figure(fig, title)


def hindsight_html(h: Hindsight | None) -> str:
    if h is None:
        return paragraphs_html(
            [
                "This trace carries no cost model (traces recorded before runs kept one), so there is no cost to "
                "weigh each draft length by."
            ],
            "sv-muted",
        )
    if not h.rounds:
        return paragraphs_html(["No rounds yet."], "sv-muted")
    gap = h.hindsight_tokens_per_s / h.policy_tokens_per_s - 1 if h.policy_tokens_per_s else 0.0
    rows = [
        ("plain decoding (one target pass a token)", f"{h.plain_tokens_per_s:.2f}"),
        ("the policy's k, at the cost model's costs", f"{h.policy_tokens_per_s:.2f}"),
        ("each round's best k in hindsight", f"{h.hindsight_tokens_per_s:.2f}"),
        ("the fastest choice of k per round", f"{h.best_tokens_per_s:.2f}"),
        ("measured (recorded draft and verify time)", f"{h.measured_tokens_per_s:.2f}"),
    ]
    table = table_html(["", "tokens/s"], rows)
    words = (
        f"{h.matched} of {len(h.rounds)} rounds drafted what hindsight would have. Knowing each round's outcome, the "
        f"same rounds would have run {gap:+.0%} faster: that is the most a draft-length policy could still gain here. "
        "Each round's best k' maximises (min(k', a) + 1) / (k' D + V(k' + 1)), a the drafts it accepted; a round that "
        "accepted all its drafts says nothing beyond them, so its k' stops at its own length."
    )
    costs = f"Costs: V(1) = {h.plain_ms_per_token:.0f} ms, from the cost model the run recorded."
    return panel_html(table, paragraphs_html([words]), paragraphs_html([costs], "sv-muted"))


def grammar_positions_figure(
    with_format: Sequence[float],
    without: Sequence[float],
    title: str | None = "Acceptance by position, with and without the output format",
) -> go.Figure:
    """Conditional acceptance (accepted / reached) at each position of a round's proposal, for
    the same prompt and settings under the run's output format (its forced tokens included)
    and as free text."""
    if not len(with_format) and not len(without):
        return empty_figure("Press the button to run the prompt again without the output format", title)
    fig = go.Figure()
    for rates, name, colour in ((with_format, "with the output format", TARGET), (without, "free text", DRAFT)):
        fig.add_scatter(
            x=list(range(1, len(rates) + 1)),
            y=list(rates),
            name=name,
            mode="lines+markers",
            line={"color": colour},
            hovertemplate=f"position %{{x}}: %{{y:.0%}} accepted ({name})<extra></extra>",
        )
    fig.update_yaxes(title_text="accepted / reached", tickformat=".0%", range=[0, 1.05])
    fig.update_xaxes(title_text="position in the round", dtick=1)
    return style_figure(fig, title)


def temperature_sweep_figure(
    temperatures: Sequence[float],
    acceptance: Sequence[float],
    tokens_per_round: Sequence[float],
    speedup: Sequence[float],
    title: str | None = "The same prompt at each temperature",
) -> go.Figure:
    """Three panels sharing the temperature axis: acceptance, tokens per round, speedup."""
    if not len(temperatures):
        return empty_figure("Press the sweep button", title)
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07)
    panels = (
        (acceptance, "acceptance", ACCEPTED, "%{y:.0%} accepted"),
        (tokens_per_round, "tokens per round", DRAFT, "%{y:.2f} tokens a round"),
        (speedup, "speedup over plain", TARGET, "%{y:.2f}\u00d7 plain decoding"),
    )
    for row, (y, name, colour, hover) in enumerate(panels, start=1):
        fig.add_scatter(
            x=list(temperatures),
            y=list(y),
            name=name,
            mode="lines+markers",
            line={"color": colour},
            hovertemplate=f"T = %{{x}}: {hover}<extra></extra>",
            row=row,
            col=1,
        )
    fig.add_hline(y=1, line=PLAIN_LINE, row=3, col=1)
    fig.update_yaxes(title_text="acceptance", tickformat=".0%", range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(title_text="tokens / round", rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title_text="\u00d7 plain", rangemode="tozero", row=3, col=1)
    fig.update_xaxes(title_text="temperature", row=3, col=1)
    return style_figure(fig, title, height=520)


def batching_figure(
    batch_sizes: Sequence[int],
    speedup: Sequence[float],
    best_speedup: Sequence[float],
    best_k: Sequence[int],
    k: int,
    stops_at: int | None = None,
    title: str | None = "Predicted speedup by batch size",
) -> go.Figure:
    """Speedup over plain decoding at each batch size, at the run's k and at the best k; the
    batch size where drafting the run's k stops paying is marked."""
    if not len(batch_sizes):
        return empty_figure(MEASURE_BATCHING, title)
    b = list(batch_sizes)
    fig = go.Figure()
    fig.add_scatter(
        x=b,
        y=list(speedup),
        name=f"k = {k}",
        mode="lines+markers",
        line={"color": ACCEPTED},
        hovertemplate="batch %{x}: %{y:.2f}\u00d7<extra></extra>",
    )
    fig.add_scatter(
        x=b,
        y=list(best_speedup),
        name="best k",
        mode="lines+markers+text",
        line={"color": DRAFT, "dash": "dot"},
        text=[f"k={kk}" for kk in best_k],
        textposition="top center",
        hovertemplate="batch %{x}: %{y:.2f}\u00d7 at %{text}<extra></extra>",
    )
    fig.add_hline(y=1, line=PLAIN_LINE, annotation_text="plain decoding", annotation_position="bottom right")
    if stops_at is not None:
        fig.add_vline(x=stops_at, line={"color": REJECTED, "width": 1})
        # On a log axis an annotation's x is log10 of the value (a shape's is the value itself).
        fig.add_annotation(
            x=np.log10(stops_at),
            y=1,
            yref="paper",
            text=f"stops paying at {stops_at}",
            showarrow=False,
            xanchor="left",
            yanchor="top",
            font={"color": REJECTED},
        )
    top = max(max(speedup), max(best_speedup), 1.0)
    fig.update_layout(
        xaxis={"title": "sequences decoded together", "type": "log", "tickvals": b, "ticktext": [str(v) for v in b]},
        yaxis={"title": "\u00d7 plain decoding", "range": [0, top * 1.25]},
    )
    return style_figure(fig, title)


def batch_costs_figure(
    batch_sizes: Sequence[int],
    pass_sizes: Sequence[int],
    target_ms: Sequence[Sequence[float]],
    title: str | None = "What a wider pass costs",
) -> go.Figure:
    """V_b(n) / V_b(1) against n for each batch size b: 1 is a verify pass for free, n is a
    pass over n tokens costing n one-token passes."""
    if not len(batch_sizes):
        return empty_figure(MEASURE_BATCHING, title)
    n = list(pass_sizes)
    fig = go.Figure()
    shades = [DRAFT, ACCEPTED, TARGET, REJECTED, BONUS, NEUTRAL]
    ratios = [np.maximum.accumulate(np.asarray(row, float)) / row[0] for row in target_ms]
    for i, (bs, row, ratio) in enumerate(zip(batch_sizes, target_ms, ratios)):
        fig.add_scatter(
            x=n,
            y=ratio,
            name=f"batch {bs}",
            mode="lines+markers",
            line={"color": shades[i % len(shades)]},
            customdata=row,
            hovertemplate=f"batch {bs}, " + "%{x} tokens each: %{y:.2f}\u00d7 (%{customdata:.0f} ms)<extra></extra>",
        )
    fig.add_scatter(x=n, y=n, name="n \u00d7 one pass", mode="lines", line=PLAIN_LINE, hoverinfo="skip")
    fig.add_hline(y=1, line=PLAIN_LINE, annotation_text="free", annotation_position="top left")
    # The diagonal runs off the top: the measured ratios, not the worst case, set the scale.
    top = max(max(float(r.max()) for r in ratios), 1.5)
    fig.update_layout(
        xaxis={"title": "new tokens per sequence (n)", "dtick": whole_dtick(max(n))},
        yaxis={"title": "cost \u00f7 one-token pass", "range": [0, top * 1.3]},
    )
    return style_figure(fig, title)
