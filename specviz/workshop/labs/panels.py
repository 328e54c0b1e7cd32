"""The Labs tab's labs that run the loaded pair: the current prompt at several temperatures
(one button, cancellable), the current run again without its output format (acceptance by
position with and without it), and the pass costs of several sequences at once with the speedup they
predict by batch size (`parts.PANELS`, after the tab's sections on the current trace).

    section = panels.PairLabsSection()
    panels.wire(section, trace_state, pair_dropdown, config)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace

import gradio as gr

from specviz import run_stats
from specviz.app import runner, zero_gpu
from specviz.app.config import PageConfig
from specviz.app.loading import Cancelled
from specviz.app.shown_errors import shown_errors, verdict
from specviz.app.stopping import session_of
from specviz.app.tab import MODELS, PRIVATE, Panel, Shared, chart, hint, muted, speculative, stops
from specviz.engine import model_lock
from specviz.choices import FREE_TEXT
from specviz.errors import UserError
from specviz.events import Trace
from specviz.limits import SWEEP_WALL_S
from specviz.settings import GenerationSettings, from_request
from specviz.viz import acceptance_plots as ap
from specviz.viz.text import words_html
from specviz.workshop.labs.sweep import DEFAULT_TEMPERATURES, SWEEP_MAX_NEW_TOKENS, parse_temperatures, wall_left

SWEEP_HINT = muted(
    f"Runs the current prompt and settings (up to {SWEEP_MAX_NEW_TOKENS} new tokens each) at each temperature "
    "on the loaded pair."
)
GRAMMAR_HINT = muted(
    f"Runs the current prompt and settings again (up to {SWEEP_MAX_NEW_TOKENS} new tokens) without the run's "
    "output format, on the loaded pair."
)
BATCH_HINT = muted("Times the loaded pair\u2019s passes over 1 to 8 sequences at once (a minute or two on a CPU).")
BATCH_REPEATS = 2  # timed passes per size on the page: a CPU takes minutes for the whole grid
MACHINE_S = 3.0  # ZeroGPU seconds for the batching lab's large copy and matrix product (`batching.machine`)


class PairLabsSection:
    """The sections' components, each made where it is laid out (inside the caller's gr.Tab),
    top to bottom."""

    def __init__(self):
        self._sweep_section()
        self._grammar_section()
        self._batching_section()

    @property
    def grammar_outputs(self) -> list:
        return [self.grammar_plot, self.grammar_text]

    def _grammar_section(self) -> None:
        """The current run's prompt again without its output format: acceptance by position of both."""
        hint(
            "### An output format\nA grammar forces keys, quotes and separators, which are accepted as they ride "
            "in the verify pass; what the draft guesses in between is judged under the grammar too."
        )
        self.grammar = gr.Button("Run it again as free text", elem_id="labs-grammar")
        self.grammar_plot = chart("labs-grammar-plot", ap.grammar_positions_figure([], []))
        self.grammar_text = gr.HTML(GRAMMAR_HINT, elem_id="labs-grammar-text")

    @property
    def sweep_outputs(self) -> list:
        return [self.sweep_plot, self.sweep_text]

    @property
    def batching_outputs(self) -> list:
        return [self.batching_plot, self.batch_costs, self.batching_text]

    def _sweep_section(self) -> None:
        """The current prompt at several temperatures on the loaded pair."""
        hint(
            "### Temperature\nSampling spreads both models' probability over more tokens, and the draft's guess "
            "matches the target's less often."
        )
        self.temperatures = gr.Textbox(
            DEFAULT_TEMPERATURES, label="Temperatures", info="comma-separated, 0 to 2", elem_id="labs-temperatures"
        )
        with gr.Row():
            self.sweep = gr.Button("Run the temperature sweep", variant="primary", elem_id="labs-sweep", scale=3)
            self.sweep_stop = gr.Button("Stop", variant="stop", elem_id="labs-sweep-stop", scale=1, min_width=80)
        self.sweep_plot = chart("labs-sweep-plot", ap.temperature_sweep_figure([], [], [], []))
        self.sweep_text = gr.HTML(SWEEP_HINT, elem_id="labs-sweep-text")

    def _batching_section(self) -> None:
        """The pass costs of several sequences at once and the speedup they predict by batch size."""
        hint("### Batching\nA server decodes many sequences at once, and the speedup shrinks as the batch grows.")
        self.batching = gr.Button("Measure batch costs", elem_id="labs-batching")
        with gr.Row(equal_height=False):
            self.batching_plot = chart("labs-batching-plot", ap.batching_figure([], [], [], [], 1), min_width=300)
            self.batch_costs = chart("labs-batch-costs", ap.batch_costs_figure([], [], []), min_width=300)
        self.batching_text = gr.HTML(BATCH_HINT, elem_id="labs-batching-text")


