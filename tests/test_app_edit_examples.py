"""The Live tab's edit examples lead to draft-free decoding: a click sets the suffix drafter and
what it needs, a run with those settings races plain decoding on Side by side, and the status
line names suffix on edit work where the measured pass costs say a draft model cannot pay."""

from __future__ import annotations

import gradio as gr
import pytest
from tiny_models import tiny_pair

from specviz.app import compare, live
from specviz.app.config import PageConfig
from specviz.app.loading import LoadState
from specviz.app.page import status_html
from specviz.cost_model import CostModel
from specviz.costs import runtime_choice
from specviz.engine import run
from specviz.events import RoundEvent

pytestmark = pytest.mark.app


@pytest.fixture(scope="module")
def tab() -> live.LiveTab:
    with gr.Blocks():
        return live.LiveTab(PageConfig(default_pair="qwen-coder", preload=False))


def click(tab: live.LiveTab, label: str) -> list:
    """The values of the tab's inputs after a click on the example `label`, through Gradio's own
    handler of that click and each control's preprocessing (what a Run then sends)."""
    (examples,) = [ex for ex in tab.examples.values() if label in ex.example_labels]
    updates = examples.load_input_event.fn(examples.dataset.preprocess(examples.example_labels.index(label)))
    clicked = {id(c): u["value"] for c, u in zip(examples.inputs_with_examples, updates, strict=True)}
    return [c.preprocess(clicked.get(id(c), c.value)) for c in tab.inputs]


def test_an_edit_example_sets_the_suffix_drafter_and_room_for_the_copy(tab):
    prompt, pair, s = tab.read(click(tab, "Edit: rename"))
    assert prompt.startswith("Rename the function `total` to `order_total`")
    assert pair == "qwen-coder"
    assert (s.mode, s.drafter, s.policy, s.k, s.temperature) == ("speculative", "suffix", "cost-aware", 16, 0.0)
    assert s.max_new_tokens >= 200  # the renamed code is about 150 tokens: 128 would cut it off
    assert not s.needs_draft
    # The edit examples have their own heading, which names the drafter and where to race it.
    heading = next(h for h, ex in tab.examples.items() if "Edit: rename" in ex.example_labels)
    assert "suffix" in heading and "Side by side" in heading
    assert {"Edit: fix the typos", "Edit: a config change"} <= set(tab.examples[heading].example_labels)


def test_a_code_example_after_an_edit_one_takes_the_draft_model_back(tab):
    tab.read(click(tab, "Edit: a config change"))
    prompt, _, s = tab.read(click(tab, "Python: is_prime"))
    assert prompt.startswith("Write a Python function is_prime(n)")
    assert (s.drafter, s.max_new_tokens, s.mode) == ("model", 128, "speculative")
    assert s.needs_draft
    heading = next(h for h, ex in tab.examples.items() if "Python: is_prime" in ex.example_labels)
    assert (
        "Prose: tides" in tab.examples[heading].example_labels
        and "Edit: rename" not in tab.examples[heading].example_labels
    )


def test_a_run_from_an_edit_example_races_plain_decoding_on_side_by_side(tab):
    prompt, _, s = tab.read(click(tab, "Edit: fix the typos"))
    pair = tiny_pair(None)  # a target alone: the suffix drafter needs no draft model
    spec = run(pair, prompt, s)
    assert any(isinstance(e, RoundEvent) and e.source is not None and e.source.method == "suffix" for e in spec.events)
    plain = run(pair, prompt, compare.plain_settings(spec))
    assert plain.mode == "plain" and plain.settings["max_new_tokens"] == s.max_new_tokens
    table, identity, *_ = compare.views(spec, plain)
    assert table != compare.NOTHING and table != compare.READY
    assert "identical" in identity.lower()


class _Pair:
    name = "a pair without a draft head"  # ModelPair's name: the status looks up the target's head by it
    draft_precision = "float32"
    runtime = "llama.cpp"
    precision_choice = cost_model = None
    info: dict = {}

    def __init__(self, rates: dict):
        self.runtime_choice = runtime_choice.Choice("llama.cpp", "measured here", rates=rates)


def ready(rates: dict) -> str:
    state = LoadState("qwen-coder", True)
    state.pair = _Pair(rates)
    state.done.set()
    return status_html("qwen-coder", state)


# Pass costs like this 2-core CPU's on llama.cpp: V(1) = 31 ms, V(13) = 161 ms, a drafted token
# half a target pass.
CPU = CostModel(verify={1: 31.0, 2: 45.0, 4: 70.0, 8: 110.0, 13: 161.0, 17: 200.0}, draft=15.0)


def test_the_status_names_suffix_on_edit_work_where_a_draft_model_cannot_pay():
    # plain 1000 / 31 = 32.3 tok/s; drafting at k = 1: 1.8 tokens per 15 + 45 ms = 30.0 tok/s, less at
    # larger k. A 12-token copy: 13 tokens for V(13) / V(1) = 5.2 passes, 2.5x.
    status = ready({"llama.cpp": runtime_choice.rates(CPU)})
    assert "plain decoding (32.3 tok/s) is faster" in status
    assert "suffix drafter pays on edit work" in status and "5.2 one-token passes" in status and "2.5\u00d7" in status
    assert 'class="sv-runtime-try"' in status
    assert "click an Edit example under the prompt (it picks the suffix drafter" in status
    assert "on Side by side" in status


def test_no_pointer_where_a_draft_model_pays_or_copying_cannot():
    flat = CostModel(verify={1: 40.0, 2: 41.0, 4: 43.0, 8: 47.0, 17: 60.0}, draft=8.0)
    status = ready({"llama.cpp": runtime_choice.rates(CPU), "torch": runtime_choice.rates(flat)})
    assert "sv-runtime-note" not in status and "sv-runtime-try" not in status  # torch's drafting pays
    # Every pass over n tokens costs n one-token passes: no round of copies can pay either.
    linear = CostModel(verify={1: 30.0, 2: 60.0, 4: 120.0, 17: 510.0}, draft=18.0)
    status = ready({"llama.cpp": runtime_choice.rates(linear)})
    assert "sv-runtime-note" in status and "suffix" not in status and "sv-runtime-try" not in status
