"""Tab 4, theory: what alpha, k, T and D predict, and how the last run compares.

Sliders for the acceptance rate alpha, the draft length k, one target pass T and one drafted
token D redraw the tokens-per-round and speedup curves and the alpha x k map (on release,
once each). The last run's measured alpha and k are marked with its measured speedup, and a
table says how far the prediction was from the measurement, and why. For a tree run, the
expected accepted length of its N-node trees against an N-token chain, from the run's
acceptance by depth and sibling rank, each priced with the trace's measured V(n)
(`viz.tree_payoff`), says whether a tree pays on this machine.
"""

from __future__ import annotations

import gradio as gr

from specviz import viz
from specviz.app import runner
from specviz.cost_model import recorded
from specviz.app.shown_errors import shown_errors
from specviz.events import Trace
from specviz.settings import MAX_K
from specviz.viz.tree_payoff import payoff_figure, payoff_html, tree_payoff
from specviz.app.tab import PRIVATE, Shared, Tab, chart, muted, speculative
from specviz.choices import FIXED, SPECULATIVE

# Before a pair has loaded: the classic example tests/test_theory.py works through, a drafted
# token a tenth of a target pass; then T and D are the loaded pair's, measured at its load
# (`from_pair`), and "Use the last run" takes the last run's alpha and k as well.
DEFAULT_ALPHA, DEFAULT_K, DEFAULT_T_MS, DEFAULT_D_MS = 0.8, 4, 40.0, 4.0
MAX_MS = 5000
NO_RUN = muted("Run a generation in speculative mode: its measured \u03b1, T and D are marked here.")
NO_T = muted(
    "This trace carries no one-token pass cost (it was recorded before specviz measured one at load): run plain "
    "decoding on the Side by side tab to compare it with a measured plain run."
)


class TheoryTab:
    """The tab's components, each made where it is laid out (inside the caller's gr.Tab)."""

    def __init__(self):
        with gr.Row(equal_height=False):
            self.alpha = _slider(
                0, 0.99, DEFAULT_ALPHA, 0.01, "\u03b1: chance a drafted token is accepted", "theory-alpha"
            )
            self.k = _slider(1, MAX_K, DEFAULT_K, 1, "k: tokens drafted per round", "theory-k", precision=0)
            self.target_ms = _slider(1, MAX_MS, DEFAULT_T_MS, 1, "T: one target pass (ms)", "theory-t")
            self.draft_ms = _slider(0, MAX_MS, DEFAULT_D_MS, 1, "D: one drafted token (ms)", "theory-d")
        self.use_run = gr.Button("Use the last run's \u03b1, k, T and D", size="sm", elem_id="theory-use-run")
        self.text = gr.HTML(elem_id="theory-text")
        with gr.Row(equal_height=False):
            self.tokens_per_round = chart("theory-tokens", min_width=300)
            self.speedup = chart("theory-speedup", min_width=300)
        with gr.Row(equal_height=False):
            self.heatmap = chart("theory-heatmap", min_width=300)
            self.measured = gr.HTML(NO_RUN, elem_id="theory-measured", min_width=300)
        with gr.Row(equal_height=False, visible=False, elem_id="theory-tree-box") as self.tree_box:  # a tree run
            self.tree_text = gr.HTML(elem_id="theory-tree-text", min_width=300)
            self.tree_plot = chart("theory-tree-plot", min_width=300)
        self.pass_cost = chart("theory-pass-cost")

    @property
    def sliders(self) -> list[gr.Slider]:
        return [self.alpha, self.k, self.target_ms, self.draft_ms]

    @property
    def outputs(self) -> list:
        """views()' outputs, in its return order."""
        return [
            self.text,
            self.tokens_per_round,
            self.speedup,
            self.heatmap,
            self.measured,
            self.tree_box,
            self.tree_text,
            self.tree_plot,
            self.pass_cost,
        ]


def _slider(lo, hi, value, step, label, elem_id, **more) -> gr.Slider:
    return gr.Slider(lo, hi, value=value, step=step, label=label, elem_id=elem_id, min_width=200, **more)