def settings_of(trace: Trace) -> GenerationSettings:
    """The trace's settings (as the page reruns them), capped to a short run."""
    s = from_request(trace.settings)
    return replace(s, max_new_tokens=min(s.max_new_tokens, SWEEP_MAX_NEW_TOKENS))


def run_k(trace: Trace) -> int:
    """The draft length the run mostly used: its mean drafted tokens per drafting round, rounded."""
    drafted = [len(r.drafted) for r in run_stats.rounds_of(trace.events) if r.drafted]
    return max(1, round(sum(drafted) / len(drafted))) if drafted else int(trace.settings.get("k", 4))


class Labs:
    """The labs' handlers, bound to the page's limits."""

    def __init__(self, config: PageConfig):
        self.config = config

    @contextlib.contextmanager
    def _on_pair(self, trace: Trace, pair_name: str | None, request, progress, with_draft: bool) -> Iterator[tuple]:
        """A lab's run, as the session's run (Stop ends it), on the pair chosen on the page
        (else the trace's) once it is loaded: the labs measure the loaded pair. Gives (the
        pair's name, the session)."""
        session = session_of(request)
        flag = runner.FLAGS.begin(session)
        try:
            name = runner.check_pair(pair_name or trace.pair, self.config)
            if not name:
                raise UserError("choose a model pair in the live run tab first")
            runner.LOADER.wait(
                name, with_draft=with_draft, should_stop=flag.is_set, on_progress=runner.loading(progress, name)
            )
            yield name, session
        finally:
            runner.FLAGS.finish(session, flag)

    @shown_errors
    def sweep(
        self, trace: Trace | None, pair_name: str, temperatures: str, request: gr.Request, progress=gr.Progress()
    ) -> Iterator[tuple]:
        """Run the current prompt at each temperature; the figure grows after each run."""
        temps = parse_temperatures(temperatures)  # first: refused before anything else is looked at
        if not speculative(trace):
            raise UserError("run a generation in speculative mode first: the sweep reruns its prompt and settings")
        settings, rows = settings_of(trace), []
        try:
            with self._on_pair(trace, pair_name, request, progress, settings.needs_draft) as (name, session):
                started = time.monotonic()
                for i, t in enumerate(temps):
                    wall_s = wall_left(started, self.config.max_wall_s)
                    if zero_gpu.ON_ZERO_GPU:  # each temperature asks for the GPU time its run needs
                        wall_s = min(wall_s, runner.run_wall_s(self.config, settings, name, trace.prompt))
                    if wall_s <= 0:
                        yield sweep_views(rows, stopped=True, total=len(temps), out_of_time=True)
                        return
                    progress(i / len(temps), desc=f"temperature {t:g}")
                    follow = (
                        None if zero_gpu.ON_ZERO_GPU else (lambda f, m, i=i: progress((i + f) / len(temps), desc=m))
                    )
                    part = SWEEP_POINT(
                        name, settings.needs_draft, trace.prompt, settings.to_dict(), t, session, wall_s, follow
                    )
                    rows += part.rows
                    yield sweep_views(rows, stopped=part.cancelled, total=len(temps))
                    if part.cancelled:
                        return
        except Cancelled:
            yield sweep_views(rows, stopped=True, total=len(temps))

    @shown_errors
    def grammar(self, trace: Trace | None, pair_name: str, request: gr.Request, progress=gr.Progress()) -> tuple:
        """Run the current prompt as free text; draw acceptance by position with and without the format."""
        if not speculative(trace) or trace.settings.get("output_format", FREE_TEXT) == FREE_TEXT:
            raise UserError("run a generation in speculative mode with an output format first (Live tab)")
        settings = replace(settings_of(trace), output_format=FREE_TEXT, output_spec="")
        with self._on_pair(trace, pair_name, request, progress, settings.needs_draft) as (name, session):
            progress(0.0, desc="free text")
            wall_s = self.config.max_wall_s
            if zero_gpu.ON_ZERO_GPU:
                wall_s = runner.run_wall_s(self.config, settings, name, trace.prompt)
            free = FREE_RUN(name, settings.needs_draft, trace.prompt, settings.to_dict(), session, wall_s)
        return grammar_views(trace, free)

    @shown_errors
    def batching(self, trace: Trace | None, pair_name: str, request: gr.Request, progress=gr.Progress()) -> tuple:
        """Time the pair's batched passes; predict the speedup at the run's acceptance and k."""
        from specviz.workshop.labs import batching as lab

        if not speculative(trace):
            raise UserError(
                "run a generation in speculative mode first: its acceptance predicts the speedup by batch size"
            )
        with self._on_pair(trace, pair_name, request, progress, True) as (name, session):
            progress(0.0, desc="Timing passes")
            follow = None if zero_gpu.ON_ZERO_GPU else (lambda f, m: progress(f, desc=f"Timing passes: {m}"))
            costs, figures = BATCH_COSTS(name, session, follow)
        stats = run_stats.position_stats(trace.events)
        return batching_views(lab.result(costs, stats.alpha, min(run_k(trace), max(costs.pass_sizes) - 1), figures))


