"""The whole page: a header with the model status, the tabs of `parts.TABS` with the panels of
`parts.PANELS`, and the API.

Each tab's and panel's layout, handlers and wiring live in its own module (`app/tab.py`: the
protocol), named in `parts.py`; this file builds them in order, and whenever the session's
current trace changes (a run, a stop, an upload) redraws every tab and panel that shows it.
"""

from __future__ import annotations

import inspect
import json
import time
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from specviz.app import compare, declared, live, parts, runner, server_details, tools, visitors, zero_gpu
from specviz.app.background import reads_only_the_result, unread, while_read
from specviz.app.config import PageConfig
from specviz.app.loading import LoadState
from specviz.app.shown_errors import DETAILS, hide_details, redact, shown_errors
from specviz.app.stopping import session_of
from specviz.app.tab import LIGHT, MODELS, PRIVATE, Panel, Shared, Tab
from specviz.engine import runtime_prepare
from specviz.errors import UserError
from specviz.events import Trace
from specviz.lazy import named
from specviz.limits import PAIR_CHARS
from specviz.models.files.cache import where
from specviz.settings import DEFAULTS, FIELDS, GenerationSettings, check_prompt, from_request
from specviz.viz import pair_status

ASSETS = Path(__file__).resolve().parents[2] / "assets"
CSS_PATHS = [ASSETS / "specviz.css", ASSETS / "app.css"]


def status_html(name: str, state: LoadState | None) -> str:
    """The header's model status: a progress bar while loading, then ready or the error."""
    name = redact(name)
    if state is None:
        return pair_status.idle_html(name)
    if state.error is not None:
        return pair_status.error_html(name, redact(state.error))
    if state.ready:
        pair = state.pair
        details = pair_status.vocab_html(pair.info.get("vocab")) + runtime_html(name, pair) + head_html(pair)
        return pair_status.ready_html(name, pair_status.precision_html(pair.precision_choice), details + cache_html())
    waited = time.monotonic() - state.started
    return pair_status.loading_html(name, state.message, state.fraction, waited, cache_html())


def runtime_html(name: str, pair) -> str:
    """The runtime, why, what each runtime measured here and the note (`runtime_facts`), with a
    sentence for each background timing of another runtime that the pair's load started."""
    facts = runtime_facts(name, pair)
    if facts is None:
        return ""
    started = pair.runtime_choice.preparing
    sentences = [preparation_sentence(p, pair) for p in facts.preparations if p.runtime in started]
    return pair_status.runtime_html(facts.runtime, facts.reason, facts.rates, sentences, facts.note, try_edit_work())


def head_html(pair) -> str:
    """The target's trained draft head, where there is one (drafters.head)."""
    from specviz.drafters.head import draft_ms, head_for, head_path, target_label

    if not head_path(target_label(pair)).is_file():
        return ""
    try:
        _, info = head_for(pair)
        d = draft_ms(pair)
    except (UserError, ValueError, OSError) as e:
        return pair_status.head_unreadable_html(redact(str(e)))
    return pair_status.head_html(info.acceptance, d, pair.cost_model.target if pair.cost_model else None)


def try_edit_work() -> str:
    """How to see the suffix drafter win: what an edit example sets, then Side by side."""
    s = live.EXAMPLE_SETTINGS[live.EDIT]
    return (
        f"To see it, click an Edit example under the prompt (it picks the {s.drafter} drafter, the {s.policy} "
        f"policy and {s.max_new_tokens} new tokens), press Run, then race it against plain decoding on "
        f"{compare.ComparePage.title}."
    )


@dataclass(frozen=True)
class RuntimeFacts:
    """What runs a loaded pair and what the runtimes measured here: the status API returns
    them (`api`), the header draws them (`runtime_html`)."""

    runtime: str
    reason: str
    rates: dict  # each runtime's measured rates: plain, and drafting at its best k
    note: str | None  # where some runtime's plain decoding beats every drafting run
    preparations: list  # each background timing of another runtime for the pair (engine.runtime_prepare)

    def api(self) -> dict:
        return {
            "runtime": self.runtime,
            "runtime_reason": self.reason,
            "rates": server_details.plain_rates(self.rates),
            "note": self.note,
            "preparing": {p.runtime: p.state for p in self.preparations},
        }


