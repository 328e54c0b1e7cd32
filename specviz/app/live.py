"""Tab 1, the live run: prompt and settings, the coloured token stream, stats, the timeline.

`LiveRuns.run` takes the prompt, the pair and a `GenerationSettings` and is a generator that
sends one update per round (the stream, the stats and the timeline, each drawn once; a run
with token trees or a draft with another tokenizer also shows its latest round's tree or
alignment, redrawn with the timeline; rounds closer together than `runner.update_interval_s`,
which grows with the stream, share an update, so neither a fast GPU nor a long stream floods the
browser) and keeps the trace so far in the session's state, so Stop leaves a trace to inspect.
`LiveRuns.rerun` is the same run after a slider is released or the pair changes. The page calls both through `LiveRuns.handler`, which
reads the tab's inputs once (`LiveTab.read`: the settings validated as they are made).

Each setting's control is made from its declaration in `specviz/settings.py` (`control`);
`STACKED` and `ROWS` only place the known ones.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import gradio as gr

from specviz import viz
from specviz.app import runner
from specviz.app.config import PageConfig
from specviz.app.shown_errors import shown_errors
from specviz.app.stopping import NO_SESSION, session_of
from specviz.app.streams import TOKEN_CLICK_JS, alignment_view
from specviz.app.tab import MODELS, PRIVATE, Shared, Tab, chart, hint, shown, stops
from specviz.events import CHECK, RoundEvent, Trace
from specviz.models.catalogue.presets import list_presets
from specviz.choices import COST_AWARE, PLAIN, POLICIES, SPECULATIVE, SUFFIX
from specviz.settings import DEFAULTS, PROMPT, SPECS, GenerationSettings, Setting, check_prompt, default_k, from_request
from specviz.viz.palette import empty_figure
from specviz.viz.text import esc
from specviz.viz.tree import tree_figure

EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples.json"
NO_RUN = "Press Run to generate: each token appears coloured by what happened to it."

# Where the page puts the settings: the choices stacked, then rows side by side. Any other
# setting (a new one too) goes under "More settings", in declared order.
STACKED = ("runtime", "drafter", "mode", "policy", "output_format", "output_spec")
ROWS = (("k",), ("temperature", "top_p"), ("seed", "top_k", "max_new_tokens"), ("tree_nodes", "tree_width"))


class LiveTab:
    """The live run's components, each made where it is laid out: settings on the left (on top
    on a phone), the run on the right."""

    def __init__(self, config: PageConfig):
        examples = load_examples()
        # On a phone the columns stack; app.css then puts the run between the prompt and the settings.
        with gr.Row(equal_height=False, elem_id="live-row"):
            with gr.Column(scale=2, min_width=300, elem_id="live-controls"):
                with gr.Column(elem_id="live-prompt") as prompt_column:
                    self.prompt = gr.Textbox(
                        label=PROMPT.label,
                        lines=4,
                        max_lines=12,
                        value=examples[0]["prompt"],
                        elem_id="prompt",
                        max_length=PROMPT.chars.value,
                    )
                    with gr.Row():
                        self.run = gr.Button("Run", variant="primary", elem_id="run", min_width=80)
                        self.stop = gr.Button("Stop", variant="stop", elem_id="stop", min_width=80)
                with gr.Column(elem_id="live-settings"):
                    self.pair, controls = _settings(config)
                # One control per GenerationSettings field, in declared order.
                self.settings = {name: controls[name] for name in SPECS}
                with prompt_column:  # under the prompt, made once the controls an example sets are
                    self.examples = make_examples(examples, self.prompt, self.settings)
            with gr.Column(scale=3, min_width=300, elem_id="live-output"):
                gr.HTML(viz.legend_html(plain=True), elem_id="legend")
                self.tokens = gr.HTML(viz.tokens_html([], empty=NO_RUN), elem_id="tokens", js_on_load=TOKEN_CLICK_JS)
                self.round_tree = chart("live-tree", visible=False)  # the latest round's tree, in a tree run
                # The latest round's alignment, with a draft of another tokenizer.
                self.round_alignment = gr.HTML(visible=False, elem_id="live-alignment")
                self.stats = gr.HTML(viz.stats_html(viz.live_stats([])), elem_id="stats")
                self.timeline = chart(
                    "timeline", empty_figure("The time of each round appears here as it runs", "Time per round")
                )

    @property
    def inputs(self) -> list[gr.components.Component]:
        """The prompt, the pair and the settings: what a run reads (`read`), and what a replayed
        trace sets (`controls_from`)."""
        return [self.prompt, self.pair, *self.settings.values()]

    def read(self, values: Sequence) -> tuple[object, object, GenerationSettings]:
        """The prompt, the pair and the validated settings from the values of `inputs`, in order."""
        prompt, pair, *settings = values
        return prompt, pair, from_request(dict(zip(self.settings, settings, strict=True)))

    @property
    def outputs(self) -> list[gr.components.Component]:
        return [self.tokens, self.stats, self.timeline, self.round_tree, self.round_alignment]

    @property
    def sliders(self) -> list[gr.Slider]:
        return [c for c in self.settings.values() if isinstance(c, gr.Slider)]


def load_examples() -> list[dict]:
    return json.loads(EXAMPLES.read_text(encoding="utf-8"))["examples"]


# What an example sets besides its prompt. Edit work copies its input, so an edit example picks
# what pays there on a CPU where a draft model cannot: the suffix drafter (no draft model), the
# cost-aware policy at its cap (a round inside a copied span verifies as many copied tokens as
# the measured pass costs pay for), greedy decoding, and room for the whole answer (150-250
# tokens: the default 128 ends it as the copy gets going). Code and prose examples set the same
# settings back to their defaults, the draft model's.
# A JSON example (its schema its own) copies values from its prompt the same way, and the grammar
# forces the keys and punctuation besides. Every other example sets free text back.
EDIT, JSON = "edit", "json"
COPYING = GenerationSettings(
    mode=SPECULATIVE, drafter=SUFFIX, policy=COST_AWARE, k=default_k(COST_AWARE), temperature=0.0, max_new_tokens=256
)
EXAMPLE_SETTINGS = {EDIT: COPYING, JSON: COPYING}
SET_BY_EXAMPLES = ("mode", "drafter", "policy", "k", "temperature", "max_new_tokens", "output_format", "output_spec")
EXAMPLE_HEADINGS = {
    EDIT: "Examples: edit work, where the suffix drafter copies the input (then race it on Side by side)",
    JSON: "Examples: JSON extraction under a schema, its keys and quotes forced by the grammar (then race it on Side by side)",
}


def make_examples(examples: list[dict], prompt: gr.Textbox, settings: dict) -> dict[str, gr.Examples]:
    """One set of examples per heading (code and prose together, edit work and JSON apart): a
    click sets the prompt and SET_BY_EXAMPLES from the example's own output format and its
    kind's settings. A click runs nothing."""
    groups: dict[str, list[dict]] = {}
    for e in examples:
        groups.setdefault(EXAMPLE_HEADINGS.get(e["kind"], "Examples: code and prose"), []).append(e)
    controls = [prompt, *(settings[name] for name in SET_BY_EXAMPLES)]
    made = {}
    for heading, group in groups.items():
        rows = [
            [e["prompt"], *(e.get(n, getattr(EXAMPLE_SETTINGS.get(e["kind"], DEFAULTS), n)) for n in SET_BY_EXAMPLES)]
            for e in group
        ]
        made[heading] = gr.Examples(
            rows,
            inputs=controls,
            label=heading,
            example_labels=[e["label"] for e in group],
            examples_per_page=len(group),
        )
    return made


