"""The whole page: a header with the model status, seven tabs, and the events between them.

Each tab's layout and handlers live in their own module; this file puts them together and
wires what crosses tabs: the session's current trace (set by a run or an upload) refreshes
the inspector, the comparison, the theory marks and the download.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from specviz.app import compare, inspector, labs_tab, live, lossless_tab, production, runner, theory_tab, tools, traces
from specviz.app.config import PageConfig
from specviz.app.loading import LoadState
from specviz.app.shown_errors import shown_errors
from specviz.events import Trace
from specviz.settings import DEFAULTS, check_prompt, from_request
from specviz.viz.text import esc

ASSETS = Path(__file__).resolve().parents[2] / "assets"
CSS_PATHS = [ASSETS / "specviz.css", ASSETS / "app.css"]
MODELS = {"concurrency_id": "models", "concurrency_limit": 1}  # everything that runs a model: one at a time


def status_html(name: str, state: LoadState | None) -> str:
    """The header's model status: a progress bar while loading, then ready or the error."""
    if state is None:
        return f'<div class="sv-load sv-load-idle">Model pair <b>{esc(name)}</b> loads when you press Run.</div>'
    if state.error is not None:
        return f'<div class="sv-load sv-load-error" role="alert"><b>{esc(name)}</b> could not load: {esc(state.error)}</div>'
    if state.ready:
        return (f'<div class="sv-load sv-load-ready">Model pair <b>{esc(name)}</b> is ready{precision_html(state.pair)}.'
                f'{vocab_html(state.pair)}{runtime_html(state.pair)}{cache_html()}</div>')
    pct = round(100 * state.fraction)
    waited = time.monotonic() - state.started
    return (
        f'<div class="sv-load sv-load-busy" role="status">Loading <b>{esc(name)}</b>: {esc(state.message)} '
        f'({pct}%, {waited:.0f} s){cache_html()}<div class="sv-load-bar"><div style="width:{pct}%"></div></div></div>'
    )


def runtime_html(pair) -> str:
    """Which runtime runs the pair and why, each runtime's measured rates (plain, and drafting
    at its best k for a typical acceptance), a background timing of another runtime and what
    it found, and a plain warning when some runtime's plain decoding beats drafting everywhere
    (engine.runtime_choice, engine.runtime_prepare)."""
    from specviz.engine import runtime_choice, runtime_prepare

    c = (getattr(pair, "info", None) or {}).get("runtime_choice")
    if not isinstance(c, dict):
        return ""
    spec = c.get("spec")
    # Read again: a background timing may have recorded another runtime since the load.
    rates = (runtime_choice.recorded(spec) if spec else None) or c.get("rates") or {}
    measured = "; ".join(f"{esc(r)}: plain {v['plain']:.1f} tok/s, drafting {v['speculative']:.1f} (k={v['k']})"
                         for r, v in sorted(rates.items()) if isinstance(v, dict))
    out = f' <span class="sv-runtime">Runtime <b>{esc(c.get("runtime", ""))}</b> ({esc(c.get("reason", ""))})'
    out += f"; measured here: {measured}." if measured else "."
    for prep in runtime_prepare.preparations(spec) if spec else []:
        if prep.runtime in (c.get("preparing") or []):
            out += f' <span class="sv-runtime-prep">{esc(preparation_sentence(prep, pair))}.</span>'
    note = runtime_choice.plain_beats_drafting(rates)
    if note:
        out += f' <b class="sv-runtime-note">Note: {esc(note)}.</b>'
    return out + "</span>"


def preparation_sentence(prep, pair) -> str:
    from specviz.engine.runtime_prepare import switch_to

    if prep.state == "running":
        return (f"{prep.runtime} is being prepared and timed in the background, at low priority (the first time, "
                "converting the GGUF files takes minutes)")
    if prep.state == "failed":
        return f"{prep.runtime} could not be prepared: {prep.last_line() or 'see ' + str(prep.log)}"
    if switch_to(pair) == prep.runtime:
        return f"{prep.runtime}, timed in the background, drafts faster here: the next run loads the pair on it"
    return f"{prep.runtime}, timed in the background, drafts no faster here: the pair stays on {pair.runtime}"


def preparing(pair_name: str) -> bool:
    from specviz.engine.runtime_prepare import preparations

    return any(p.state == "running" for p in preparations(pair_name))


def cache_html() -> str:
    """Where converted models and measurements are kept, and why there."""
    from specviz.models.cache import where

    folder, why = where()
    return f' <span class="sv-cache">Cache: <code>{esc(str(folder))}</code> ({esc(why)}).</span>'


