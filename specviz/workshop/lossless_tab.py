"""The Lossless lab's tab, and its tool for programs: the acceptance rule run many times on a p
and q you can edit (`parts.TABS`, `parts.TOOLS`).

The output frequencies land on p (not q) within sampling noise, and the share of accepted
drafts lands on the overlap sum min(p, q). specviz.workshop.lossless runs the Monte Carlo (with the
engine's own rule); this tab only reads the inputs and draws its result. The same runs
on the loaded pair's real next-token distributions at a position of the current run, as the
run recorded them: its top tokens, with all the others lumped into one.

"Bugs people ship" runs the exact rule beside four mistakes on the same p and q at a chosen
temperature (specviz.workshop.lossless.bug_gallery).
"""

from __future__ import annotations

import json

import gradio as gr

from specviz import viz
from specviz.app.shown_errors import shown_errors, verdict
from specviz.app.tools import whole
from specviz.errors import UserError
from specviz.events import RoundEvent, Trace
from specviz.limits import check_distribution_text
from specviz.viz.inspector import round_at, trace_rounds
from specviz.viz.lossless_plots import bug_frequencies_figure, bug_table_html, bug_tv_figure
from specviz.app.tab import PRIVATE, Shared, Tab, chart, hint

DEFAULT_Q = "0.5, 0.2, 0.2, 0.1"
DEFAULT_P = "0.15, 0.35, 0.10, 0.40"
TOP_TOKENS = 10  # tokens shown on their own at a real position; the rest are one bar
SAMPLES = [("10 thousand", 10_000), ("100 thousand", 100_000), ("1 million", 1_000_000), ("10 million", 10_000_000)]
DEFAULT_TEMPERATURE = 0.7  # specviz.workshop.lossless.DEFAULT_TEMPERATURE (not imported: it loads torch)
# The Monte Carlo runs one at a time: a few million draws each.
ONE_AT_A_TIME = {"concurrency_id": "lossless", "concurrency_limit": 1, **PRIVATE}


class LosslessTab:
    """The tab's components, each made where it is laid out (inside the caller's gr.Tab): its
    sections, top to bottom."""

    def __init__(self):
        self._monte_carlo_section()
        self._bugs_section()
        self._position_section()

    @property
    def inputs(self) -> list:
        return [self.p, self.q, self.samples, self.seed]

    @property
    def outputs(self) -> list:
        return [self.summary, self.frequencies, self.acceptance]

    @property
    def position_outputs(self) -> list:
        return [self.position_summary, self.position_frequencies, self.position_acceptance]

    @property
    def bugs_inputs(self) -> list:
        return [self.p, self.q, self.samples, self.seed, self.temperature]

    @property
    def bugs_outputs(self) -> list:
        return [self.bugs_table, self.bugs_frequencies, self.bugs_tv]

    def _monte_carlo_section(self) -> None:
        """The rule run many times on a p and q typed in."""
        hint(
            "Draw x from q, keep it with probability min(1, p(x)/q(x)), otherwise draw a replacement from "
            "norm(max(0, p \u2212 q)). Repeat many times: what comes out is distributed exactly as p."
        )

        def distribution(value: str, label: str, elem_id: str) -> gr.Textbox:
            return gr.Textbox(value, label=label, info="comma-separated, sums to 1", elem_id=elem_id, min_width=220)

        with gr.Row(equal_height=False):
            self.q = distribution(DEFAULT_Q, "q: the draft's distribution", "lossless-q")
            self.p = distribution(DEFAULT_P, "p: the target's distribution", "lossless-p")
            self.samples = gr.Dropdown(
                SAMPLES, value=1_000_000, label="Draws", elem_id="lossless-samples", min_width=140
            )
            self.seed = gr.Number(0, precision=0, minimum=0, label="Seed", elem_id="lossless-seed", min_width=100)
        self.run = gr.Button("Run the Monte Carlo", variant="primary", elem_id="lossless-run")
        self.summary = gr.HTML(elem_id="lossless-summary")
        with gr.Row(equal_height=False):
            self.frequencies = chart("lossless-frequencies", min_width=300)
            self.acceptance = chart("lossless-acceptance", min_width=260)

    def _bugs_section(self) -> None:
        """The exact rule beside the mistakes of real implementations, on the same p and q."""
        gr.Markdown(
            "### Bugs people ship\nThe exact rule beside four mistakes found in real implementations, each run on "
            "the p and q above with the same number of draws. p and q are read as the distributions at temperature "
            "1; the drafts are sampled at T, so every output should be distributed as p at T, softmax(log p / T)."
        )
        with gr.Row(equal_height=False):
            self.temperature = gr.Slider(
                0.1,
                2.0,
                value=DEFAULT_TEMPERATURE,
                step=0.05,
                label="Temperature T",
                info="the two temperature mistakes only show away from 1",
                elem_id="lossless-temperature",
                min_width=220,
            )
            self.bugs_run = gr.Button("Run the bug gallery", elem_id="lossless-bugs-run", min_width=160)
        self.bugs_table = gr.HTML(elem_id="lossless-bugs-table")
        with gr.Row(equal_height=False):
            self.bugs_frequencies = chart("lossless-bugs-frequencies", min_width=300)
            self.bugs_tv = chart("lossless-bugs-tv", min_width=300)

    def _position_section(self) -> None:
        """The same draws on the loaded pair's p and q at the inspector's position."""
        gr.Markdown(
            "### On the loaded pair\nThe same draws on the target's p and the draft's q at the round and position "
            "chosen in the round inspector, as the run recorded them: the top tokens, and all the others as one."
        )
        self.run_position = gr.Button("Run on the inspector's position", elem_id="lossless-run-position")
        self.position_summary = gr.HTML(elem_id="lossless-position-summary")
        with gr.Row(equal_height=False):
            self.position_frequencies = chart("lossless-position-frequencies", min_width=300)
            self.position_acceptance = chart("lossless-position-acceptance", min_width=260)


