"""The lossless lab, drawn: the acceptance rule's measured output frequencies against p and
q, and its measured acceptance against the overlap sum min(p, q).

Takes the result of specviz.lossless.simulate (or its to_dict()) without importing that
module, which needs torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from specviz.viz.palette import ACCEPTED, DRAFT, NEUTRAL, RESIDUAL, TARGET, style_figure
from specviz.viz.text import esc, label_html

Z_TOLERANCE = 5.0  # deviations beyond this many standard errors would disprove losslessness


def _get(result: Any, name: str) -> Any:
    return result[name] if isinstance(result, Mapping) else getattr(result, name)


def lossless_frequencies_figure(result: Any, labels: Sequence[str] | None = None,
                                title: str | None = "Output frequencies against p and q") -> go.Figure:
    """Bars per token: p (target), the measured output frequency with \u00b13 standard-error
    bars (it matches p, not q), and q (draft). The residual is one legend click away."""
    p, q = np.asarray(_get(result, "p")), np.asarray(_get(result, "q"))
    measured, se = np.asarray(_get(result, "measured")), np.asarray(_get(result, "std_error"))
    x = list(range(len(p)))
    ticks = [label_html(t) for t in labels] if labels is not None else [f"token {i}" for i in x]
    fig = go.Figure()
    fig.add_bar(x=x, y=p, name="p (target)", marker_color=TARGET, hovertemplate="p = %{y:.4f}<extra></extra>")
    fig.add_bar(
        x=x, y=measured, name=f"measured ({_get(result, 'samples'):,} draws)", marker_color=NEUTRAL,
        error_y={"type": "data", "array": 3 * se, "color": NEUTRAL, "thickness": 1.5, "width": 6},
        customdata=np.stack([p, (measured - p) / np.where(se > 0, se, np.inf)], axis=-1),
        hovertemplate="measured %{y:.4f} (p = %{customdata[0]:.4f}, %{customdata[1]:+.1f} SE)<extra></extra>",
    )
    fig.add_bar(x=x, y=q, name="q (draft)", marker_color=DRAFT, hovertemplate="q = %{y:.4f}<extra></extra>")
    fig.add_bar(x=x, y=_get(result, "residual"), name="residual", marker_color=RESIDUAL, visible="legendonly",
                hovertemplate="residual = %{y:.4f}<extra></extra>")
    fig.update_layout(barmode="group", xaxis={"tickmode": "array", "tickvals": x, "ticktext": ticks, "showgrid": False},
                      yaxis={"title": "probability", "rangemode": "tozero"})
    return style_figure(fig, title)


def lossless_acceptance_figure(result: Any, title: str | None = "Acceptance against the overlap") -> go.Figure:
    """The overlap sum min(p, q) the rule predicts beside the measured acceptance rate (\u00b13 SE)."""
    overlap, rate = float(_get(result, "overlap")), float(_get(result, "acceptance_rate"))
    se = float(_get(result, "acceptance_std_error"))
    fig = go.Figure()
    fig.add_bar(x=["overlap \u03a3 min(p, q)", "measured acceptance"], y=[overlap, rate], marker_color=[NEUTRAL, ACCEPTED],
                error_y={"type": "data", "array": [0, 3 * se], "color": NEUTRAL}, text=[f"{overlap:.4f}", f"{rate:.4f}"],
                textposition="outside", showlegend=False, hovertemplate="%{x}: %{y:.4f}<extra></extra>")
    fig.update_layout(xaxis={"showgrid": False}, yaxis={"title": "probability", "range": [0, 1.12]})
    return style_figure(fig, title, height=280)


def lossless_summary_html(result: Any) -> str:
    """The verdict in words: how far the output is from p, in standard errors."""
    n, max_z, acc_z = _get(result, "samples"), float(_get(result, "max_z")), float(_get(result, "acceptance_z"))
    ok = max_z <= Z_TOLERANCE
    verdict = (
        f"{n:,} draws. The largest gap between the output frequencies and p is {max_z:.1f} standard errors "
        + (f"(within {Z_TOLERANCE:g}): the output is distributed as p." if ok else f"(beyond {Z_TOLERANCE:g}): the output is NOT distributed as p.")
    )
    acceptance = (
        f"Measured acceptance {float(_get(result, 'acceptance_rate')):.4f} against the overlap "
        f"{float(_get(result, 'overlap')):.4f} ({acc_z:.1f} standard errors)."
    )
    return f'<div class="specviz-text"><p>{esc(verdict)}</p><p>{esc(acceptance)}</p></div>'
