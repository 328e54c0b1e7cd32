"""The Tournament tab, and its tool for programs (`parts.TABS`, `parts.TOOLS`): every drafter on
one text, the current run's (a run, or a trace uploaded in the Traces tab) or a prompt and an
answer pasted in, predicted on this machine's pass costs and on other machines'.

One handler computes the result dict (`report.to_dict`, the same the CLI prints with --json and
the tool returns) on the loaded pair, with a progress bar; choosing another curve redraws it
from that dict without running anything. The winner is one click from its export to vLLM,
SGLang or llama.cpp (`production.export`, through the report's `winner`).
"""

from __future__ import annotations

import json

import gradio as gr

from specviz.app import runner, zero_gpu
from specviz.app.shown_errors import shown_errors
from specviz.app.stopping import session_of
from specviz.app.page import STATE_TTL_S
from specviz.app.tab import MODELS, PRIVATE, Shared, Tab, chart, hint, muted
from specviz.errors import UserError
from specviz.events import Trace, load_trace
from specviz.limits import TOURNAMENT_CHARS
from specviz.models.catalogue.presets import DEFAULT_PAIR
from specviz.settings import PROMPT, check_prompt, from_request
from specviz.viz import tournament as draw
from specviz.viz.palette import empty_figure

GRANT_S = 120  # ZeroGPU seconds for one tournament: its passes over a 512-token answer, and the replays
HINT = muted(
    "Runs every drafter on the current run's text (or on a prompt and answer pasted below): one pass of each model "
    "over the text, then each drafter's rounds replayed at every k. The speeds are predictions from the pass costs."
)
EXPORTS = [("vLLM", "vllm"), ("SGLang", "sglang"), ("llama.cpp (llama-server)", "llamacpp")]


class TournamentTab:
    """The tab's components, each made where it is laid out, top to bottom."""

    def __init__(self):
        hint(
            "### Every drafter on the same text\nWhich drafter, at which k, would have been fastest on this text, here "
            "and on other machines? Each one's rounds follow exactly from one pass of its model over the text."
        )
        with gr.Accordion("Paste a prompt and an answer instead of the current run", open=False):
            self.prompt = gr.Textbox(label="Prompt", lines=3, max_length=PROMPT.chars.default)
            self.answer = gr.Textbox(
                label="Answer (from any engine; read through the pair's tokenizer)",
                lines=5,
                max_length=TOURNAMENT_CHARS.default,
            )
        self.run = gr.Button("Run the tournament", variant="primary", elem_id="tournament-run")
        self.curve = gr.Dropdown([draw.THIS_MACHINE], value=draw.THIS_MACHINE, label="Pass costs of", interactive=True)
        self.heatmap = chart("tournament-heatmap", empty_figure("run the tournament first", "Predicted speedup"))
        self.ranked = gr.HTML(HINT, elem_id="tournament-ranked")
        with gr.Row():
            self.export_format = gr.Radio(EXPORTS, value="vllm", label="Export the winner to")
            self.export = gr.Button("Export the winner", elem_id="tournament-export")
        self.exported = gr.Code(label="The winner, as the engine runs it", language="shell", interactive=False)
        self.text = gr.HTML(elem_id="tournament-text")
        with gr.Accordion("Where the figures are exact, and where each cost curve comes from", open=False):
            self.notes = gr.HTML(elem_id="tournament-notes")
            self.curves = gr.HTML(elem_id="tournament-curves")
        self.result = gr.State(None, time_to_live=STATE_TTL_S)  # a session's result, kept as its trace is

    @property
    def views(self) -> list:
        return [self.heatmap, self.ranked, self.text, self.notes, self.curves]


def views(d: dict | None, curve: str) -> tuple:
    """The tab's drawings of a result dict on one curve."""
    if d is None:
        return empty_figure("run the tournament first", "Predicted speedup"), HINT, "", "", ""
    curve = curve if any(c["name"] == curve for c in d["curves"]) else draw.THIS_MACHINE
    return (
        draw.heatmap(d, curve),
        draw.ranked_html(d, curve),
        draw.guessed_html(d),
        draw.notes_html(d),
        draw.curves_html(d),
    )


