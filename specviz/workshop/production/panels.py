"""From the page to production: the Live run tab's "Use these settings elsewhere" panel (the
run's pair, drafter and best k as each engine's command), the Labs tab's "Production metrics"
section (an engine's own counts read back, drawn as a run's are, and judged), and the same two
as tools for programs (`parts.PANELS`, `parts.TOOLS`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import gradio as gr

from specviz.choices import FIXED, FREE_TEXT, MODEL, SPECULATIVE
from specviz.app.shown_errors import shown_errors
from specviz.app.tab import PRIVATE, Panel, Shared, chart, hint
from specviz.cost_model import CostModel
from specviz.errors import UserError
from specviz.events import Trace
from specviz.limits import METRICS_BYTES
from specviz.settings import from_request
from specviz.workshop.production import found
from specviz.workshop.production.export import FORMATS, export
from specviz.workshop.production.judge import judge, measured_cost, typed_cost
from specviz.workshop.production.metrics import read
from specviz.viz.acceptance_plots import position_stats_figure
from specviz.viz.palette import empty_figure
from specviz.viz.text import words_html

FORMAT_LABELS = [
    ("vLLM", "vllm"),
    ("SGLang", "sglang"),
    ("llama.cpp (llama-server)", "llamacpp"),
    ("transformers", "transformers"),
    ("llama-cpp-python", "llama-cpp-python"),
]
assert [v for _, v in FORMAT_LABELS] == list(FORMATS)
COST_SOURCES = [("Measured on the run's pair (its runtime)", "run"), ("Typed in", "typed")]
NO_EXPORT = "Run a generation in speculative mode (or upload a trace): its pair, drafter and best k become each engine's settings."


class ExportPanel:
    """The Live run tab's "Use these settings elsewhere" panel, each component made where it is laid out."""

    def __init__(self):
        with gr.Accordion("Use these settings elsewhere", open=False, elem_id="export-panel"):
            self.format = gr.Radio(FORMAT_LABELS, value="llamacpp", label="Engine", elem_id="export-format")
            self.code = gr.Code("", language="shell", label="Command", interactive=False, elem_id="export-code")
            self.notes = gr.HTML(words_html([NO_EXPORT]), elem_id="export-notes")

    @property
    def outputs(self) -> list:
        return [self.code, self.notes]


def export_views(trace: Trace | None, fmt: str) -> tuple:
    """The code block and its notes for `trace` (a finished speculative run) on engine `fmt`."""
    if trace is None or trace.mode != SPECULATIVE or not trace.summary.stop_reason:
        return gr.Code(value="", language="shell"), words_html([NO_EXPORT])
    try:
        out = export(found.from_trace(trace), fmt)
    except UserError as e:
        return gr.Code(value="", language="shell"), words_html([str(e)])
    language = "python" if out.language == "python" else "shell"
    return gr.Code(value=out.text, language=language), words_html(out.notes)


class MetricsSection:
    """The Labs tab's "Production metrics" section, each component made where it is laid out."""

    def __init__(self):
        hint(
            "### Production metrics\nPaste or upload what an engine reports about the same pair: vLLM's "
            "`/metrics` (Prometheus text) or a response's `metrics.speculative_decoding`, SGLang's `meta_info`, "
            "llama-server's `/completion` response or its `/metrics`, or a specviz trace. Its acceptance is drawn "
            "as a run's, and the speedup predicted with the cost model you pick."
        )
        with gr.Row(equal_height=False):
            with gr.Column(min_width=300):
                self.text = gr.Textbox(
                    label="Payload",
                    lines=6,
                    max_lines=16,
                    elem_id="metrics-text",
                    placeholder="vllm:spec_decode_num_drafts_total{model_name=...} 43",
                )
                self.file = gr.File(label="or a file", type="filepath", elem_id="metrics-file")
            with gr.Column(min_width=300):
                self.cost_source = gr.Radio(COST_SOURCES, value="run", label="Cost model", elem_id="metrics-cost")
                with gr.Row():
                    self.target_ms = _ms(30.0, "T: one-token pass (ms)", "metrics-t")
                    self.draft_ms = _ms(5.0, "D: a drafted token (ms)", "metrics-d")
                    self.verify_ms = _ms(None, "Pass over k + 1 (ms; 0: as T)", "metrics-v")
                self.read = gr.Button("Read the metrics", variant="primary", elem_id="metrics-read")
        self.positions = chart(
            "metrics-positions",
            empty_figure("Read an engine's metrics to see its acceptance by position", "Acceptance by position"),
        )
        self.words = gr.HTML(elem_id="metrics-words")

    @property
    def inputs(self) -> list:
        return [self.text, self.file, self.cost_source, self.target_ms, self.draft_ms, self.verify_ms]

    @property
    def outputs(self) -> list:
        return [self.positions, self.words]


def _ms(value: float | None, label: str, elem_id: str) -> gr.Number:
    """A cost in ms to type in."""
    return gr.Number(value, minimum=0, label=label, elem_id=elem_id, min_width=100)


