"""What a target pass over n new tokens costs on each runtime, drawn: V(n) / V(1) against n.

The dashed diagonal is n separate one-token passes. A curve near it (llama.cpp's quantised
products on a CPU: each extra token costs about as much as the first) leaves drafting
nothing to save; a flat curve (bf16 in torch on a CPU with native bf16, any GPU) verifies
k drafted tokens for little more than the price of one, which is where speculative
decoding pays. The absolute milliseconds are in the hover.
"""

from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go

from specviz.choices import LLAMACPP, TORCH
from specviz.cost_model import CostModel, kept, recorded
from specviz.viz.palette import BONUS, NEUTRAL, PLAIN_LINE, TARGET, empty_figure, style_figure
from specviz.viz.text import plotly_text

COLOURS = {TORCH: BONUS, LLAMACPP: TARGET}


def runtime_curves(trace) -> tuple[dict[str, CostModel], str | None]:
    """Each runtime's measured costs from a run's meta, and the runtime it ran on (a trace
    from before runtimes has only its own cost model, drawn as its runtime's)."""
    if trace is None:
        return {}, None
    meta = trace.meta or {}
    runtime = meta.get("runtime") or TORCH
    # Each runtime's costs are kept as the run's own are, and read by the one tolerant reader.
    curves = {rt: c for rt, d in (meta.get("runtime_costs") or {}).items() if (c := kept(d))}
    own = recorded(meta)
    if runtime not in curves and own is not None:
        curves[runtime] = own
    return curves, runtime


def pass_cost_figure(curves: Mapping[str, CostModel], current: str | None = None) -> go.Figure:
    """`curves`: each runtime's costs as measured at load; `current` is drawn thicker."""
    if not curves:
        return empty_figure(
            "Pass costs appear here once a pair has been timed on a runtime", "Verify pass cost by runtime"
        )
    fig = go.Figure()
    n_max = max(max(c.verify) for c in curves.values())
    fig.add_scatter(
        x=[1, n_max], y=[1, n_max], mode="lines", line=PLAIN_LINE, name="n one-token passes", hoverinfo="skip"
    )
    for rt, c in curves.items():
        sizes = sorted(c.verify)
        fig.add_scatter(
            x=sizes,
            y=[c.verify[n] / c.target for n in sizes],
            mode="lines+markers",
            name=plotly_text(rt),
            line={"color": COLOURS.get(rt, NEUTRAL), "width": 4 if rt == current else 2},
            customdata=[[c.verify[n], c.draft] for n in sizes],
            hovertemplate=f"{plotly_text(rt)}: a pass over %{{x}} tokens costs %{{customdata[0]:.0f}} ms = %{{y:.2f}} one-token passes"
            "<br>one drafted token: %{customdata[1]:.0f} ms<extra></extra>",
        )
    fig.update_layout(xaxis_title="new tokens in one target pass (n)", yaxis_title="cost in one-token passes")
    return style_figure(fig, "Verify pass cost by runtime: V(n) / V(1)")