def precision_html(pair) -> str:
    """": target in bf16 (measured faster), draft in int8 (the default on a CPU)", the
    measured figures as a tooltip; empty for a pair that does not say."""
    p = (getattr(pair, "info", None) or {}).get("precision")
    if not isinstance(p, dict) or "target" not in p:
        return ""
    reason = str(p.get("reason") or "")
    parts = [f'<span title="{esc(reason)}">target in {esc(p["target"])} ({esc(reason.split(" (")[0])})</span>']
    if p.get("draft"):
        parts.append(f'draft in {esc(p["draft"])} ({esc(p.get("draft_reason") or "")})')
    return ": " + ", ".join(parts)


VOCAB_METHOD_WORDS = {"text": "drafts through text", "intersection": "drafts through the shared vocabulary"}


def vocab_html(pair) -> str:
    """For a draft with its own tokenizer: the vocabulary overlap and the method, with the
    check's message as a tooltip; empty when both share one tokenizer."""
    vocab = (getattr(pair, "info", None) or {}).get("vocab")
    if not isinstance(vocab, dict) or vocab.get("method") not in VOCAB_METHOD_WORDS:
        return ""
    overlap = vocab.get("overlap")
    share = f"{overlap:.1%} of the target's vocabulary matches the draft's" if isinstance(overlap, (int, float)) else "vocabularies differ"
    return (f' <span class="sv-vocab" title="{esc(vocab.get("message") or vocab.get("reason") or "")}">Its draft has another tokenizer: '
            f'{esc(share)}; by default it {esc(VOCAB_METHOD_WORDS[vocab["method"]])} ({esc(vocab["method"])}).</span>')


def model_status(pair: str) -> tuple[str, gr.Timer]:
    """The status, and whether to keep polling: until the pair has loaded or failed and no
    background timing of another runtime is running (a Run or a pair change polls again)."""
    state = runner.LOADER.status(pair)
    return status_html(pair, state), gr.Timer(active=state is None or not state.done.is_set() or preparing(pair))


@dataclass
class _Refresh:
    """What a new current trace redraws outside the live tab (each figure once)."""

    ins: inspector.InspectorTab
    cmp: compare.CompareTab
    th: theory_tab.TheoryTab
    tr: traces.TracesTab
    plain: gr.State
    lb: labs_tab.LabsTab

    @property
    def outputs(self) -> list:
        return [*self.ins.outputs, self.plain, *self.cmp.outputs, *self.th.outputs, self.tr.download, self.tr.summary,
                *self.lb.outputs]

    @staticmethod
    def views(trace: Trace | None, alpha, k, target_ms, draft_ms) -> tuple:
        """The new trace has no plain run to compare with yet."""
        return (*inspector.inspect(trace, inspector.first_drafted(trace)), None, *compare.views(trace, None),
                *theory_tab.views(alpha, k, target_ms, draft_ms, trace, None),
                traces.save_for_download(trace), traces.summary_html(trace), *labs_tab.views(trace))