def runtime_facts(name: str, pair) -> RuntimeFacts | None:
    """The facts for `pair`, loaded as `name` (costs.runtime_choice); None for a pair that does
    not say. The rates are read again: a background timing may have recorded another runtime
    since the load."""
    from specviz.costs import runtime_choice

    c = pair.runtime_choice
    if c is None:
        return None
    rates = (runtime_choice.recorded(c.spec) if c.spec else None) or c.rates
    return RuntimeFacts(
        pair.runtime, c.reason, rates, runtime_choice.plain_beats_drafting(rates), runtime_prepare.preparations(name)
    )


def preparation_sentence(prep, pair) -> str:
    if prep.state == "running":
        return (
            f"{prep.runtime} is being prepared and timed in the background, at low priority (the first time, "
            "converting the GGUF files takes minutes)"
        )
    if prep.state == "failed":
        if server_details.hidden():  # its log's lines and path stay on the server
            return f"{prep.runtime} could not be prepared here"
        return f"{prep.runtime} could not be prepared: {prep.last_line() or 'see ' + str(prep.log)}"
    if runtime_prepare.switch_to(pair) == prep.runtime:
        return f"{prep.runtime}, timed in the background, drafts faster here: the next run loads the pair on it"
    return f"{prep.runtime}, timed in the background, drafts no faster here: the pair stays on {pair.runtime}"


def preparing(pair_name: str) -> bool:
    return any(p.state == "running" for p in runtime_prepare.preparations(pair_name))


def cache_html() -> str:
    """Where converted models and measurements are kept; a public page names no server folders."""
    if not DETAILS["shown"]:
        return ""
    folder, why = where()
    return pair_status.cache_html(str(folder), why)


def model_status(pair: str) -> tuple[str, gr.Timer]:
    """The status, and whether to keep polling: until the pair has loaded or failed and no
    background timing of another runtime is running (a Run or a pair change polls again)."""
    if not isinstance(pair, str) or len(pair) > PAIR_CHARS.value:
        return status_html("(that pair)", None), gr.Timer(active=False)
    state = runner.LOADER.status(pair)
    return status_html(pair, state), gr.Timer(active=state is None or not state.done.is_set() or preparing(pair))


# A session's traces are dropped this long after their last update (a tab left open for days
# holds no run); Gradio drops them at once when the tab closes.
STATE_TTL_S = 3 * 3600
# Every half hour, the files Gradio keeps for this page (uploads, downloads) older than an hour go.
DELETE_CACHE = (1800, 3600)
# How often the queue looks for work while it has none to start: a queued request waits at most this long.
QUEUE_POLL_S = 0.01


def build_page(config: PageConfig) -> gr.Blocks:
    hide_details(config.public)  # before the header's first status is drawn into the page's config
    with gr.Blocks(title="specviz: speculative decoding, made visible", delete_cache=DELETE_CACHE) as demo:
        status, timer = _header(config)
        trace, plain = gr.State(None, time_to_live=STATE_TTL_S), gr.State(None, time_to_live=STATE_TTL_S)
        with gr.Tabs(elem_id="tabs") as tabs:
            shared = Shared(config, trace, plain, tabs, demo)
            for name in parts.TABS:
                _build_tab(named(name)(), shared)
        shared.then_refresh = _refresher(shared)
        for part in _parts(shared):
            part.wire(shared)
        _wire_status(demo, shared, status, timer)
        gr.api(generate_api(config), api_name="generate", **MODELS)
        tools.register(config, MODELS)
        # Callable, but not among the documented endpoints; no limit, so it answers while a run goes on.
        gr.api(
            shown_errors(status_api(config), html=False),
            api_name="status",
            concurrency_limit=None,
            api_visibility="undocumented",
        )
    one_queue(demo)
    declared.guard(demo)  # every endpoint's declared types, checked as a request joins the queue
    return demo


def _build_tab(tab: Tab, shared: Shared) -> None:
    """`tab` built inside its own gr.Tab, then the panels added to it, in order."""
    with gr.Tab(tab.title, id=tab.id, elem_id=f"tab-{tab.id}"):
        tab.build(shared)
        tab.panels = [named(name)() for name in parts.PANELS.get(tab.id, ())]
        for panel in tab.panels:
            panel.build(shared)
    shared.built[tab.id] = tab


def _parts(shared: Shared) -> list[Panel]:
    """Every tab and panel built, in the page's order: each tab, then its panels."""
    return [p for tab in shared.built.values() for p in (tab, *tab.panels)]


