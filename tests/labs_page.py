"""A small page holding only the labs tab, a trace upload and a pair box, launched in-process
for the labs' handler and browser tests (the full page wires the same functions)."""

from __future__ import annotations

import gradio as gr

from specviz.app import labs_tab, traces
from specviz.workshop.labs import panels
from specviz.app.config import PageConfig
from specviz.app.page import CSS_PATHS


def build(pair_spec: str) -> gr.Blocks:
    config = PageConfig(default_pair=pair_spec, preload=False)
    with gr.Blocks(title="specviz labs") as demo:
        trace = gr.State(None)
        pair = gr.Textbox(pair_spec, label="pair", elem_id="pair")
        upload = gr.File(label="Upload a trace (.json)", file_types=[".json"], type="filepath", elem_id="trace-upload")
        tab = labs_tab.LabsTab()
        panels.wire(panels.PairLabsSection(), trace, pair, config)
        upload.upload(traces.read_upload, [upload], [trace]).success(labs_tab.views, [trace], tab.outputs)
    return demo


def launch(pair_spec: str, port: int) -> gr.Blocks:
    demo = build(pair_spec)
    demo.queue()
    demo.launch(server_port=port, prevent_thread_lock=True, css_paths=CSS_PATHS, quiet=True)
    return demo
