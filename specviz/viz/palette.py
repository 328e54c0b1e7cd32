"""Colours and the one figure style every plot shares.

Okabe-Ito colour-blind-safe shades, one meaning each: the four token outcomes match
assets/specviz.css, the draft model is sky blue and the target reddish purple wherever they
appear. Figures have transparent backgrounds, a mid-grey font and a faint grid so the same
figure reads on the page's light and dark themes, and compact margins with the legend on top
so it also fits a 390 px phone.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from specviz.viz.text import plotly_text

ACCEPTED = "#009E73"  # bluish green
REJECTED = "#D55E00"  # vermillion
RESAMPLED = "#E69F00"  # orange / amber
BONUS = "#0072B2"  # blue
DRAFT = "#56B4E9"  # sky blue: the draft model, its q, its time
TARGET = "#CC79A7"  # reddish purple: the target model, its p, its time
OVERLAP = ACCEPTED  # min(p, q) is the chance of acceptance
RESIDUAL = RESAMPLED  # max(0, p - q) is what a replacement is drawn from
NEUTRAL = "#7A828C"  # text and reference lines: ~4:1 contrast on white and on near-black
GRID = "rgba(128, 128, 128, 0.22)"
# Plain decoding wherever a figure draws it: the line at 1 (its speed, one pass a token) or
# the diagonal of n one-token passes.
PLAIN_LINE = {"color": NEUTRAL, "dash": "dash", "width": 1}
MONO = "ui-monospace, Menlo, Consolas, monospace"  # token text in labels and ticks


def style_figure(fig: go.Figure, title: str | None = None, height: int = 340) -> go.Figure:
    """Apply the shared look in place and return the figure. `title` is plain text: it may
    quote a trace or a payload, so it is escaped here (`plotly_text`)."""
    title = plotly_text(title) if title else title
    fig.update_layout(
        # The title keeps its own room above the legend, which grows to two rows on a phone.
        title={
            "text": title,
            "x": 0,
            "xanchor": "left",
            "yref": "container",
            "y": 1,
            "yanchor": "top",
            "pad": {"t": 8, "l": 8},
            "automargin": True,
            "font": {"size": 14},
        }
        if title
        else None,
        height=height,
        autosize=True,
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        font={"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12, "color": NEUTRAL},
        margin={"l": 48, "r": 16, "t": 30, "b": 44},
        legend={
            "orientation": "h",
            "yanchor": "bottom",
            "y": 1.0,
            "xanchor": "left",
            "x": 0,
            "bgcolor": "rgba(0,0,0,0)",
        },
        hoverlabel={"font": {"family": "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"}},
        bargap=0.2,
    )
    axis = {"gridcolor": GRID, "zerolinecolor": GRID, "linecolor": GRID, "automargin": True}
    fig.update_xaxes(zeroline=False, **axis)
    fig.update_yaxes(**axis)
    return fig


def label_axis(labels: Sequence[str], **more: object) -> dict:
    """An axis (for `update_xaxes` and the like) with one tick per label at 0, 1, 2, ... and
    no grid lines between them."""
    return {"tickmode": "array", "tickvals": list(range(len(labels))), "ticktext": labels, "showgrid": False, **more}


def whole_dtick(span: float, ticks: int = 8) -> int:
    """A tick step of 1, 2, 5, 10, 20, ... that puts at most about `ticks` ticks on a span of
    whole numbers (rounds, tokens, k), so no axis shows 2.5 rounds."""
    step = 1
    while span / step > ticks:
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2
    return step


def empty_figure(message: str, title: str | None = None, height: int = 240) -> go.Figure:
    """A figure that says in words (plain text, escaped) why there is nothing to draw yet."""
    fig = go.Figure()
    fig.add_annotation(
        text=plotly_text(message), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font={"size": 13}
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return style_figure(fig, title, height)