def queue(demo: gr.Blocks, config: PageConfig) -> gr.Blocks:
    """The page's one queue: no endpoint answers outside it (`api_open=False`), at most
    `queue_size` requests wait, and each visitor has its share of the models (`visitors`)."""
    demo.queue(api_open=False, default_concurrency_limit=LIGHT["concurrency_limit"], max_size=config.queue_size)
    # Gradio looks for work every millisecond while its queue is empty or its slots are full:
    # a few percent of a core on an idle page, and the event loop's thread waking beside every run.
    demo._queue.sleep_when_free = max(demo._queue.sleep_when_free, QUEUE_POLL_S)
    visitors.guard(demo, config)
    declared.guard_events(demo)  # a page event's inputs, by its components, before the visitor's share is counted
    return demo


def one_queue(demo: gr.Blocks) -> None:
    """Every queued handler that names no slot of its own shares the LIGHT slots (Gradio's
    default gives each handler its own); the race replay, which named none, too. The few
    handlers outside the queue only stop a run, poll the status or set a widget."""
    for fn in demo.fns.values():
        if fn.queue and (fn.concurrency_limit == "default" or fn.name == "replay"):
            fn.concurrency_id, fn.concurrency_limit = LIGHT["concurrency_id"], LIGHT["concurrency_limit"]


def _header(config: PageConfig) -> tuple[gr.HTML, gr.Timer]:
    with gr.Row(elem_id="sv-header", equal_height=True):
        gr.HTML(
            '<div class="sv-title"><h1>specviz</h1><p>Speculative decoding on real models, made visible: a small '
            "model drafts k tokens, the large one checks them all in one pass.</p></div>",
            min_width=300,
            scale=3,
        )
        status = gr.HTML(
            status_html(config.default_pair, runner.LOADER.status(config.default_pair)),
            elem_id="model-status",
            min_width=280,
            scale=2,
        )
    return status, gr.Timer(1.0, active=True)


def _refresher(shared: Shared):
    """`then_refresh(event)`: after `event`, every tab and panel with a redraw redraws from the
    current trace. Those that read only the trace redraw first, in one update (each figure drawn
    once); those that also read a widget (the export format, the theory sliders) redraw after
    them, so a widget changed while the figures were drawn is read as it is then, not as it was."""
    tabs = [t for t in _parts(shared) if t.redraw_outputs]
    steps = [
        _redraw_step([t for t in tabs if not t.redraw_inputs], shared),
        _redraw_step([t for t in tabs if t.redraw_inputs], shared),
    ]

    def then_refresh(event):
        for fn, inputs, outputs in steps:
            if outputs:
                event = event.then(fn, inputs, outputs, **PRIVATE)
        return event

    return then_refresh


def _redraw_step(tabs: list[Panel], shared: Shared) -> tuple:
    inputs = [shared.trace, *(c for t in tabs for c in t.redraw_inputs)]
    outputs = [c for t in tabs for c in t.redraw_outputs]

    def redraw(trace: Trace | None, *values) -> tuple:
        out, i = [], 0
        for t in tabs:
            n = len(t.redraw_inputs)
            out += t.redraw(trace, *values[i : i + n])
            i += n
        return tuple(out)

    return redraw, inputs, outputs


def _wire_status(demo: gr.Blocks, shared: Shared, status: gr.HTML, timer: gr.Timer) -> None:
    """The model status polls while a load is under way, and again after a run or a pair change."""
    pair = shared.built["live"].ui.pair
    quiet = {"queue": False, "show_progress": "hidden", **PRIVATE}
    timer.tick(model_status, [pair], [status, timer], **quiet)
    demo.load(model_status, [pair], [status, timer], **quiet)
    for trigger in (shared.built["live"].ui.run.click, pair.input):
        trigger(lambda: gr.Timer(active=True), None, [timer], queue=False, **PRIVATE)