def prediction(spec: Trace | None, plain: Trace | None):
    """The run's prediction against the pair's one-token pass measured at load (k: the fixed
    k, else the mean drafted per round)."""
    if not speculative(spec):
        return None
    fixed = spec.settings.get("policy") == FIXED
    return viz.predict(
        spec.summary,
        spec.events,
        k=spec.settings.get("k") if fixed else None,
        plain=plain.summary if plain is not None else None,
        cost=recorded(spec.meta),
    )


@shown_errors
def views(alpha, k, target_ms, draft_ms, spec: Trace | None, plain: Trace | None) -> tuple:
    """The words, both curves, the map and the predicted-vs-measured table."""
    alpha, k, t, d = float(alpha), int(k), max(float(target_ms), 1.0), max(float(draft_ms), 0.0)
    pred = prediction(spec, plain)
    run = {} if pred is None else {"run_alpha": pred.alpha, "run_k": pred.k}
    return (
        viz.theory_text_html(alpha, k, t, d),
        viz.tokens_per_round_figure(**run, measured_tokens_per_round=pred.measured_tokens_per_round if pred else None),
        viz.speedup_vs_k_figure(t, d, **run, measured_speedup=pred.measured_speedup if pred else None),
        viz.speedup_heatmap_figure(t, d, **run),
        _measured_html(spec, pred),
        *tree_views(spec),
        viz.pass_cost_figure(*viz.runtime_curves(spec or plain)),
    )


def tree_views(spec: Trace | None) -> tuple:
    """For a tree run: the box shown, the tree-or-chain words and the speedup figure."""
    pay = None
    if spec is not None and spec.mode == SPECULATIVE:
        pay = tree_payoff(spec.events, spec.settings, spec.meta)
    if pay is None:
        return gr.Row(visible=False), "", gr.skip()
    return gr.Row(visible=True), payoff_html(pay), payoff_figure(pay)


def _measured_html(spec: Trace | None, pred) -> str:
    if pred is not None:
        return viz.prediction_html(pred)
    return NO_T if speculative(spec) else NO_RUN


def from_pair(pair_name: str) -> tuple:
    """T and D as measured when the pair loaded, where it has; else the sliders stay."""
    state = runner.LOADER.status(pair_name)
    cost = state.pair.cost_model if state is not None and state.ready else None
    if cost is None:
        return gr.skip(), gr.skip()
    return slider_ms(cost.target, cost.draft)


def slider_ms(target_ms: float, draft_ms: float) -> tuple[int, int]:
    """T and D as the sliders can show them: whole ms, T at least 1, both at most MAX_MS."""
    return min(max(round(target_ms), 1), MAX_MS), min(round(draft_ms), MAX_MS)


def from_run(spec: Trace | None, plain: Trace | None) -> tuple:
    """Slider values measured by the last run (unchanged where there is none)."""
    pred = prediction(spec, plain)
    if pred is None:
        gr.Warning("No speculative run yet: run one first, then its numbers can fill the sliders.")
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    return round(pred.alpha, 2), min(max(pred.k, 1), MAX_K), *slider_ms(pred.target_ms, pred.draft_ms)


class TheoryPage(Tab):
    """The formula with sliders; it opens on the loaded pair's measured T and D."""

    id, title = "theory", "Theory"

    def build(self, shared: Shared) -> None:
        self.ui = TheoryTab()
        self.redraw_inputs, self.redraw_outputs = self.ui.sliders, self.ui.outputs

    def wire(self, shared: Shared) -> None:
        ui = self.ui
        inputs = [*ui.sliders, shared.trace, shared.plain]
        pair = shared.built["live"].ui.pair
        shared.demo.load(from_pair, [pair], [ui.target_ms, ui.draft_ms], **PRIVATE).then(
            views, inputs, ui.outputs, **PRIVATE
        )
        for slider in ui.sliders:
            slider.release(views, inputs, ui.outputs, **PRIVATE)
        ui.use_run.click(from_run, [shared.trace, shared.plain], ui.sliders, **PRIVATE).then(
            views, inputs, ui.outputs, **PRIVATE
        )

    def redraw(self, trace: Trace | None, *sliders) -> tuple:
        return views(*sliders, trace, None)

    redraw_with_plain = staticmethod(views)  # (alpha, k, T, D, trace, plain): after a plain run beside the trace
