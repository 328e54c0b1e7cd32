"""The labs tab: what production users of speculative decoding look at, on the current run.

From the current trace alone (a run or an upload, no model needed): acceptance by draft
position under both definitions in use, the accepted lengths per round with their mean
length with and without the bonus token, each against the geometric model; and the draft
length each round should have used in hindsight, from the cost model the trace carries.
Panels of the workshop follow them (`parts.PANELS["labs"]`): the labs that run the loaded pair
and an engine's production metrics.

    tab = labs_tab.LabsTab()
    ... trace changes -> labs_tab.views(trace) into tab.outputs
"""

from __future__ import annotations

import gradio as gr

from specviz import run_stats
from specviz.app.tab import Shared, Tab, chart, hint, muted, speculative
from specviz.events import Trace
from specviz.viz import acceptance_plots as ap
from specviz.viz import empty_figure, pass_cost_figure, runtime_curves

RUN_FIRST = "Run a generation in speculative mode, or upload a trace"
NO_RUN = muted(f"{RUN_FIRST}: its rounds are measured here.")


class LabsTab:
    """The tab's components, each made where it is laid out (inside the caller's gr.Tab): its
    sections on the current trace, top to bottom."""

    def __init__(self):
        self._trace_sections()

    @property
    def outputs(self) -> list:
        """views()' outputs, in its return order."""
        return [
            self.position_rates,
            self.lengths,
            self.lengths_text,
            self.hindsight,
            self.hindsight_text,
            self.pass_costs,
        ]

    def _trace_sections(self) -> None:
        """What the current trace shows: acceptance by position, accepted lengths, hindsight k,
        and the pass costs by runtime."""
        hint(
            "### Acceptance by position\nTwo rates are in use. **Conditional**: of the rounds whose drafts were all "
            "accepted up to position i, the share that accepted i too. **Unconditional** (what vLLM and llama.cpp log): "
            "accepted at i over every round that drafted i tokens. If each draft were accepted independently with "
            "probability \u03b1, the first would be \u03b1 everywhere and the second \u03b1^i."
        )
        with gr.Row(equal_height=False):
            self.position_rates = chart("labs-positions", min_width=300)
            self.lengths = chart("labs-lengths", min_width=300)
        self.lengths_text = gr.HTML(NO_RUN, elem_id="labs-lengths-text")
        hint(
            "### Hindsight k\nFor each round, the draft length that would have yielded the most tokens per ms, "
            "knowing how many of its drafts the target accepted, beside the length the policy drafted."
        )
        self.hindsight = chart("labs-hindsight")
        self.hindsight_text = gr.HTML(elem_id="labs-hindsight-text")
        hint(
            "### Pass costs by runtime\nWhat one target pass over n new tokens costs on each runtime timed on this "
            "machine, in one-token passes (measured at load). Drafting k tokens pays only where verifying them "
            "costs much less than k passes: near the dashed line every drafted token is paid for twice."
        )
        self.pass_costs = chart("labs-pass-costs")


def views(trace: Trace | None) -> tuple:
    """Per-position rates, accepted lengths (figure and words), hindsight k (figure and words),
    and the pass costs of each runtime timed here (from any run's meta)."""
    pass_costs = pass_cost_figure(*runtime_curves(trace))
    if not speculative(trace):
        return (
            empty_figure(RUN_FIRST, "Acceptance by position"),
            empty_figure(RUN_FIRST, "Drafts accepted per round"),
            NO_RUN,
            empty_figure(RUN_FIRST, "Draft length in hindsight"),
            "",
            pass_costs,
        )
    cost = trace.meta.get("cost_model")
    h = run_stats.hindsight(trace.events, cost) if cost else None
    return (
        ap.position_rates_figure(trace.events),
        ap.lengths_figure(trace.events),
        ap.lengths_html(trace.events),
        ap.hindsight_figure(h),
        ap.hindsight_html(h),
        pass_costs,
    )


class LabsPage(Tab):
    """The current run's acceptance and hindsight; the workshop's panels add the labs that
    run the pair and an engine's production metrics."""

    id, title = "labs", "Labs"

    def build(self, shared: Shared) -> None:
        self.ui = LabsTab()
        self.redraw_outputs = self.ui.outputs

    def redraw(self, trace: Trace | None, *values) -> tuple:
        return views(trace)