def status_api(config: PageConfig):
    """The `status` endpoint: a pair's load as JSON, for deployment checks and monitoring."""

    def status(pair: str = "") -> str:
        """The load of `pair` ("": the page's pair) as JSON: state (idle, loading, ready or
        error), fraction, message, error, seconds since it started, the cache folder, and once
        ready the runtime, why, each runtime's measured rates (plain, and drafting at its best
        k), the note the status line shows when plain decoding beats every drafting run, and any
        background timing of another runtime with its state.
        Clients pass `pair` always: an undocumented endpoint's defaults are not published."""
        pair = PAIR_CHARS.check_text(pair.strip()) or config.default_pair
        state = runner.LOADER.status(pair)
        folder, why = where() if DETAILS["shown"] else ("", "a public page names no server folders")
        out = {
            "pair": redact(pair),
            "state": "idle",
            "fraction": 0.0,
            "message": "",
            "error": None,
            "seconds": None,
            "cache": str(folder),
            "cache_reason": why,
            "zero_gpu": zero_gpu_status(config, pair),
        }
        if state is not None:
            out.update(
                state="error" if state.error is not None else "ready" if state.ready else "loading",
                fraction=state.fraction,
                message=state.message,
                error=None if state.error is None else redact(state.error),
                seconds=round(time.monotonic() - state.started, 1),
            )
            facts = runtime_facts(pair, state.pair) if state.ready else None
            if facts is not None:
                out.update(facts.api())
        return json.dumps(out)

    return status


def zero_gpu_status(config: PageConfig, pair: str) -> dict | None:
    """On ZeroGPU, the seconds a run of 16, 128 and 512 new tokens would ask for now; else None."""
    if not zero_gpu.ON_ZERO_GPU:
        return None
    grants = zero_gpu.grants(lambda n: runner.run_wall_s(config, GenerationSettings(max_new_tokens=n), pair))
    return {"grant_s": {str(n): grant for n, grant in grants.items()}, "s_per_token": zero_gpu.RATES.s_per_token(pair)}


# The API's first parameters after the prompt and the pair, in the order gradio_client callers
# pass them positionally (docs/API.md); every other GenerationSettings field follows in its
# declared order. `adaptive` is the older spelling of policy="cost-aware".
API_LEAD = ("drafter", "k", "temperature", "top_p", "max_new_tokens", "seed", "mode", "adaptive", "top_k", "policy")
# None: the policy's default k; no policy given (with `adaptive` for the older callers).
API_NONE = {"k": int, "policy": str, "adaptive": bool}


def api_signature(config: PageConfig) -> inspect.Signature:
    """generate's signature: the prompt, the pair, then every setting with its default."""
    P = inspect.Parameter
    types = typing.get_type_hints(GenerationSettings)
    names = [*API_LEAD, *(f for f in FIELDS if f not in API_LEAD)]
    params = [
        P("prompt", P.POSITIONAL_OR_KEYWORD, annotation=str),
        P("pair", P.POSITIONAL_OR_KEYWORD, default=config.default_pair, annotation=str),
    ]
    for name in names:
        if name in API_NONE:
            params.append(P(name, P.POSITIONAL_OR_KEYWORD, default=None, annotation=API_NONE[name] | None))
        else:
            params.append(P(name, P.POSITIONAL_OR_KEYWORD, default=getattr(DEFAULTS, name), annotation=types[name]))
    params.append(P("request", P.POSITIONAL_OR_KEYWORD, default=None, annotation=gr.Request))
    return inspect.Signature(params, return_annotation=Iterator[str])


def generate_api(config: PageConfig):
    """The `generate` endpoint for gradio_client: streams the trace so far as JSON. Its
    parameters are `api_signature`'s; k defaults to the policy's (`settings.default_k`)."""
    signature = api_signature(config)

    def generate(*args, **kwargs) -> Iterator[str]:
        """Run speculative (or plain) decoding. Each message is the run's trace so far as JSON
        (the schema of `python -m specviz generate --json`), one per round (at most five a
        second, down to one a second as the trace grows, fewer to a caller that reads slower);
        the last is the finished trace."""
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        prompt, pair, request = values.pop("prompt"), values.pop("pair"), values.pop("request")
        values = {name: v for name, v in values.items() if not (name in API_NONE and v is None)}
        settings = from_request(values)
        prompt = check_prompt(prompt)
        # What waits for the caller is one trace, never every one: a /call job read late gets the
        # newest, an MCP call the last alone; a job nobody reads is stopped.
        updates = runner.stream(pair, prompt, settings, session_of(request), config)
        for trace in while_read(updates, unread(request), only_last=reads_only_the_result(request)):
            yield trace.to_json()

    generate.__signature__ = signature
    generate.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()} | {"return": Iterator[str]}
    return shown_errors(generate, html=False)
