"""Tab 6, traces: download the current run as JSON, upload one to replay it with no models.

A downloaded trace is the same JSON as `python -m specviz generate --json`; an uploaded one
is checked by `Trace.from_json`, whose messages say what is wrong with a bad file.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import time
from pathlib import Path

import gradio as gr

from specviz.app import held
from specviz.app.shown_errors import shown_errors
from specviz.errors import UserError
from specviz.events import Trace, check_trace_size, load_trace
from specviz.viz.text import esc, panel_html
from specviz.app.tab import PRIVATE, Shared, Tab, hint, muted

TRACE_DIR = Path(tempfile.gettempdir()) / "specviz-traces"
# Downloads written here are served from Gradio's own copy (deleted by the page's delete_cache);
# these go once they are this old, and past this many, the oldest first.
TRACE_FILES_AGE_S = 3600
TRACE_FILES_KEPT = 256
NO_RUN = muted("No run yet.")


class TracesTab:
    """The tab's components, each made where it is laid out (inside the caller's gr.Tab)."""

    def __init__(self):
        hint(
            "A trace holds a whole run: prompt, settings, every round with its probabilities and timings. "
            "Download one to keep or share it; upload one to replay and inspect it here, with no model loaded."
        )
        with gr.Row(equal_height=False):
            with gr.Column(min_width=280):
                self.download = gr.DownloadButton(
                    "Download this run (JSON)", value=None, interactive=False, elem_id="download-trace"
                )
                self.summary = gr.HTML(NO_RUN, elem_id="trace-summary")
            with gr.Column(min_width=280):
                self.upload = gr.File(
                    label="Upload a trace (.json)", file_types=[".json"], type="filepath", elem_id="trace-upload"
                )


def write_trace(trace: Trace) -> str:
    """The trace as a JSON file named after its mode and prompt; returns its path."""
    TRACE_DIR.mkdir(parents=True, exist_ok=True)
    prune_traces()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", trace.prompt[:32]).strip("-").lower() or "run"
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=TRACE_DIR, prefix=f"specviz-{trace.mode}-{slug}-", suffix=".json", delete=False
    ) as f:
        f.write(trace.to_json())  # as `generate --json` writes it: the largest runs stay under MAX_TRACE_BYTES
    return f.name


def prune_traces(folder: Path | None = None, *, age_s: float = TRACE_FILES_AGE_S, kept: int = TRACE_FILES_KEPT) -> int:
    """Delete written traces older than `age_s`, and the oldest beyond `kept`; how many went."""
    folder = folder or TRACE_DIR
    files = []
    for path in folder.glob("specviz-*.json"):
        with contextlib.suppress(OSError):
            files.append((path.stat().st_mtime, path))
    files.sort(reverse=True)
    now, gone = time.time(), 0
    for i, (mtime, path) in enumerate(files):
        if i >= kept or now - mtime > age_s:
            with contextlib.suppress(OSError):
                path.unlink()
                gone += 1
    return gone


def save_for_download(trace: Trace | None):
    """The DownloadButton's new state: a JSON file of the trace, or disabled without one."""
    if trace is None:
        return gr.DownloadButton(value=None, interactive=False)
    return gr.DownloadButton(value=write_trace(trace), interactive=True)


@shown_errors
def read_upload(path: str | None) -> Trace:
    """The uploaded file as a Trace; load_trace says in words what is wrong with a bad one."""
    if not path:
        raise UserError("no file was uploaded")
    size = Path(path).stat().st_size
    check_trace_size(size)  # before reading it in
    with held.counted(size) as keep:  # the memory uploads hold, all sessions together, bounded
        trace = load_trace(Path(path).read_bytes())
        keep(trace)
    return trace


def summary_html(trace: Trace | None) -> str:
    if trace is None:
        return NO_RUN
    s = trace.summary
    settings = ", ".join(f"{k} = {v}" for k, v in trace.settings.items())
    rows = [
        ("pair", trace.pair or "\u2014"),
        ("mode", trace.mode),
        ("prompt", trace.prompt if len(trace.prompt) <= 200 else trace.prompt[:199] + "\u2026"),
        ("settings", settings),
        (
            "tokens",
            f"{s.new_tokens} in {s.wall_s:.2f} s ({s.tokens_per_s:.2f} tokens/s), stopped by {s.stop_reason or 'nothing yet'}",
        ),
    ]
    body = "".join(f"<tr><td>{esc(a)}</td><td>{esc(b)}</td></tr>" for a, b in rows)
    return panel_html(f'<table class="specviz-table sv-left">{body}</table>')


class TracesPage(Tab):
    """Download the current trace; an upload becomes the current trace, redrawn everywhere."""

    id, title = "traces", "Traces"

    def build(self, shared: Shared) -> None:
        self.ui = TracesTab()
        self.redraw_outputs = [self.ui.download, self.ui.summary]

    def wire(self, shared: Shared) -> None:
        live = shared.built["live"]  # an upload is shown on the Live run tab, ready to run again
        upload = self.ui.upload.upload(read_upload, [self.ui.upload], [shared.trace], **PRIVATE)
        upload = upload.success(live.views, [shared.trace], live.ui.outputs, **PRIVATE)
        upload = upload.then(lambda t: live.controls_from(t), [shared.trace], live.ui.inputs, **PRIVATE)
        shared.then_refresh(upload)

    def redraw(self, trace: Trace | None, *values) -> tuple:
        return save_for_download(trace), summary_html(trace)