def _payload(text: str | None, path: str | None) -> str | bytes:
    """The pasted text, or a file's bytes, refused (limits.METRICS_BYTES) before a file over
    the limit is read; `read` bounds the text."""
    if path:
        p = Path(path)
        METRICS_BYTES.check(p.stat().st_size, "the file")
        return p.read_bytes()
    return text or ""


def _cost(source: str, trace: Trace | None, t, d, v):
    if source == "run":
        model = trace.meta.get("cost_model") if trace is not None else None
        if not model:
            raise UserError('no run to take a cost model from: run a generation first, or pick "Typed in"')
        runtime = trace.meta.get("runtime") or "its runtime"
        return measured_cost(CostModel.from_dict(model), f"{trace.pair or 'the run'}'s pair on {runtime}, at its load")

    def number(x, name):
        if x is None or (isinstance(x, float) and math.isnan(x)):
            raise UserError(f"type {name} in ms")
        return float(x)

    # The page's number box gives 0 for an empty one: 0 means "as T", as empty does.
    return typed_cost(number(t, "T"), number(d, "D"), None if v in (None, "") or float(v) == 0 else float(v))


def metrics_views(text, path, source, t, d, v, trace: Trace | None) -> tuple:
    """The first model's acceptance by position and, for every model the payload reports on,
    its counts and verdict in words."""
    counts = read(_payload(text, path))
    cost = _cost(source, trace, t, d, v)
    blocks, fig = [], None
    for c in counts:
        j = judge(c, cost)
        lines = j.lines()
        blocks.append(words_html([s.strip() for s in lines]))
        stats = c.position_stats()
        if fig is None and stats is not None:
            fig = position_stats_figure(stats, f"Acceptance by position: {c.engine}{', ' + c.model if c.model else ''}")
    if fig is None:
        fig = empty_figure("This payload has no per-position counts", "Acceptance by position")
    return fig, "".join(blocks)


class ExportSettings(Panel):
    """The Live run tab's export of a finished run's settings, redrawn with each new trace."""

    def build(self, shared: Shared) -> None:
        self.ui = ExportPanel()
        self.redraw_inputs, self.redraw_outputs = [self.ui.format], self.ui.outputs

    def wire(self, shared: Shared) -> None:
        self.ui.format.change(export_views, [shared.trace, self.ui.format], self.ui.outputs, **PRIVATE)

    def redraw(self, trace: Trace | None, fmt: str) -> tuple:
        return export_views(trace, fmt)


class ProductionMetrics(Panel):
    """The Labs tab's production metrics: an engine's payload read and judged on demand."""

    def build(self, shared: Shared) -> None:
        self.ui = MetricsSection()

    def wire(self, shared: Shared) -> None:
        ui = self.ui
        ui.read.click(shown_errors(metrics_views), [*ui.inputs, shared.trace], ui.outputs, **PRIVATE)


def export_settings(
    format: str,
    pair: str = "qwen-coder",
    drafter: str = MODEL,
    k: int = 4,
    output_format: str = FREE_TEXT,
    output_spec: str = "",
) -> str:
    """A pair, drafter and draft length as the command or code that runs them in another engine,
    with an output format beside them where one is given.

    Args:
        format: vllm, sglang, llamacpp, transformers or llama-cpp-python
        pair: a model pair preset
        drafter: model, tree, lookup, early-exit, head, suffix or lookahead
        k: tokens drafted per step
        output_format: text (none), json, regex, choice or grammar
        output_spec: the JSON schema, regular expression, choices (a JSON list or one a line) or grammar

    Returns:
        JSON with format, language, text (the command or code; empty where the engine lacks the drafter) and notes.
    """
    settings = from_request(
        {"drafter": drafter, "k": k, "policy": FIXED, "output_format": output_format, "output_spec": output_spec}
    )
    return json.dumps(export(found.from_settings(pair, settings), format).to_dict())


def read_metrics(payload: str, target_ms: float, draft_ms: float = 0.0, verify_ms: float = 0.0) -> str:
    """An engine's speculative metrics read back and judged: vLLM's /metrics or per-request
    metrics.speculative_decoding, SGLang's meta_info, llama-server's /completion response or
    its /metrics, or a specviz trace.

    Args:
        payload: the Prometheus text or the JSON, as the engine printed it
        target_ms: T, one target forward pass in ms, for the predicted speedup
        draft_ms: D, one drafted token in ms (0 for n-gram drafters)
        verify_ms: a pass over k + 1 tokens in ms (0: as T, a GPU's flat curve)

    Returns:
        JSON: per model, the counts, acceptance by position (unconditional and conditional), mean
        acceptance length with and without the bonus token, the predicted speedup and a verdict.
    """
    cost = typed_cost(target_ms, draft_ms, verify_ms or None)
    return json.dumps([judge(c, cost).to_dict() for c in read(payload)])