def _sweep_point(
    pair_name: str,
    with_draft: bool,
    prompt: str,
    settings: dict,
    temperature: float,
    session: str,
    max_wall_s: float | None,
    on_progress=None,
):
    """One temperature of the sweep on the loaded pair, stopped by the session's Stop."""
    from specviz.workshop.labs.sweep import sweep as run_sweep

    pair = runner.LOADER.wait(pair_name, with_draft=with_draft)
    flag = runner.FLAGS.current(session)
    return run_sweep(
        pair,
        prompt,
        from_request(settings),
        [temperature],
        should_stop=flag.is_set if flag else None,
        max_wall_s=max_wall_s,
        on_progress=on_progress,
    )


def _free_run(pair_name: str, with_draft: bool, prompt, settings: dict, session: str, max_wall_s: float | None):
    """The run again on the loaded pair as free text, stopped by the session's Stop."""
    from specviz import engine

    pair = runner.LOADER.wait(pair_name, with_draft=with_draft)
    flag = runner.FLAGS.current(session)
    stop = flag.is_set if flag else None
    return engine.run(pair, prompt, from_request(settings), should_stop=stop, max_wall_s=max_wall_s)


def grammar_views(trace: Trace, free: Trace) -> tuple:
    """Both runs' acceptance by position, and their rates in words."""
    constrained = run_stats.acceptance_by_position(trace.events)
    fig = ap.grammar_positions_figure(constrained, run_stats.acceptance_by_position(free.events))
    lines = [
        f"With the output format: {trace.summary.tokens_per_round:.2f} tokens a round, "
        f"{trace.summary.forced} forced tokens ({trace.summary.forced_accepted} accepted), "
        f"drafted tokens {trace.summary.acceptance_rate:.0%} accepted.",
        f"Free text: {free.summary.tokens_per_round:.2f} tokens a round, drafted tokens "
        f"{free.summary.acceptance_rate:.0%} accepted.",
    ]
    muted = ["Positions count every token a round proposed, forced ones included; the rates above count them apart."]
    return fig, words_html(lines, muted)


def _batch_costs(pair_name: str, session: str, on_progress=None):
    """The loaded pair's batched pass costs, and the device's copy and product speeds."""
    from specviz.workshop.labs import batching as lab

    pair = runner.LOADER.wait(pair_name, with_draft=True)
    if pair.draft is None:
        raise UserError("the batching lab times a draft model: load a pair with one")
    flag = runner.FLAGS.current(session)

    def report(f: float, m: str) -> None:
        if on_progress is not None:
            on_progress(0.9 * f, m)

    stop = flag.is_set if flag else None
    with model_lock.models(stop):  # one pass of the models at a time, as a run's passes are
        costs = lab.measure_batch_costs(pair, repeats=BATCH_REPEATS, should_stop=stop, on_progress=report)
    if on_progress is not None:
        on_progress(0.95, "a large copy and a large matrix product")
    return costs, lab.machine(str(pair.device), pair.precision, target=pair.target)


