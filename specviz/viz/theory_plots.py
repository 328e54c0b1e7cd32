"""What the formulas of specviz.theory predict, drawn: tokens per round and speedup against
the draft length k for several acceptance rates, an alpha x k speedup map, best k and
break-even in words. A run's own alpha and k are marked where given."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from specviz import theory
from specviz.cost_model import CostModel
from specviz.settings import MAX_K
from specviz.viz.palette import BONUS, NEUTRAL, PLAIN_LINE, REJECTED, style_figure
from specviz.viz.text import words_html

DEFAULT_ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9)
DEFAULT_K_MAX = MAX_K  # the page offers k up to MAX_K: best k is searched there


# Low alpha cool, high alpha warm, all of middle lightness so each curve reads on white and on black.
ALPHA_SCALE = [[0.0, "#3D7FD9"], [0.25, "#1F9E89"], [0.5, "#6DAA2C"], [0.75, "#D4A017"], [1.0, "#E0662A"]]


def _alpha_curves(
    fig: go.Figure, ks: np.ndarray, alphas: Sequence[float], run_alpha: float | None, value, unit: str
) -> list[tuple[str, np.ndarray]]:
    """A curve of `value(alpha, ks)` per alpha, and the run's drawn thick and in the legend as
    "this run"; the others are labelled at their right end instead of in the legend, which
    would crowd a phone screen. Returns each curve's (name, values)."""
    colours = sample_colorscale(ALPHA_SCALE, [i / max(len(alphas) - 1, 1) for i in range(len(alphas))])
    curves = [(a, c, 1.5, f"\u03b1 = {a:g}", None) for a, c in zip(alphas, colours)]
    if run_alpha is not None:
        curves.append((run_alpha, NEUTRAL, 3.5, f"this run (\u03b1 = {run_alpha:.2f})", "this run"))
    drawn = []
    for a, colour, width, name, label in curves:
        y = np.asarray(value(a, ks), dtype=float)
        fig.add_scatter(
            x=ks,
            y=y,
            name=name,
            mode="lines+text",
            showlegend=label is not None,
            line={"color": colour, "width": width},
            text=[""] * (len(ks) - 1) + [label or name],
            textposition="middle right",
            textfont={"color": colour, "size": 11},
            cliponaxis=False,
            hovertemplate=f"{name}, k = %{{x}}: %{{y:.2f}}{unit}<extra></extra>",
        )
        drawn.append((name, y))
    return drawn


def _against_k(fig: go.Figure, y_title: str, title: str | None) -> go.Figure:
    """The axes of a figure of curves against k, styled, with room on the right for their labels."""
    fig.update_layout(xaxis={"title": "draft length k", "dtick": 2}, yaxis={"title": y_title, "rangemode": "tozero"})
    return style_figure(fig, title).update_layout(margin_r=72)


def tokens_per_round_figure(
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    k_max: int = DEFAULT_K_MAX,
    run_alpha: float | None = None,
    run_k: int | None = None,
    measured_tokens_per_round: float | None = None,
    title: str | None = "Tokens per round",
) -> go.Figure:
    """(1 - alpha^(k+1)) / (1 - alpha) against k, one curve per alpha; the run's alpha is
    drawn thick and its measured tokens per round marked at its k."""
    ks = np.arange(0, k_max + 1)
    fig = go.Figure()
    _alpha_curves(fig, ks, alphas, run_alpha, theory.tokens_per_round, " tokens")
    if run_k is not None and measured_tokens_per_round is not None:
        _measured_mark(fig, run_k, measured_tokens_per_round, " tokens")
    return _against_k(fig, "tokens per round", title)


def speedup_vs_k_figure(
    target_ms: float,
    draft_ms: float,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    k_max: int = DEFAULT_K_MAX,
    run_alpha: float | None = None,
    run_k: int | None = None,
    measured_speedup: float | None = None,
    cost: CostModel | None = None,
    title: str | None = "Predicted speedup against k",
) -> go.Figure:
    """Predicted speedup for each alpha against k, the best k of each curve starred.

    With run_alpha the run's curve is drawn thick; with `cost` (measured V(n) and D) also the
    same curve at those costs, dashed; with run_k and measured_speedup the run itself is marked.
    """
    ks = np.arange(0, k_max + 1)
    fig = go.Figure()
    curves = _alpha_curves(fig, ks, alphas, run_alpha, lambda a, k: theory.speedup(a, k, target_ms, draft_ms), "\u00d7")
    best = [int(np.argmax(s)) for _, s in curves]
    fig.add_scatter(
        x=best,
        y=[float(s[b]) for b, (_, s) in zip(best, curves)],
        name="best k",
        mode="markers",
        marker={"symbol": "star", "size": 13, "color": BONUS},
        customdata=[name for name, _ in curves],
        hovertemplate="%{customdata}: best k = %{x} (%{y:.2f}\u00d7)<extra></extra>",
    )
    if run_alpha is not None and cost is not None:
        _measured_cost_curve(fig, ks, run_alpha, cost, target_ms)
    if run_k is not None and measured_speedup is not None:
        _measured_mark(fig, run_k, measured_speedup, "\u00d7")
    fig.add_hline(y=1, line=PLAIN_LINE)
    return _against_k(fig, "\u00d7 plain decoding", title)


