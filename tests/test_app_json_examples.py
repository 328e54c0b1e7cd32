"""The Live tab's JSON examples set their own schema as the output format, a code example after
them sets free text back, and a run from one races constrained plain decoding on Side by side."""

from __future__ import annotations

import json

import gradio as gr
import pytest
from test_app_edit_examples import click
from tiny_models import tiny_pair

from specviz.app import compare, live
from specviz.app.config import PageConfig
from specviz.engine import run

pytestmark = pytest.mark.app


@pytest.fixture(scope="module")
def tab() -> live.LiveTab:
    with gr.Blocks():
        return live.LiveTab(PageConfig(default_pair="qwen-coder", preload=False))


def test_a_json_example_sets_its_schema_and_a_code_example_sets_free_text_back(tab):
    prompt, _, s = tab.read(click(tab, "JSON: contact from a signature"))
    assert prompt.startswith("Extract the contact details")
    assert s.output_format == "json" and "full_name" in json.loads(s.output_spec)["properties"]
    assert (s.drafter, s.temperature) == ("suffix", 0.0) and s.max_new_tokens >= 200
    heading = next(h for h, ex in tab.examples.items() if "JSON: invoice line items" in ex.example_labels)
    assert "schema" in heading and "Side by side" in heading
    _, _, s = tab.read(click(tab, "Python: is_prime"))
    assert (s.output_format, s.output_spec) == ("text", "")


def test_the_output_format_is_on_the_live_tab_beside_the_drafter(tab):
    assert isinstance(tab.settings["output_format"], gr.Radio) and tab.settings["output_format"].value == "text"
    assert isinstance(tab.settings["output_spec"], gr.Textbox)


def test_a_constrained_run_races_constrained_plain_decoding(tab):
    prompt, _, s = tab.read(click(tab, "JSON: bug report ticket"))
    pair = tiny_pair(None)
    spec = run(pair, prompt, s)
    plain = run(pair, prompt, compare.plain_settings(spec))
    assert plain.mode == "plain" and plain.settings["output_spec"] == s.output_spec
    assert plain.token_ids == spec.token_ids  # greedy: the same constrained text
    assert spec.summary.forced > 0