def build_page(config: PageConfig) -> gr.Blocks:
    runs = live.LiveRuns(config)
    comparisons = compare.Comparisons(config)
    with gr.Blocks(title="specviz: speculative decoding, made visible") as demo:
        trace = gr.State(None)  # the session's current trace: the last run, or an uploaded one
        plain = gr.State(None)  # plain decoding of the same prompt and settings, for side by side
        with gr.Row(elem_id="sv-header", equal_height=True):
            gr.HTML('<div class="sv-title"><h1>specviz</h1><p>Speculative decoding on real models, made visible: a small '
                    'model drafts k tokens, the large one checks them all in one pass.</p></div>', min_width=300, scale=3)
            status = gr.HTML(status_html(config.default_pair, runner.LOADER.status(config.default_pair)), elem_id="model-status",
                             min_width=280, scale=2)
        timer = gr.Timer(1.0, active=True)
        with gr.Tabs(elem_id="tabs") as tabs:
            with gr.Tab("Live run", id="live", elem_id="tab-live"):
                lv = live.build(config)
                ex = production.build_export()
            with gr.Tab("Round inspector", id="inspector", elem_id="tab-inspector"):
                ins = inspector.build(live.TOKEN_CLICK_JS)
            with gr.Tab("Side by side", id="compare", elem_id="tab-compare"):
                cmp = compare.build()
            with gr.Tab("Theory", id="theory", elem_id="tab-theory"):
                th = theory_tab.build()
            with gr.Tab("Lossless lab", id="lossless", elem_id="tab-lossless"):
                ll = lossless_tab.build()
            with gr.Tab("Labs", id="labs", elem_id="tab-labs"):
                lb = labs_tab.build()
                pm = production.build_metrics()
            with gr.Tab("Traces", id="traces", elem_id="tab-traces"):
                tr = traces.build()
        refresh = _Refresh(ins, cmp, th, tr, plain, lb)
        labs_tab.wire(lb, trace, lv.pair, config)
        refresh_inputs = [trace, *th.sliders]

        production.wire(ex, pm, trace)

        def then_refresh(event):
            event = event.then(refresh.views, refresh_inputs, refresh.outputs, api_visibility="private")
            return event.then(production.export_views, [trace, ex.format], ex.outputs, api_visibility="private")

        # The model status polls while a load is under way, and again after the pair changes.
        timer.tick(model_status, [lv.pair], [status, timer], queue=False, show_progress="hidden", api_visibility="private")
        demo.load(model_status, [lv.pair], [status, timer], queue=False, show_progress="hidden", api_visibility="private")
        demo.load(theory_tab.views, [*th.sliders, trace, plain], th.outputs, api_visibility="private")

        # Live run. Every model run shares one concurrency slot; a new run first stops the
        # session's current one (Stop and that step skip the queue). A load's progress bar
        # shows on the stream only; the header's status polls while it loads.
        run_outputs = [*lv.outputs, trace]
        live_run = {**MODELS, "show_progress_on": [lv.tokens], "api_visibility": "private"}
        run_event = lv.run.click(runs.stop, None, None, queue=False, api_visibility="private").then(
            runs.run, lv.inputs, run_outputs, **live_run)
        then_refresh(run_event)
        reruns = []
        for trigger in [*(slider.release for slider in lv.sliders), lv.pair.input]:
            ev = trigger(runs.stop, None, None, queue=False, api_visibility="private")
            reruns.append(ev.then(runs.rerun, lv.inputs, run_outputs, trigger_mode="always_last", **live_run))
        for trigger in (lv.run.click, lv.pair.input):
            trigger(lambda: gr.Timer(active=True), None, [timer], queue=False, api_visibility="private")
        lv.settings["policy"].input(live.k_for_policy, [lv.settings["policy"], lv.settings["k"]], [lv.settings["k"]], queue=False, api_visibility="private")
        for ev in reruns:
            then_refresh(ev)
        stop = lv.stop.click(runs.stop, None, None, queue=False, cancels=[run_event, *reruns], api_visibility="private")
        then_refresh(stop.then(live.stopped_views, [trace], lv.outputs, api_visibility="private"))

        # Round inspector: step, pick a position, or click a token in either stream.
        ins.round.release(inspector.inspect, [trace, ins.round], ins.outputs, api_visibility="private")
        ins.prev.click(lambda t, r: inspector.step(t, r, -1), [trace, ins.round], ins.outputs, api_visibility="private")
        ins.next.click(lambda t, r: inspector.step(t, r, +1), [trace, ins.round], ins.outputs, api_visibility="private")
        ins.position.input(inspector.bars, [trace, ins.round, ins.position], [ins.bars], api_visibility="private")
        ins.tokens.click(inspector.clicked, [trace], ins.outputs, api_visibility="private")
        lv.tokens.click(inspector.clicked, [trace], ins.outputs, api_visibility="private").then(
            lambda: gr.Tabs(selected="inspector"), None, [tabs], api_visibility="private")

        # Side by side: plain decoding of the same run, then the race replay at measured speed.
        compare_run = cmp.run.click(comparisons.run, [trace], [plain, *cmp.outputs], **MODELS,
                                    api_visibility="private")
        compare_run.success(theory_tab.views, [*th.sliders, trace, plain], th.outputs, api_visibility="private")
        replay = cmp.replay.click(comparisons.replay, [trace, plain, cmp.speed], [cmp.spec_column, cmp.plain_column],
                                  concurrency_limit=None, show_progress="hidden", api_visibility="private")
        cmp.stop.click(runs.stop, None, None, queue=False, cancels=[compare_run, replay], api_visibility="private")

        # Theory: each slider redraws on release; the last run's numbers can fill them.
        for slider in th.sliders:
            slider.release(theory_tab.views, [*th.sliders, trace, plain], th.outputs, api_visibility="private")
        th.use_run.click(theory_tab.from_run, [trace, plain], th.sliders, api_visibility="private").then(
            theory_tab.views, [*th.sliders, trace, plain], th.outputs, api_visibility="private")

        # Lossless lab.
        ll.run.click(lossless_tab.simulate, ll.inputs, ll.outputs, concurrency_id="lossless", concurrency_limit=1,
                     api_visibility="private")
        ll.run_position.click(lossless_tab.simulate_position, [trace, ins.round, ins.position, ll.samples, ll.seed],
                              ll.position_outputs, concurrency_id="lossless", concurrency_limit=1, api_visibility="private")

        # Traces: an upload replaces the current trace and redraws everything from it.
        upload = tr.upload.upload(traces.read_upload, [tr.upload], [trace], api_visibility="private")
        upload = upload.success(live.live_views, [trace], lv.outputs, api_visibility="private")
        upload = upload.then(lambda t: live.controls_from(t, config), [trace], lv.inputs, api_visibility="private")
        then_refresh(upload)

        gr.api(generate_api(config), api_name="generate", **MODELS)
        tools.register(config, MODELS)
        # Callable, but not among the documented endpoints; no limit, so it answers while a run goes on.
        gr.api(status_api(config), api_name="status", concurrency_limit=None, api_visibility="undocumented")
    return demo