def batch_grant_s(pair_name: str, *_args) -> int:
    """ZeroGPU seconds for the batch timing, from its own sizes (`batching.pass_plan`) at the
    pair's measured rates: each pass at least a decoded token's time, a wide one as a prefill
    of its tokens; the contexts' prefills; the machine figures; setup; within the grant's bounds."""
    from specviz.workshop.labs import batching as lab

    per_token, per_prompt_token = zero_gpu.RATES.s_per_token(pair_name), zero_gpu.RATES.s_per_prompt_token(pair_name)
    passes, prefill = lab.pass_plan(repeats=BATCH_REPEATS)
    work = sum(max(per_token, n * per_prompt_token) for n in passes) + prefill * per_prompt_token
    return zero_gpu.clamp_grant(zero_gpu.SETUP_S + MACHINE_S + zero_gpu.SLOWER * work)


# What touches the models (runner.runs_models).
SWEEP_POINT = runner.runs_models(_sweep_point)
BATCH_COSTS = runner.runs_models(_batch_costs, duration=batch_grant_s)
FREE_RUN = runner.runs_models(_free_run)


def sweep_views(rows, *, stopped: bool = False, total: int | None = None, out_of_time: bool = False) -> tuple:
    fig = ap.temperature_sweep_figure(
        [r.temperature for r in rows],
        [r.acceptance for r in rows],
        [r.tokens_per_round for r in rows],
        [r.speedup for r in rows],
    )
    lines = [
        f"T = {r.temperature:g}: acceptance {r.acceptance:.0%}, {r.tokens_per_round:.2f} tokens a round, "
        f"{r.tokens_per_s:.2f} tokens/s, {r.speedup:.2f}\u00d7 plain decoding"
        for r in rows
    ]
    muted = []
    if rows and rows[0].plain_ms_per_token:
        muted.append(
            f"Speedup: tokens/s over plain decoding's {1000 / rows[0].plain_ms_per_token:.2f} tokens/s, one target "
            f"pass of {rows[0].plain_ms_per_token:.0f} ms from the pair's measured costs."
        )
    if out_of_time:
        muted.append(
            f"The sweep's time ran out ({SWEEP_WALL_S.value:g} s, {SWEEP_WALL_S.env}): "
            "the temperatures not run are left out."
        )
    elif stopped:
        muted.append("Stopped: the temperatures not run are left out.")
    elif total is not None and len(rows) < total:
        muted.append(f"{len(rows)} of {total} temperatures run\u2026")
    return fig, words_html(lines, muted)


def batching_views(r) -> tuple:
    c = r.costs
    preds = r.predictions
    fig = ap.batching_figure(
        [p.batch for p in preds],
        [p.speedup for p in preds],
        [p.best_speedup for p in preds],
        [p.best_k for p in preds],
        r.k,
        r.stops_paying_at,
    )
    from specviz.workshop.labs.batching import explanation

    muted = [
        f"Predicted from \u03b1 = {r.alpha:.2f} (the run's measured acceptance) and k = {r.k}; pass costs are the "
        f"median of {c.repeats} timed passes after {c.context} cached tokens per sequence."
    ]
    return fig, ap.batch_costs_figure(c.batch_sizes, c.pass_sizes, c.target_ms), words_html(explanation(r), muted)


def check_sweep(trace, pair_name, temperatures) -> list:
    """The sweep's temperatures checked as its request asks to join the queue, so a list over
    the limits is refused at once, not after waiting for the model slot."""
    return [verdict(), verdict(), verdict(lambda: parse_temperatures(temperatures))]


def wire(tab: PairLabsSection, trace: gr.State, pair: gr.components.Component, config: PageConfig) -> Labs:
    """Connect the sweep (cancellable) and batching buttons; the views are the page's to
    refresh when the current trace changes (`views` into `tab.outputs`)."""
    labs = Labs(config)
    sweep = tab.sweep.click(
        labs.sweep, [trace, pair, tab.temperatures], tab.sweep_outputs, **MODELS, validator=check_sweep, **PRIVATE
    )
    stops(tab.sweep_stop.click, [sweep])
    tab.grammar.click(labs.grammar, [trace, pair], tab.grammar_outputs, **MODELS, **PRIVATE)
    tab.batching.click(labs.batching, [trace, pair], tab.batching_outputs, **MODELS, **PRIVATE)
    return labs


class PairLabs(Panel):
    """The labs that run the loaded pair: the temperature sweep and the batching lab."""

    def build(self, shared: Shared) -> None:
        self.ui = PairLabsSection()

    def wire(self, shared: Shared) -> None:
        wire(self.ui, shared.trace, shared.built["live"].ui.pair, shared.config)