def _tournament(pair_name: str, session: str, trace: dict | None, prompt: str, answer: str, on_progress=None) -> dict:
    """The tournament on the loaded pair, as the result dict (workshop imported here: torch)."""
    from specviz.engine import model_lock
    from specviz.workshop.tournament import cli, report, run, text

    pair = runner.LOADER.wait(pair_name, with_draft=True)
    flag = runner.FLAGS.current(session)
    if trace is not None:
        trace_obj = Trace.from_dict(trace)
        t = text.from_trace(pair, trace_obj)
    else:
        trace_obj = None
        t = text.from_pasted(pair, check_prompt(prompt), answer, from_request({}))
    with model_lock.models(flag.is_set if flag else None):
        result = run.tournament(pair, t, progress=on_progress)
    return report.to_dict(result, texts=cli.token_texts(pair, t.answer_ids), trace=trace_obj)


TOURNAMENT = runner.runs_models(_tournament, duration=GRANT_S)


class Tournaments:
    def __init__(self, config):
        self.config = config

    @shown_errors
    def run(self, trace, pair_name, prompt, answer, request: gr.Request, progress=gr.Progress()) -> tuple:
        session = session_of(request)
        pasted = bool((answer or "").strip())
        if not pasted and trace is None:
            raise UserError("make a run in the Live run tab first, upload a trace, or paste a prompt and an answer")
        if pasted and not (prompt or "").strip():
            raise UserError("paste the prompt the answer was made for, as well as the answer")
        name = runner.check_pair(pair_name or (trace.pair if trace is not None else ""), self.config)
        flag = runner.FLAGS.begin(session)
        try:
            runner.LOADER.wait(
                name, with_draft=True, should_stop=flag.is_set, on_progress=runner.loading(progress, name)
            )
            follow = None if zero_gpu.ON_ZERO_GPU else (lambda f, m: progress(f, desc=m))
            d = TOURNAMENT(name, session, None if pasted else trace.to_dict(), prompt, answer or "", follow)
        finally:
            runner.FLAGS.finish(session, flag)
        names = [c["name"] for c in d["curves"]]
        return (*views(d, draw.THIS_MACHINE), gr.Dropdown(names, value=draw.THIS_MACHINE), d)


def export_winner(d: dict | None, fmt: str) -> str:
    if not d or not d.get("winner"):
        raise UserError("run the tournament first: its winner is what is exported")
    if fmt not in d["winner"]["formats"]:
        return f"# {d['winner'].get('note', 'nothing to export')}"
    out = d["winner"]["formats"][fmt]
    notes = "\n".join(f"# {n}" for n in out["notes"])
    return f"{out['text']}\n{notes}" if out["text"] else notes


def tournament(prompt: str = "", answer: str = "", trace: str = "", pair: str = DEFAULT_PAIR) -> str:
    """Every drafter on one text, from one pass of each model over it: each drafter's predicted
    tokens per second and speedup over plain decoding at every k (1 to 8) and under the
    cost-aware policy, on this machine's measured pass costs and on stored curves of other
    machines (each naming its source), with the oracles and the winner's export.

    Args:
        prompt: the prompt the answer was made for (with answer)
        answer: an answer made by any engine, read through the pair's tokenizer
        trace: instead of prompt and answer, a specviz trace (JSON), whose prompt and output are replayed
        pair: a model pair preset

    Returns:
        JSON: the text, per drafter and policy the predicted speeds on each curve, the ranked table,
        the oracles, the tokens each drafter would have guessed, the near ties, and the winner's export.
    """
    if not trace and not answer.strip():
        raise UserError("give a trace, or a prompt and an answer")
    loaded = load_trace(trace).to_dict() if trace else None
    runner.LOADER.wait(pair, with_draft=True)
    return json.dumps(TOURNAMENT(pair, "", loaded, prompt, answer, None))


tournament.runs_models = True  # waits for the models' slot (app/tools.py)


class TournamentPage(Tab):
    """Every drafter on the current run's text, predicted here and on other machines."""

    id, title = "tournament", "Tournament"

    def build(self, shared: Shared) -> None:
        self.ui = TournamentTab()

    def wire(self, shared: Shared) -> None:
        ui, t = self.ui, Tournaments(shared.config)
        pair = shared.built["live"].ui.pair
        ui.run.click(
            t.run, [shared.trace, pair, ui.prompt, ui.answer], [*ui.views, ui.curve, ui.result], **MODELS, **PRIVATE
        )
        ui.curve.change(views, [ui.result, ui.curve], ui.views, **PRIVATE)
        ui.export.click(shown_errors(export_winner), [ui.result, ui.export_format], ui.exported, **PRIVATE)