def _measured_cost_curve(fig: go.Figure, ks: np.ndarray, run_alpha: float, cost: CostModel, target_ms: float) -> None:
    """The run's curve at the measured costs, dashed, as far as they were measured."""
    kc = ks[ks + 1 <= max(cost.verify)]
    fig.add_scatter(
        x=kc,
        y=theory.speedup_with_cost(run_alpha, kc, cost, target_ms),
        name="this run, measured verify cost",
        mode="lines",
        line={"color": NEUTRAL, "width": 2.5, "dash": "dash"},
        hovertemplate="measured cost, k = %{x}: %{y:.2f}\u00d7<extra></extra>",
    )


def _measured_mark(fig: go.Figure, run_k: int, measured: float, unit: str) -> None:
    """The run itself: what it measured at its k."""
    fig.add_scatter(
        x=[run_k],
        y=[measured],
        name="measured",
        mode="markers",
        marker={"color": REJECTED, "size": 12, "symbol": "x"},
        hovertemplate=f"measured at k = %{{x}}: %{{y:.2f}}{unit}<extra></extra>",
    )


def speedup_heatmap_figure(
    target_ms: float,
    draft_ms: float,
    k_max: int = DEFAULT_K_MAX,
    run_alpha: float | None = None,
    run_k: int | None = None,
    title: str | None = "Predicted speedup by \u03b1 and k",
) -> go.Figure:
    """Speedup over an alpha x k grid (vermillion below 1: slower than plain decoding; blue
    above), the best k of each alpha as a line, and the run marked."""
    alphas = np.round(np.linspace(0, 0.98, 50), 2)
    ks = np.arange(1, k_max + 1)
    z = np.asarray(theory.speedup(alphas[:, None], ks[None, :], target_ms, draft_ms))
    fig = go.Figure(
        go.Heatmap(
            x=ks,
            y=alphas,
            z=z,
            zmid=1,
            colorscale=[[0, REJECTED], [0.5, "#f2f2f2"], [1, BONUS]],
            colorbar={"title": {"text": "\u00d7", "side": "top"}, "thickness": 12, "len": 0.9},
            hovertemplate="k = %{x}, \u03b1 = %{y:.2f}: %{z:.2f}\u00d7<extra></extra>",
        )
    )
    best, _ = theory.best_k(alphas, target_ms, draft_ms, k_max)
    drafting = best > 0
    fig.add_scatter(
        x=best[drafting],
        y=alphas[drafting],
        name="best k",
        mode="markers",
        marker={"color": "#222222", "size": 5},
        hovertemplate="\u03b1 = %{y:.2f}: best k = %{x}<extra></extra>",
    )
    if run_alpha is not None and run_k is not None:
        fig.add_scatter(
            x=[run_k],
            y=[run_alpha],
            name="this run",
            mode="markers",
            marker={"symbol": "x", "size": 14, "color": "#222222", "line": {"width": 2, "color": "#ffffff"}},
            hovertemplate="this run: k = %{x}, \u03b1 = %{y:.2f}<extra></extra>",
        )
    fig.update_layout(
        xaxis={"title": "draft length k", "dtick": 2}, yaxis={"title": "\u03b1 (acceptance)", "range": [0, 1]}
    )
    return style_figure(fig, title, height=380)


def theory_text_html(alpha: float, k: int, target_ms: float, draft_ms: float, k_max: int = DEFAULT_K_MAX) -> str:
    """Best k and break-even alpha in words, for this alpha, k and cost ratio D/T."""
    bk, bs = theory.best_k(alpha, target_ms, draft_ms, k_max)
    here = theory.speedup(alpha, k, target_ms, draft_ms)
    be = theory.break_even_alpha(k, target_ms, draft_ms)
    lines = [
        f"With \u03b1 = {alpha:.2f}, one target pass T = {target_ms:.0f} ms and one drafted token D = {draft_ms:.0f} ms "
        f"(D/T = {draft_ms / target_ms:.2f}), k = {k} predicts {theory.tokens_per_round(alpha, k):.2f} tokens per round and {here:.2f}\u00d7 speed.",
        (
            f"The best k is {bk} ({bs:.2f}\u00d7)."
            if bk > 0
            else "At this \u03b1, no k beats plain decoding: the best is not to draft."
        ),
        (
            f"For k = {k}, drafting pays off only above \u03b1 = {be:.2f}"
            + (" \u2014 this run is below it." if alpha < be else ".")
        )
        if np.isfinite(be)
        else f"For k = {k}, a drafted token costs more than a target pass, so drafting cannot pay off at any \u03b1.",
    ]
    return words_html(lines)
