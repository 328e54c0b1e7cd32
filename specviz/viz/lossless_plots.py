"""The lossless lab, drawn: the acceptance rule's measured output frequencies against p and
q, and its measured acceptance against the overlap sum min(p, q); and the bug gallery, the
exact rule beside the mistakes people ship, each rule's output against p at the temperature.

Takes the results of specviz.workshop.lossless.simulate and bug_gallery (or their to_dict()) without
importing that module, which needs torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from specviz.viz.palette import ACCEPTED, BONUS, DRAFT, NEUTRAL, REJECTED, RESIDUAL, TARGET, label_axis, style_figure
from specviz.viz.text import esc, label_html, panel_html, paragraphs_html, plotly_text, table_html, words_html

Z_TOLERANCE = 5.0  # deviations beyond this many standard errors would disprove losslessness
SE_BARS = 3  # the error bars reach this many standard errors either side


def _get(result: Any, name: str) -> Any:
    return result[name] if isinstance(result, Mapping) else getattr(result, name)


def _se_bars(se: Any, width: float, thickness: float = 1.5) -> dict:
    """\u00b1SE_BARS standard-error bars (a trace's error_x or error_y) in the reference grey;
    `width` is the cross-bar's, in px, set to each figure's bar size."""
    return {"type": "data", "array": np.multiply(SE_BARS, se), "color": NEUTRAL, "thickness": thickness, "width": width}


def _token_axis(labels: Sequence[str] | None, n: int) -> dict:
    """The x axis of per-token bars: the tokens' own text where given, else "token i"."""
    return label_axis([label_html(t) for t in labels] if labels is not None else [f"token {i}" for i in range(n)])


def lossless_frequencies_figure(
    result: Any, labels: Sequence[str] | None = None, title: str | None = "Output frequencies against p and q"
) -> go.Figure:
    """Bars per token: p (target), the measured output frequency with \u00b13 standard-error
    bars (it matches p, not q), and q (draft). The residual is one legend click away."""
    p, q = np.asarray(_get(result, "p")), np.asarray(_get(result, "q"))
    measured, se = np.asarray(_get(result, "measured")), np.asarray(_get(result, "std_error"))
    x = list(range(len(p)))
    fig = go.Figure()
    fig.add_bar(x=x, y=p, name="p (target)", marker_color=TARGET, hovertemplate="p = %{y:.4f}<extra></extra>")
    fig.add_bar(
        x=x,
        y=measured,
        name=f"measured ({_get(result, 'samples'):,} draws)",
        marker_color=NEUTRAL,
        error_y=_se_bars(se, width=6),
        customdata=np.stack([p, (measured - p) / np.where(se > 0, se, np.inf)], axis=-1),
        hovertemplate="measured %{y:.4f} (p = %{customdata[0]:.4f}, %{customdata[1]:+.1f} SE)<extra></extra>",
    )
    fig.add_bar(x=x, y=q, name="q (draft)", marker_color=DRAFT, hovertemplate="q = %{y:.4f}<extra></extra>")
    fig.add_bar(
        x=x,
        y=_get(result, "residual"),
        name="residual",
        marker_color=RESIDUAL,
        visible="legendonly",
        hovertemplate="residual = %{y:.4f}<extra></extra>",
    )
    fig.update_layout(
        barmode="group", xaxis=_token_axis(labels, len(p)), yaxis={"title": "probability", "rangemode": "tozero"}
    )
    return style_figure(fig, title)


def lossless_acceptance_figure(result: Any, title: str | None = "Acceptance against the overlap") -> go.Figure:
    """The overlap sum min(p, q) the rule predicts beside the measured acceptance rate (\u00b13 SE)."""
    overlap, rate = float(_get(result, "overlap")), float(_get(result, "acceptance_rate"))
    se = float(_get(result, "acceptance_std_error"))
    fig = go.Figure()
    fig.add_bar(
        x=["overlap \u03a3 min(p, q)", "measured acceptance"],
        y=[overlap, rate],
        marker_color=[NEUTRAL, ACCEPTED],
        error_y=_se_bars([0.0, se], width=4, thickness=2),  # plotly's defaults: this figure's look
        text=[f"{overlap:.4f}", f"{rate:.4f}"],
        textposition="outside",
        showlegend=False,
        hovertemplate="%{x}: %{y:.4f}<extra></extra>",
    )
    fig.update_layout(xaxis={"showgrid": False}, yaxis={"title": "probability", "range": [0, 1.12]})
    return style_figure(fig, title, height=280)


def lossless_summary_html(result: Any) -> str:
    """The verdict in words: how far the output is from p, in standard errors."""
    n, max_z, acc_z = _get(result, "samples"), float(_get(result, "max_z")), float(_get(result, "acceptance_z"))
    ok = max_z <= Z_TOLERANCE
    verdict = f"{n:,} draws. The largest gap between the output frequencies and p is {max_z:.1f} standard errors " + (
        f"(within {Z_TOLERANCE:g}): the output is distributed as p."
        if ok
        else f"(beyond {Z_TOLERANCE:g}): the output is NOT distributed as p."
    )
    acceptance = (
        f"Measured acceptance {float(_get(result, 'acceptance_rate')):.4f} against the overlap "
        f"{float(_get(result, 'overlap')):.4f} ({acc_z:.1f} standard errors)."
    )
    return words_html([verdict, acceptance])


# The bug gallery. Green is the exact rule; the mistakes take the other Okabe-Ito shades.
RULE_COLOURS = {
    "exact": ACCEPTED,
    "argmax-accept": REJECTED,
    "replacement-from-p": RESIDUAL,
    "q-before-temperature": BONUS,
    "p-without-temperature": NEUTRAL,
}


def _rules(rules: Mapping[str, Any]) -> list[tuple[str, Any]]:
    if not rules:
        raise ValueError("the bug gallery needs at least one rule")
    return list(rules.items())


def bug_frequencies_figure(
    rules: Mapping[str, Any], labels: Sequence[str] | None = None, title: str | None = "Output frequencies by rule"
) -> go.Figure:
    """Bars per token: p at the temperature (what every rule should output), then each
    rule's measured output frequency. The exact rule's bars match p at T; the mistakes' do not."""
    items = _rules(rules)
    first = items[0][1]
    target, t = np.asarray(_get(first, "target")), float(_get(first, "temperature"))
    x = list(range(len(target)))
    fig = go.Figure()
    fig.add_bar(
        x=x,
        y=target,
        name=f"p at T = {t:g} (should be)",
        marker_color=TARGET,
        marker_pattern_shape="/",
        hovertemplate="p at T = %{y:.4f}<extra></extra>",
    )
    for name, r in items:
        measured = np.asarray(_get(r, "measured"))
        fig.add_bar(
            x=x,
            y=measured,
            name=plotly_text(name),
            marker_color=RULE_COLOURS.get(name, NEUTRAL),
            customdata=target,
            hovertemplate=f"{plotly_text(name)}: %{{y:.4f}} (p at T = %{{customdata:.4f}})<extra></extra>",
        )
    fig.update_layout(
        barmode="group",
        bargroupgap=0.05,
        xaxis=_token_axis(labels, len(target)),
        yaxis={"title": "probability", "rangemode": "tozero"},
    )
    return style_figure(fig, title, height=360)


def bug_tv_figure(rules: Mapping[str, Any], title: str | None = "Each rule's distance from p at T") -> go.Figure:
    """Horizontal bars: each rule's measured total variation distance from p at T with
    \u00b13 standard-error bars, green when within noise and vermillion when measurably off;
    a cross marks the exact value from the rule's closed-form output. Numbers are kept short
    to fit a phone: the table and the hover give the standard error."""
    items = _rules(rules)
    names = [plotly_text(name) for name, _ in items]
    tv = np.array([float(_get(r, "tv")) for _, r in items])
    se = np.array([float(_get(r, "tv_std_error")) for _, r in items])
    exact = np.array([float(_get(r, "tv_expected")) for _, r in items])
    ok = [bool(_get(r, "within_noise")) for _, r in items]
    noise = float(_get(items[0][1], "tv_noise"))
    fig = go.Figure()
    fig.add_bar(
        y=names,
        x=tv,
        orientation="h",
        name="measured TV \u00b13 SE",
        marker_color=[ACCEPTED if o else REJECTED for o in ok],
        error_x=_se_bars(se, width=5),
        customdata=np.stack([se, exact], axis=-1),
        hovertemplate="%{y}: TV %{x:.5f} \u00b1 %{customdata[0]:.5f} (exact %{customdata[1]:.5f})<extra></extra>",
    )
    fig.add_scatter(
        y=names,
        x=exact,
        mode="markers",
        name="exact value (closed form)",
        marker={"symbol": "x-thin", "size": 12, "line": {"width": 2, "color": TARGET}, "color": TARGET},
        hovertemplate="%{y}: exact TV %{x:.5f}<extra></extra>",
    )
    top = max(float(np.max(tv + SE_BARS * se)), float(np.max(exact)), 10 * noise, 1e-3)
    # The numbers sit clear of the error bar and the cross, whichever reaches further.
    fig.add_scatter(
        y=names,
        x=np.maximum(tv + SE_BARS * se, exact) + 0.04 * top,
        mode="text",
        showlegend=False,
        hoverinfo="skip",
        text=[f"{v:.4f}" for v in tv],
        textposition="middle right",
        cliponaxis=False,
    )
    fig.update_layout(
        yaxis={"autorange": "reversed", "showgrid": False, "ticksuffix": " "},
        xaxis={"title": "total variation distance", "range": [0, top * 1.5]},
    )
    return style_figure(fig, title, height=60 + 48 * len(names))


def bug_table_html(rules: Mapping[str, Any]) -> str:
    """The gallery as a table (TV with its standard error, the exact TV, the verdict) and one
    sentence per mistake on how it shows up in practice."""
    items = _rules(rules)
    first = items[0][1]
    n, t, noise = int(_get(first, "samples")), float(_get(first, "temperature")), float(_get(first, "tv_noise"))

    def row(name: str, r: Any) -> tuple[str, ...]:
        tv, se, exact, z = (float(_get(r, k)) for k in ("tv", "tv_std_error", "tv_expected", "max_z"))
        verdict = "within noise" if _get(r, "within_noise") else "measurably off"
        return name, f"{tv:.5f} \u00b1 {se:.5f}", f"{exact:.5f}", f"{verdict} ({z:.1f} SE)"

    head = ["rule", "TV from p at T \u00b1 SE", "exact TV", "verdict (largest gap)"]
    table = table_html(head, [row(name, r) for name, r in items])
    off = [name for name, r in items if name != "exact" and not _get(r, "within_noise")]
    mistakes = [name for name, _ in items if name != "exact"]
    intro = (
        f"{n:,} draws per rule on the same p and q, drafts sampled at T = {t:g}; every output should be distributed "
        f"as p at T. Sampling noise alone gives an exact rule a TV of about {noise:.5f}, not 0, so a rule is judged "
        f"by its largest per-token gap: within {Z_TOLERANCE:g} standard errors is within noise."
    )
    verdict = f"{len(off)} of {len(mistakes)} mistakes are measurably off here."
    if "exact" in rules:
        exact_ok = bool(_get(rules["exact"], "within_noise"))
        verdict = ("The exact rule is within noise. " if exact_ok else "The exact rule is NOT within noise. ") + verdict
    hidden = [name for name in mistakes if _get(rules[name], "within_noise")]
    if hidden and abs(t - 1) < 1e-12:
        verdict += " At T = 1 the temperature mistakes cannot show: choose another temperature."
    practice = "".join(
        f"<p><b>{esc(name)}</b> ({esc(_get(r, 'title'))}): {esc(_get(r, 'in_practice'))}</p>"
        for name, r in items
        if name != "exact"
    )
    return panel_html(paragraphs_html([intro], "sv-muted"), table, paragraphs_html([verdict]), practice)