def pair_choices(config: PageConfig) -> list[tuple[str, str]]:
    """The presets offered (a public page's own pairs only), the operator's default pair first
    when it is none of them."""
    choices = [
        (f"{p.name}: {p.description}", p.name)
        for p in list_presets()
        if not config.public or p.name in config.public_pairs
    ]
    if config.default_pair not in {value for _, value in choices}:
        choices.insert(0, (config.default_pair, config.default_pair))
    return choices


def _settings(config: PageConfig) -> tuple[gr.Dropdown, dict[str, gr.components.Component]]:
    """The pair and one control per setting, by setting name."""
    custom = " or type 'DRAFT -> TARGET' (Hub ids, folders or .gguf files)" if config.allow_custom else ""
    pair = gr.Dropdown(
        pair_choices(config),
        value=config.default_pair,
        label="Model pair (draft \u2192 target)",
        info=f"A preset{custom}. Changing it loads the pair, then runs again.",
        allow_custom_value=config.allow_custom,
        elem_id="pair",
    )
    c = {}
    for name in STACKED:
        c[name] = control(name)
    for row in ROWS:
        alone = sum(SPECS[n].kind in ("whole", "number") and not SPECS[n].box for n in row) == 1
        with gr.Row():
            for name in row:
                c[name] = control(name, min_width=100 if SPECS[name].box else 200 if alone else 160)
    with gr.Accordion("More settings", open=False, elem_id="more-settings"):
        for name in [n for n in SPECS if n not in c]:
            c[name] = control(name)
    if config.public:  # a public page runs its pairs on the runtime its operator chose (runner.check_runtime)
        c["runtime"].interactive = False
    hint("Releasing a slider runs the same prompt and seed again.")
    return pair, c