def check_distributions(p_text, q_text, *others) -> list:
    """p and q bounded as the request asks to join the queue: refused at once, not after the
    Monte Carlo runs ahead of it (one at a time)."""
    return [
        verdict(lambda: check_distribution_text(str(p_text or ""), "p")),
        verdict(lambda: check_distribution_text(str(q_text or ""), "q")),
        *(verdict() for _ in others),
    ]


@shown_errors
def simulate(p_text: str, q_text: str, samples, seed) -> tuple:
    """Parse, run and draw: (verdict, frequencies figure, acceptance figure)."""
    from specviz.workshop.lossless import parse_distribution, simulate as monte_carlo  # torch: on first use

    if seed is None or samples is None:
        raise UserError("choose a number of draws and a seed")
    result = monte_carlo(
        parse_distribution(p_text or "", "p"), parse_distribution(q_text or "", "q"), int(samples), int(seed)
    )
    return views(result)


def views(result, **frequencies) -> tuple:
    """The Monte Carlo's verdict, its output frequencies (`frequencies`: their labels and
    title) and its acceptance."""
    return (
        viz.lossless_summary_html(result),
        viz.lossless_frequencies_figure(result, **frequencies),
        viz.lossless_acceptance_figure(result),
    )


@shown_errors
def simulate_bugs(p_text: str, q_text: str, samples, seed, temperature) -> tuple:
    """The bug gallery: (table and sentences, frequencies figure, TV figure)."""
    from specviz.workshop.lossless import bug_gallery, parse_distribution  # torch: on first use

    if seed is None or samples is None or temperature is None:
        raise UserError("choose a number of draws, a seed and a temperature")
    rules = bug_gallery(
        parse_distribution(p_text or "", "p"),
        parse_distribution(q_text or "", "q"),
        float(temperature),
        int(samples),
        int(seed),
    )
    return bug_table_html(rules), bug_frequencies_figure(rules), bug_tv_figure(rules)


def position_distributions(event: RoundEvent, position: int) -> tuple[list[float], list[float], list[str]]:
    """p, q and labels over a drafted position's recorded top tokens plus one "all others"."""
    if not 1 <= position <= min(len(event.drafted), len(event.positions)):
        raise UserError(f"position {position} of round {event.index} has no draft to test: choose a drafted position")
    top = sorted(event.positions[position - 1].top, key=lambda t: -max(t.p, t.q))[:TOP_TOKENS]
    p, q = [t.p for t in top], [t.q for t in top]
    p.append(max(0.0, 1 - sum(p)))
    q.append(max(0.0, 1 - sum(q)))
    p_sum, q_sum = sum(p), sum(q)  # recorded in float32: renormalise the last bits away
    return [x / p_sum for x in p], [x / q_sum for x in q], [t.text for t in top] + ["(all others)"]


@shown_errors
def simulate_position(trace: Trace | None, round_index, position, samples, seed) -> tuple:
    """The Monte Carlo on the current run's p and q at the inspector's round and position."""
    from specviz.workshop.lossless import simulate as monte_carlo  # torch: on first use

    rounds = trace_rounds(trace)
    if not rounds:
        raise UserError(
            "run a generation in speculative mode first, then choose a round and position in the round inspector"
        )
    event = rounds[round_at(rounds, round_index)]
    p, q, labels = position_distributions(event, int(position or 1))
    result = monte_carlo(p, q, int(samples), int(seed or 0))
    title = f"Round {event.index}, position {int(position or 1)}: output frequencies against p and q"
    return views(result, labels=labels, title=title)


def lossless_check(p: str, q: str, samples: int = 200_000, seed: int = 0) -> str:
    """Monte Carlo check that the speculative acceptance rule (accept x ~ q with probability
    min(1, p(x)/q(x)), else draw from norm(max(0, p - q))) outputs tokens distributed as p.

    Args:
        p: the target distribution, comma-separated probabilities (normalised if they do not sum to 1)
        q: the draft distribution, comma-separated, as many entries as p
        samples: draws to simulate
        seed: random seed

    Returns:
        JSON with the measured output frequencies, the largest deviation from p in standard errors
        (max_z), the measured and predicted acceptance rates.
    """
    from specviz.workshop.lossless import parse_distribution, simulate  # torch: on first use

    r = simulate(
        parse_distribution(p, "p"),
        parse_distribution(q, "q"),
        samples=whole(samples, "samples"),
        seed=whole(seed, "seed"),
    )
    return json.dumps(
        {
            "measured": r.measured,
            "p": r.p,
            "max_z": r.max_z,
            "acceptance_rate": r.acceptance_rate,
            "predicted_acceptance": r.overlap,
            "samples": r.samples,
        }
    )


class LosslessPage(Tab):
    """The acceptance rule run many times on a p and q, or on a position of the current run."""

    id, title = "lossless", "Lossless lab"

    def build(self, shared: Shared) -> None:
        self.ui = LosslessTab()

    def wire(self, shared: Shared) -> None:
        ui, one = self.ui, ONE_AT_A_TIME
        ins = shared.built["inspector"].ui
        ui.run.click(simulate, ui.inputs, ui.outputs, validator=check_distributions, **one)
        ui.bugs_run.click(simulate_bugs, ui.bugs_inputs, ui.bugs_outputs, validator=check_distributions, **one)
        ui.run_position.click(
            simulate_position, [shared.trace, ins.round, ins.position, ui.samples, ui.seed], ui.position_outputs, **one
        )
