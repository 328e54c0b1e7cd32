"""The `generate` API endpoint, called with gradio_client against `python app.py` launched for real."""

from __future__ import annotations

import json

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from app_server import launched_app, save_tiny_pair
from specviz.events import RoundEvent, Trace

pytestmark = pytest.mark.app

PROMPT = "for i in range(10):"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(client, pair spec) for an app whose default pair is the tiny pair, not preloaded."""
    spec = save_tiny_pair(tmp_path_factory.mktemp("tiny-pair"))
    # fp32: greedy speculative and plain outputs are compared token for token, and only there
    # does a multi-token pass round like a one-token pass
    with launched_app(
        {"SPECVIZ_DEFAULT_PAIR": spec, "SPECVIZ_PRELOAD": "0", "SPECVIZ_DTYPE": "float32"}, "app-client"
    ) as url:
        yield Client(url, verbose=False), spec


def stream(client: Client, **kw) -> list[Trace]:
    job = client.submit(api_name="/generate", **kw)
    job.result()  # raises the app's error, if any
    return [Trace.from_json(out) for out in job.outputs()]


def test_generate_streams_the_trace_round_by_round_and_ends_with_the_whole_trace(tiny):
    client, spec = tiny
    traces = stream(
        client,
        prompt=PROMPT,
        pair=spec,
        drafter="model",
        k=4,
        temperature=0.0,
        top_p=1.0,
        max_new_tokens=24,
        seed=0,
        mode="speculative",
    )
    final = traces[-1]
    # A message per round (rounds closer than runner.MIN_UPDATE_S share one), then the finished trace.
    assert len(traces) >= 2
    counts = [len(t.events) for t in traces]
    assert counts == sorted(counts) and counts[0] >= 1
    assert final.summary.stop_reason in ("eos", "max_new_tokens")
    assert [t.summary.stop_reason for t in traces[:-1]] == [""] * (len(traces) - 1)
    assert all(isinstance(e, RoundEvent) for e in final.events)
    assert final.prompt == PROMPT and final.mode == "speculative" and final.settings["k"] == 4
    assert 1 <= final.summary.new_tokens <= 24 == final.settings["max_new_tokens"]
    assert final.summary.rounds == len(final.events)
    assert len(final.token_ids) == final.summary.new_tokens
    # The trace is the one the CLI prints: it round-trips through JSON unchanged.
    assert Trace.from_json(final.to_json()) == final


def test_greedy_speculative_output_is_token_for_token_plain_greedy_output(tiny):
    client, spec = tiny
    common = dict(prompt=PROMPT, pair=spec, drafter="model", k=3, temperature=0.0, top_p=1.0, max_new_tokens=32, seed=0)
    spec_trace = stream(client, mode="speculative", **common)[-1]
    plain_trace = stream(client, mode="plain", **common)[-1]
    assert plain_trace.mode == "plain" and plain_trace.summary.target_passes == plain_trace.summary.new_tokens
    assert spec_trace.token_ids == plain_trace.token_ids


def test_the_api_takes_its_defaults_and_other_drafters(tiny):
    client, _ = tiny
    final = stream(client, prompt=PROMPT, drafter="lookup", max_new_tokens=8)[-1]
    assert final.settings["drafter"] == "lookup" and final.summary.new_tokens >= 1


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"k": 99}, "k must be a whole number from 1 to 16"),
        ({"temperature": -1.0}, "temperature must be between 0 and 2"),
        ({"drafter": "oracle"}, "drafter must be one of"),
        ({"prompt": "   "}, "the prompt is empty"),
        ({"pair": "no-such-pair"}, "no-such-pair"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message_and_the_app_keeps_serving(tiny, bad, message):
    client, spec = tiny
    kw = {"prompt": PROMPT, "pair": spec, "max_new_tokens": 4, **bad}
    with pytest.raises(AppError, match=message) as err:
        stream(client, **kw)
    assert "Traceback" not in str(err.value)
    assert stream(client, prompt=PROMPT, pair=spec, max_new_tokens=2)[-1].summary.new_tokens >= 1


def test_status_says_how_the_load_stands_and_where_the_cache_is(tiny):
    client, spec = tiny
    stream(
        client, prompt=PROMPT, pair=spec, drafter="model", k=2, temperature=0.0, max_new_tokens=4, mode="speculative"
    )
    status = json.loads(client.predict(spec, api_name="/status"))
    assert json.loads(client.predict("", api_name="/status"))["pair"] == spec  # the page's own pair
    assert (
        status["pair"] == spec and status["state"] == "ready" and status["fraction"] == 1.0 and status["error"] is None
    )
    assert status["cache"] and status["cache_reason"]
    # Each runtime's measured rates, and the warning exactly when some plain rate beats every drafting one.
    rates = status["rates"]
    assert rates and all(r["plain"] > 0 and r["speculative"] > 0 and r["k"] >= 1 for r in rates.values())
    best_plain = max(r["plain"] for r in rates.values())
    assert (status["note"] is not None) == all(best_plain > r["speculative"] for r in rates.values())
    never = json.loads(client.predict("not-loaded", api_name="/status"))
    assert never["state"] == "idle" and never["seconds"] is None