def control(name: str, **layout) -> gr.components.Component:
    """A setting's control, from its declaration: a radio, a checkbox, a text box, a number box or a slider."""
    s = SPECS[name]
    info = s.help if s.info is None else s.info or None
    common = {"value": getattr(DEFAULTS, name), "label": s.label, "info": info, "elem_id": name, **layout}
    if s.kind == "choice":
        return gr.Radio(s.registry.labelled(), **common)
    if s.kind == "flag":
        return gr.Checkbox(**common)
    if s.kind == "string":
        return gr.Textbox(lines=3, max_lines=12, max_length=int(s.limit.value), **common)
    whole = {"precision": 0} if s.kind == "whole" else {}
    if s.box:
        return gr.Number(minimum=s.span[0], **whole, **common)
    lo, hi = s.shown or s.span
    return gr.Slider(lo + s.step if s.open_low else lo, hi, step=s.step, **whole, **common)


def k_for_policy(policy: str, k: int | float) -> int:
    """k after the policy radio changes: the new policy's default when k was the old one's
    (16, a cap, is no fixed k to start from), else the k the user chose."""
    others = {default_k(p) for p in POLICIES.names if p != policy}
    return default_k(policy) if int(k) in others else int(k)


# The timeline's least wait between redraws while a run streams, its first one included.
PLOT_EVERY_S = 2.0


def plot_interval_s(trace: Trace) -> float:
    """How long the timeline waits between redraws while a run streams (it is always drawn at
    the end). Redrawing a plot of hundreds of rounds several times a second kept a browser so
    busy that the Stop click waited until the run had ended; the wait grows with the plot. On a
    small CPU the browser's redraws and the page's building of them take the cores from the run
    they show (docs/BENCHMARKS.md, "The page's own cost")."""
    return max(PLOT_EVERY_S, len(trace.events) / 150)


STOP_REASONS = {
    "eos": "the model ended its answer",
    "max_new_tokens": "it reached the max new tokens",
    "cancelled": "it was stopped",
    "time_limit": "it reached this page's time limit per run",
}


