"""Tab 3, side by side: the current run against plain decoding of the target.

The plain run uses the current run's pair, prompt and settings (seed included). Then: wall
time, tokens per second and forward passes of each, the token-by-token identity check (exact
in greedy mode), tokens over time, and a race replay that shows both columns at the speeds
they were measured at, from the recorded timestamps.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import gradio as gr

from specviz import viz
from specviz.app import runner
from specviz.app.config import PageConfig
from specviz.app.stopping import session_of
from specviz.app.shown_errors import shown_errors
from specviz.errors import UserError
from specviz.events import Trace
from specviz.choices import AUTO, PLAIN, RUNTIMES, SPECULATIVE
from specviz.settings import GenerationSettings, from_request
from specviz.app.tab import MODELS, PRIVATE, Shared, Tab, chart, hint, muted, stops

SPEEDS = [("1\u00d7 (real time)", 1.0), ("2\u00d7", 2.0), ("4\u00d7", 4.0), ("10\u00d7", 10.0)]
NOTHING = muted("Run a generation in speculative mode, then compare it here with plain decoding.")
READY = muted("Press \u201cRun plain decoding and compare\u201d to race this run against the target alone.")


class CompareTab:
    """The tab's components, each made where it is laid out (inside the caller's gr.Tab)."""

    def __init__(self):
        hint(
            "Plain decoding runs the target alone, one forward pass per token, with the same prompt, settings "
            "and seed as the current run, under its output format where it has one."
        )
        with gr.Row():
            self.run = gr.Button("Run plain decoding and compare", variant="primary", elem_id="compare-run", scale=3)
            self.stop = gr.Button("Stop", variant="stop", elem_id="compare-stop", scale=1, min_width=80)
        with gr.Row(equal_height=False):
            with gr.Column(min_width=300):
                self.table = gr.HTML(NOTHING, elem_id="compare-table")
                self.identity = gr.HTML(elem_id="identity")
            with gr.Column(min_width=300):
                self.curve = chart("race-curve", viz.empty_figure("Tokens over time appear here", "Tokens over time"))
        with gr.Row(equal_height=False, elem_id="race-controls"):
            self.replay = gr.Button("\u25b6 Replay the race", elem_id="race-replay", scale=0, min_width=180)
            self.speed = gr.Radio(SPEEDS, value=1.0, label="Replay speed", elem_id="race-speed", scale=1)
        with gr.Row(equal_height=False, elem_id="race"):
            self.spec_column = gr.HTML(elem_id="race-spec", min_width=280)
            self.plain_column = gr.HTML(elem_id="race-plain", min_width=280)

    @property
    def outputs(self) -> list:
        """views()' outputs, in its return order (the plain trace's state comes first)."""
        return [self.table, self.identity, self.curve, self.spec_column, self.plain_column]


def views(spec: Trace | None, plain: Trace | None) -> tuple:
    """Table, identity check, tokens-over-time curve and both race columns at the end."""
    if spec is None or spec.mode != SPECULATIVE:
        return NOTHING, "", viz.empty_figure("Tokens over time appear here", "Tokens over time"), "", ""
    end = viz.race_end_s(spec, plain) if plain is not None else viz.race_end_s(spec)
    if plain is None:
        spec_col, _ = viz.race_frame(spec, [], end)
        return READY, "", viz.tokens_vs_time_figure(spec), spec_col, ""
    spec_col, plain_col = viz.race_frame(spec, plain, end)
    return (
        viz.comparison_html(spec.summary, plain.summary),
        viz.identity_html(spec, plain),
        viz.tokens_vs_time_figure(spec, plain),
        spec_col,
        plain_col,
    )


def plain_settings(spec: Trace) -> GenerationSettings:
    """The speculative run's settings in plain mode, on the runtime that run used (not
    `auto` again, which a measurement in between could turn the other way)."""
    settings = replace(from_request(spec.settings), mode=PLAIN)
    ran_on = (spec.meta or {}).get("runtime")
    named = ran_on in RUNTIMES and ran_on != AUTO
    return replace(settings, runtime=ran_on) if named else settings


class Comparisons:
    """The side-by-side handlers, bound to the page's limits."""

    def __init__(self, config: PageConfig):
        self.config = config

    @shown_errors
    def run(self, spec: Trace | None, request: gr.Request, progress=gr.Progress()) -> Iterator[tuple]:
        """Run plain decoding for the current run: the plain column fills as it goes, then
        yields (plain trace, table, identity, curve, spec column, plain column)."""
        if spec is None or spec.mode != SPECULATIVE:
            raise UserError("run a generation in speculative mode first: plain decoding is compared with it")
        settings = plain_settings(spec)
        plain = None
        for plain in runner.stream(
            spec.pair,
            spec.prompt,
            settings,
            session_of(request),
            self.config,
            on_progress=runner.loading(progress, spec.pair),
        ):
            _, column = viz.race_frame([], plain, viz.race_end_s(plain))
            yield gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), column
        if plain is not None:
            yield plain, *views(spec, plain)

    @staticmethod
    @shown_errors
    def replay(spec: Trace | None, plain: Trace | None, speed: float) -> Iterator[tuple[str, str]]:
        """Both columns as they stood at each moment, shown at `speed` times the measured pace."""
        if spec is None or plain is None:
            raise UserError("run plain decoding first (the button above): the race needs both runs")
        started = time.monotonic()
        for i, t in enumerate(viz.replay_times(viz.race_end_s(spec, plain), replay_speed(speed))):
            time.sleep(max(0.0, started + i * viz.REPLAY_FRAME_S - time.monotonic()))
            yield viz.race_frame(spec, plain, t)


def replay_speed(speed) -> float:
    """One of the offered speeds (1 when none is given), or one line saying which are."""
    offered = [v for _, v in SPEEDS]
    value = 1.0 if speed is None else speed
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value not in offered:
        shown = value if isinstance(value, (int, float)) and len(str(value)) < 24 else type(value).__name__
        raise UserError(f"replay speed {shown}; the speeds offered are {', '.join(f'{v:g}' for v in offered)}")
    return float(value)


class ComparePage(Tab):
    """Plain decoding of the current run's prompt and settings, then the race replay."""

    id, title = "compare", "Side by side"

    def build(self, shared: Shared) -> None:
        self.ui = CompareTab()
        self.comparisons = Comparisons(shared.config)
        self.redraw_outputs = [shared.plain, *self.ui.outputs]

    def wire(self, shared: Shared) -> None:
        ui = self.ui
        run = ui.run.click(self.comparisons.run, [shared.trace], self.redraw_outputs, **MODELS, **PRIVATE)
        theory = shared.built["theory"]
        run.success(
            theory.redraw_with_plain,
            [*theory.redraw_inputs, shared.trace, shared.plain],
            theory.redraw_outputs,
            **PRIVATE,
        )
        replay = ui.replay.click(
            self.comparisons.replay,
            [shared.trace, shared.plain, ui.speed],
            [ui.spec_column, ui.plain_column],
            concurrency_limit=None,
            show_progress="hidden",
            **PRIVATE,
        )
        stops(ui.stop.click, [run, replay])

    def redraw(self, trace: Trace | None, *values) -> tuple:
        return (None, *views(trace, None))  # a new trace has no plain run to compare with yet