def status_api(config: PageConfig):
    """The `status` endpoint: a pair's load as JSON, for deployment checks and monitoring."""

    def status(pair: str = "") -> str:
        """The load of `pair` ("": the page's pair) as JSON: state (idle, loading, ready or
        error), fraction, message, error, seconds since it started, the cache folder, and once
        ready the runtime, why, and any background timing of another runtime with its state.
        Clients pass `pair` always: an undocumented endpoint's defaults are not published."""
        from specviz.models.cache import where

        pair = pair.strip() or config.default_pair
        state = runner.LOADER.status(pair)
        folder, why = where()
        out = {"pair": pair, "state": "idle", "fraction": 0.0, "message": "", "error": None, "seconds": None,
               "cache": str(folder), "cache_reason": why}
        if state is not None:
            out.update(state="error" if state.error is not None else "ready" if state.ready else "loading",
                       fraction=state.fraction, message=state.message, error=state.error,
                       seconds=round(time.monotonic() - state.started, 1))
            choice = (getattr(state.pair, "info", None) or {}).get("runtime_choice") if state.ready else None
            if isinstance(choice, dict):
                from specviz.engine.runtime_prepare import preparations

                out.update(runtime=choice.get("runtime"), runtime_reason=choice.get("reason"),
                           preparing={p.runtime: p.state for p in preparations(pair)})
        return json.dumps(out)

    return status


def generate_api(config: PageConfig):
    """The `generate` endpoint for gradio_client: streams the trace so far as JSON. Its
    defaults are GenerationSettings', k the policy's (`settings.default_k`); `adaptive=True`
    is the older spelling of `policy="cost-aware"`."""
    d = DEFAULTS

    def generate(
        prompt: str,
        pair: str = config.default_pair,
        drafter: str = d.drafter,
        k: int | None = None,
        temperature: float = d.temperature,
        top_p: float = d.top_p,
        max_new_tokens: int = d.max_new_tokens,
        seed: int = d.seed,
        mode: str = d.mode,
        adaptive: bool | None = None,
        top_k: int = d.top_k,
        policy: str | None = None,
        raw: bool = d.raw,
        early_exit_layers: int = d.early_exit_layers,
        adaptive_threshold: float = d.adaptive_threshold,
        tree_nodes: int = d.tree_nodes,
        tree_width: int = d.tree_width,
        vocab_method: str = d.vocab_method,
        runtime: str = d.runtime,
        suffix_max_nodes: int = d.suffix_max_nodes,
        suffix_min_score: float = d.suffix_min_score,
        lookahead_window: int = d.lookahead_window,
        lookahead_ngram: int = d.lookahead_ngram,
        lookahead_candidates: int = d.lookahead_candidates,
        request: gr.Request = None,
    ) -> Iterator[str]:
        """Run speculative (or plain) decoding. Each message is the run's trace so far as JSON
        (the schema of `python -m specviz generate --json`), one per round (at most five a
        second); the last is the finished trace."""
        values = dict(drafter=drafter, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed,
                      mode=mode, top_k=top_k, raw=raw, early_exit_layers=early_exit_layers, adaptive_threshold=adaptive_threshold,
                      tree_nodes=tree_nodes, tree_width=tree_width, vocab_method=vocab_method, runtime=runtime,
                      suffix_max_nodes=suffix_max_nodes, suffix_min_score=suffix_min_score, lookahead_window=lookahead_window,
                      lookahead_ngram=lookahead_ngram, lookahead_candidates=lookahead_candidates)
        if policy is not None:
            values["policy"] = policy
        if k is not None:  # else the policy's default k
            values["k"] = k
        if adaptive:
            values["adaptive"] = True
        settings = from_request(values)
        prompt = check_prompt(prompt)
        for trace in runner.stream(pair, prompt, settings, live.session_of(request), config):
            yield trace.to_json()

    return shown_errors(generate, html=False)