def run_state_html(trace: Trace, *, stopped: bool = False) -> str:
    """One line under the stream: running (rounds so far) or done (and why it stopped)."""
    reason = "cancelled" if stopped else trace.summary.stop_reason
    steps = "tokens" if trace.mode == PLAIN else "rounds"
    if reason:
        why = STOP_REASONS.get(reason, reason)
        return f'<div class="sv-run-state" data-state="done">Done after {len(trace.events)} {steps}: {esc(why)}.</div>'
    last = trace.events[-1] if trace.events else None
    note = last.policy_note if isinstance(last, RoundEvent) and last.policy_note != CHECK else ""
    plainly = f" Decoding plainly: {esc(viz.why_plain(last))}." if note else ""
    return (
        f'<div class="sv-run-state" data-state="running" data-policy-note="{esc(note)}">'
        f"Running: {len(trace.events)} {steps} so far\u2026{plainly}</div>"
    )


def live_views(trace: Trace, *, plot: bool = True, stopped: bool = False) -> tuple:
    """The stream (with its running / done line), the stats and, unless plot=False, the
    timeline and the latest round's tree or alignment (hidden when it has neither)."""
    events = trace.events
    stream = viz.tokens_html(events, empty="No tokens yet.") + run_state_html(trace, stopped=stopped)
    stats = viz.stats_html(viz.live_stats(events), trace.summary) + viz.speculation_note_html(trace)
    if not plot:
        return stream, stats, gr.skip(), gr.skip(), gr.skip()
    return (stream, stats, viz.round_timeline_figure(events), *latest_round_views(trace))


def latest_round_views(trace: Trace) -> tuple:
    """The latest round's tree (a gr.Plot update) and alignment (a gr.HTML update); only that
    round is drawn, however long the run. A round that drafted nothing (at the token limit)
    leaves the one before it shown."""
    last = next((e for e in reversed(trace.events) if isinstance(e, RoundEvent) and (e.tree or e.alignment)), None)
    tree = tree_figure(last, title=f"Latest round ({last.index}): its token tree") if last and last.tree else None
    return shown(gr.Plot, tree), alignment_view(last, trace.meta)


def stopped_views(trace: Trace | None) -> tuple:
    """After Stop: the stream as it stood, marked stopped (its plots are already drawn)."""
    if trace is None or trace.summary.stop_reason:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
    return live_views(trace, plot=False, stopped=True)


class LiveRuns:
    """The live run's handlers, bound to the page's limits and the tab's controls."""

    def __init__(self, config: PageConfig, ui: LiveTab | None = None):
        self.config = config
        self.ui = ui

    def run(
        self,
        prompt,
        pair,
        settings: GenerationSettings,
        request: gr.Request | None,
        progress: gr.Progress | None = None,
    ) -> Iterator[tuple]:
        """Run: yields (stream, stats, timeline, tree, alignment, trace) once per round."""
        prompt = check_prompt(prompt)
        shown, plotted_at = -1, None
        session = session_of(request)
        loading = runner.loading(progress, pair)
        for trace in runner.stream(
            pair, prompt, settings, session, self.config, remember=session != NO_SESSION, on_progress=loading
        ):
            # The finished trace repeats the last round's events: only the stats change then.
            now = time.monotonic()
            first = plotted_at is None
            if first:  # the timeline's wait counts from the run's first update, not from its load
                plotted_at = now
            plot = len(trace.events) != shown and (
                bool(trace.summary.stop_reason) or now - plotted_at >= plot_interval_s(trace)
            )
            views = live_views(trace, plot=plot)
            if first and not plot:  # the last run's timeline goes; this one's, one bar yet, comes later
                views = (*views[:2], None, *latest_round_views(trace))
            yield *views, trace
            if plot:
                shown, plotted_at = len(trace.events), now

    def rerun(
        self,
        prompt,
        pair,
        settings: GenerationSettings,
        request: gr.Request | None,
        progress: gr.Progress | None = None,
    ) -> Iterator[tuple]:
        """A setting changed or the pair changed: run again if there is a prompt, else only load."""
        if not (isinstance(prompt, str) and prompt.strip()):
            runner.load(pair, settings, self.config)
            yield gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return
        yield from self.run(prompt, pair, settings, request, progress)

    def handler(self, method: Callable) -> Callable:
        """`method` (run or rerun) as the page's handler: it takes the values of the tab's
        `inputs` (its signature says how many, so Gradio adds the request and the progress after
        them) and reads them once (`LiveTab.read`)."""
        n = len(self.ui.inputs)

        def handle(*args) -> Iterator[tuple]:
            prompt, pair, settings = self.ui.read(args[:n])
            yield from method(prompt, pair, settings, args[n], args[n + 1])

        P = inspect.Parameter
        handle.__signature__ = inspect.Signature(
            [
                *(P(f"input_{i}", P.POSITIONAL_ONLY) for i in range(n)),
                P("request", P.POSITIONAL_ONLY, annotation=gr.Request),
                P("progress", P.POSITIONAL_ONLY, default=gr.Progress()),
            ]
        )
        handle.__annotations__ = {"request": gr.Request}
        handle.__name__ = handle.__qualname__ = method.__name__
        return shown_errors(handle)


