"""Tab 5, the lossless lab: the acceptance rule run many times on a p and q you can edit.

The output frequencies land on p (not q) within sampling noise, and the share of accepted
drafts lands on the overlap sum min(p, q). specviz.lossless runs the Monte Carlo (with the
engine's own residual); this tab only reads the inputs and draws its result.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from specviz import viz
from specviz.app.shown_errors import shown_errors
from specviz.errors import UserError

DEFAULT_Q = "0.5, 0.2, 0.2, 0.1"
DEFAULT_P = "0.15, 0.35, 0.10, 0.40"
SAMPLES = [("10 thousand", 10_000), ("100 thousand", 100_000), ("1 million", 1_000_000), ("10 million", 10_000_000)]


@dataclass
class LosslessTab:
    q: gr.Textbox
    p: gr.Textbox
    samples: gr.Dropdown
    seed: gr.Number
    run: gr.Button
    summary: gr.HTML
    frequencies: gr.Plot
    acceptance: gr.Plot

    @property
    def inputs(self) -> list:
        return [self.p, self.q, self.samples, self.seed]

    @property
    def outputs(self) -> list:
        return [self.summary, self.frequencies, self.acceptance]


def build() -> LosslessTab:
    gr.Markdown("Draw x from q, keep it with probability min(1, p(x)/q(x)), otherwise draw a replacement from "
                "norm(max(0, p \u2212 q)). Repeat many times: what comes out is distributed exactly as p.",
                elem_classes=["sv-hint"])
    with gr.Row(equal_height=False):
        q = gr.Textbox(DEFAULT_Q, label="q: the draft's distribution", info="comma-separated, sums to 1", elem_id="lossless-q", min_width=220)
        p = gr.Textbox(DEFAULT_P, label="p: the target's distribution", info="comma-separated, sums to 1", elem_id="lossless-p", min_width=220)
        samples = gr.Dropdown(SAMPLES, value=1_000_000, label="Draws", elem_id="lossless-samples", min_width=140)
        seed = gr.Number(0, precision=0, minimum=0, label="Seed", elem_id="lossless-seed", min_width=100)
    run = gr.Button("Run the Monte Carlo", variant="primary", elem_id="lossless-run")
    summary = gr.HTML(elem_id="lossless-summary")
    with gr.Row(equal_height=False):
        frequencies = gr.Plot(elem_id="lossless-frequencies", show_label=False, min_width=300)
        acceptance = gr.Plot(elem_id="lossless-acceptance", show_label=False, min_width=260)
    return LosslessTab(q, p, samples, seed, run, summary, frequencies, acceptance)


@shown_errors
def simulate(p_text: str, q_text: str, samples, seed) -> tuple:
    """Parse, run and draw: (verdict, frequencies figure, acceptance figure)."""
    from specviz.lossless import parse_distribution, simulate as monte_carlo  # torch: on first use

    if seed is None or samples is None:
        raise UserError("choose a number of draws and a seed")
    result = monte_carlo(parse_distribution(p_text or "", "p"), parse_distribution(q_text or "", "q"), int(samples), int(seed))
    return viz.lossless_summary_html(result), viz.lossless_frequencies_figure(result), viz.lossless_acceptance_figure(result)