def controls_from(trace: Trace, config: PageConfig) -> tuple:
    """The live tab's inputs set to a replayed trace's prompt and settings, so Run reruns it.

    Trace.from_json has checked the settings; a pair the page does not offer, or a value
    beyond the reach of its slider (more tokens than the page's slider shows), is left as it was.
    """
    s = from_request(trace.settings)
    offered = config.allow_custom or trace.pair in {value for _, value in pair_choices(config)}
    values = [gr.skip() if beyond_slider(spec, getattr(s, name)) else getattr(s, name) for name, spec in SPECS.items()]
    return (trace.prompt, trace.pair if trace.pair and offered else gr.skip(), *values)


def beyond_slider(s: Setting, value) -> bool:
    return s.shown is not None and not s.shown[0] <= value <= s.shown[1]


class LivePage(Tab):
    """The run: settings, the coloured stream, its stats and timeline. Another tab shows a
    trace here through `views` and `controls_from` (traces: an upload)."""

    id, title = "live", "Live run"
    views = staticmethod(live_views)

    def build(self, shared: Shared) -> None:
        self.ui = LiveTab(shared.config)
        self.runs = LiveRuns(shared.config, self.ui)
        self.config = shared.config

    def controls_from(self, trace: Trace) -> tuple:
        """The tab's inputs set to `trace`'s prompt and settings (`controls_from`)."""
        return controls_from(trace, self.config)

    def wire(self, shared: Shared) -> None:
        """A new run first stops the session's current one (Stop and that step skip the queue);
        a load's progress shows on the stream only. Releasing a slider or changing the pair
        runs again."""
        ui, runs = self.ui, self.runs
        outputs = [*ui.outputs, shared.trace]
        running = {**MODELS, "show_progress_on": [ui.tokens], **PRIVATE}
        inputs = ui.inputs  # the prompt first: a refusal as the run joins the queue is shown there
        run = stops(ui.run.click).then(runs.handler(runs.run), inputs, outputs, **running)
        reruns = []
        for trigger in [*(slider.release for slider in ui.sliders), ui.pair.input]:
            event = stops(trigger)
            reruns.append(event.then(runs.handler(runs.rerun), inputs, outputs, trigger_mode="always_last", **running))
        for event in (run, *reruns):
            shared.then_refresh(event)
        ui.settings["policy"].input(
            k_for_policy, [ui.settings["policy"], ui.settings["k"]], [ui.settings["k"]], queue=False, **PRIVATE
        )
        stop = stops(ui.stop.click, [run, *reruns])
        shared.then_refresh(stop.then(stopped_views, [shared.trace], ui.outputs, **PRIVATE))
