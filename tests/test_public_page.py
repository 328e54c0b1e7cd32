"""What a page allows and how it is launched, without launching it: the environment read in
one place with one-line refusals, the prompt's bounds before any tokenizer work, a public
page's pairs, runtime and errors, one queue for every handler, and each visitor's share."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import gradio as gr
import pytest

from specviz.app import live, runner, shown_errors, visitors
from specviz.app.config import PageConfig
from specviz.app.page import build_page, generate_api
from specviz.app.tools import generate_api_summary
from specviz.workshop.cli import main
from specviz.errors import UserError
from specviz.settings import DEFAULTS, PROMPT, check_prompt, from_request

BIG = "x" * 100_000_000  # 100 MB


# --- the environment ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env, words",
    [
        ({"SPECVIZ_MAX_WALL_S": "0"}, "SPECVIZ_MAX_WALL_S is '0'; it must be a number of seconds above 0"),
        ({"SPECVIZ_MAX_WALL_S": "-5"}, "SPECVIZ_MAX_WALL_S is '-5'"),
        ({"SPECVIZ_MAX_WALL_S": "inf"}, "SPECVIZ_MAX_WALL_S is 'inf'"),
        ({"SPECVIZ_MAX_WALL_S": "soon"}, "SPECVIZ_MAX_WALL_S is 'soon'"),
        ({"SPECVIZ_MCP": "maybe"}, "SPECVIZ_MCP is 'maybe'; it must be one of 1, true, yes, on, 0, false, no, off"),
        ({"SPECVIZ_PUBLIC": "2"}, "SPECVIZ_PUBLIC is '2'"),
        ({"SPECVIZ_QUEUE_SIZE": "0"}, "SPECVIZ_QUEUE_SIZE is '0'; it must be a whole number, 1 or more"),
        ({"SPECVIZ_MAX_RUNS_PER_VISITOR": "1.5"}, "SPECVIZ_MAX_RUNS_PER_VISITOR is '1.5'"),
        ({"GRADIO_SERVER_PORT": "http"}, "GRADIO_SERVER_PORT is 'http'"),
        ({"SPECVIZ_PAIRS": "qwen-coder,/etc"}, "SPECVIZ_PAIRS names '/etc'; it must list presets"),
        (
            {"SPECVIZ_MAX_REQUEST_BYTES": "-1"},
            "SPECVIZ_MAX_REQUEST_BYTES is '-1'; it must be a whole number, 1 or more",
        ),
        ({"SPECVIZ_MAX_PROMPT_CHARS": "0"}, "SPECVIZ_MAX_PROMPT_CHARS is '0'; it must be a number above 0"),
    ],
)
def test_a_bad_environment_value_is_refused_in_one_line(env, words):
    with pytest.raises(UserError) as e:
        PageConfig.from_env(env)
    assert str(e.value).startswith(words) and "\n" not in str(e.value)


def test_the_environment_is_read_as_it_is_meant():
    assert PageConfig.from_env({"SPECVIZ_MAX_WALL_S": "2.5"}).max_wall_s == 2.5
    for off in ("0", "false", "False", "no", "off"):
        assert PageConfig.from_env({"SPECVIZ_MCP": off}).mcp is False
    assert PageConfig.from_env({}).mcp is True and PageConfig.from_env({"SPECVIZ_MCP": "on"}).mcp is True


def test_a_page_is_public_on_a_space_or_beyond_this_machine_unless_told():
    assert not PageConfig.from_env({}).public
    assert PageConfig.from_env({"SPACE_ID": "me/specviz"}).public
    assert PageConfig.from_env({"GRADIO_SERVER_NAME": "0.0.0.0"}).public
    assert not PageConfig.from_env({"GRADIO_SERVER_NAME": "0.0.0.0", "SPECVIZ_PUBLIC": "0"}).public
    public = PageConfig.from_env(
        {"SPECVIZ_PUBLIC": "1", "SPECVIZ_ALLOW_CUSTOM_MODELS": "1", "SPECVIZ_PAIRS": "smollm2"}
    )
    assert public.public and not public.allow_custom  # a public page loads what its operator chose, never what is typed
    assert public.public_pairs == ("qwen-coder", "smollm2")


# --- the prompt -----------------------------------------------------------------------------


def _refused_fast(call) -> str:
    started = time.perf_counter()
    with pytest.raises((UserError, gr.Error)) as e:
        call()
    assert time.perf_counter() - started < 0.5
    return e.value.message if isinstance(e.value, gr.Error) else str(e.value)


def test_a_huge_prompt_is_refused_in_one_line_before_any_model_or_tokenizer_work(monkeypatch):
    monkeypatch.setattr(runner, "stream", lambda *a, **k: pytest.fail("the prompt reached the runner"))
    words = "the prompt is 100,000,000 characters; the limit is 100,000 characters (SPECVIZ_MAX_PROMPT_CHARS)"
    config = PageConfig(default_pair="qwen-coder", preload=False)
    assert _refused_fast(lambda: check_prompt(BIG)) == words
    assert _refused_fast(lambda: list(generate_api(config)(BIG))) == words  # the API
    assert _refused_fast(lambda: generate_api_summary(config)(BIG)) == words  # the MCP tool
    page = live.LiveRuns(config)
    assert _refused_fast(lambda: list(page.run(BIG, "qwen-coder", DEFAULTS, None))) == words  # the page
    prompt = "x" * (PROMPT.chars.default + 1)
    assert main(["generate", "--prompt", prompt]) == 2  # the CLI, before loading a pair


def test_a_conversation_is_bounded_in_turns_and_in_characters():
    turn = {"role": "user", "content": "hi"}
    assert len(check_prompt([turn] * PROMPT.messages.default)) == PROMPT.messages.default
    words = "the number of messages is 65; the limit is 64 (SPECVIZ_MAX_MESSAGES)"
    assert _refused_fast(lambda: check_prompt([turn] * 65)) == words
    assert _refused_fast(lambda: check_prompt([{"role": "user", "content": "x" * 60_000}] * 2)).startswith(
        "the conversation is 120,000 characters; the limit is 100,000"
    )


def test_the_limit_is_the_operators_to_change(monkeypatch):
    monkeypatch.setenv("SPECVIZ_MAX_PROMPT_CHARS", "10")
    assert _refused_fast(lambda: check_prompt("x" * 11)).startswith("the prompt is 11 characters; the limit is 10")


def test_the_prompt_box_stops_at_the_limit():
    with gr.Blocks():
        tab = live.LiveTab(PageConfig(default_pair="qwen-coder", preload=False))
    assert tab.prompt.max_length == PROMPT.chars.default


# --- a public page ---------------------------------------------------------------------------


PUBLIC = PageConfig(default_pair="qwen-coder", public=True, allow_custom=False, host="0.0.0.0")


@pytest.mark.parametrize("pair", ["qwen-7b", "/etc -> /etc", "Qwen/Qwen2.5-0.5B -> Qwen/Qwen2.5-1.5B", "x" * 10_000])
def test_a_public_page_loads_only_its_pairs(pair):
    message = _refused_fast(lambda: runner.check_pair(pair, PUBLIC))
    assert message.endswith("this page loads only qwen-coder (SPECVIZ_PAIRS)") and len(message) < 200
    assert runner.check_pair(" qwen-coder ", PUBLIC) == "qwen-coder"
    assert [value for _, value in live.pair_choices(PUBLIC)] == ["qwen-coder"]


def test_a_public_page_runs_on_its_operators_runtime(monkeypatch):
    assert runner.check_runtime("auto", PUBLIC) == "auto"
    assert _refused_fast(lambda: runner.check_runtime("torch", PUBLIC)).startswith("runtime 'torch': this page runs")
    assert runner.check_runtime("torch", PageConfig()) == "torch"
    # the runtime `auto` loaded the pair on: side by side reruns a run on it
    loaded = SimpleNamespace(ready=True, pair=SimpleNamespace(runtime="llama.cpp"))
    monkeypatch.setattr(runner.LOADER, "status", lambda name: loaded if name == "qwen-coder" else None)
    assert runner.check_runtime("llama.cpp", PUBLIC, "qwen-coder") == "llama.cpp"
    assert _refused_fast(lambda: runner.check_runtime("torch", PUBLIC, "qwen-coder")).startswith("runtime 'torch'")
    # a pair change with no prompt only loads, and is checked as a run is
    monkeypatch.setattr(runner.LOADER, "request", lambda *a, **k: pytest.fail("a load began"))
    rerun = live.LiveRuns(PUBLIC).rerun("", "qwen-coder", from_request({"runtime": "torch"}), None)
    assert _refused_fast(lambda: list(rerun)).startswith("runtime 'torch'")


def test_a_public_page_shows_no_server_details():
    def broken():
        raise OSError("[Errno 2] No such file: '/srv/models/secret/model.gguf'")

    def refused():
        raise UserError("could not read /srv/models/secret/model.gguf")

    try:
        shown_errors.hide_details(True)
        for fn in (broken, refused):
            with pytest.raises(gr.Error) as e:
                shown_errors.shown_errors(fn)()
            assert "/srv" not in e.value.message and "secret" not in e.value.message
        shown_errors.hide_details(False)
        with pytest.raises(gr.Error) as e:
            shown_errors.shown_errors(broken)()
        assert "/srv/models/secret/model.gguf" in e.value.message  # a local page says what went wrong
    finally:
        shown_errors.hide_details(False)


# --- one queue ---------------------------------------------------------------------------------


def test_every_handler_that_computes_is_queued_under_a_limit():
    demo = build_page(PageConfig(default_pair="qwen-coder", preload=False))
    cheap = {"stop", "k_for_policy", "model_status", "load_example", "<lambda>", None}
    for fn in demo.fns.values():
        if not fn.queue:
            assert fn.name in cheap, f"{fn.name} runs outside the queue"
        elif fn.name != "status":  # the status endpoint only reads the load's state
            assert isinstance(fn.concurrency_limit, int), f"{fn.name} has no concurrency limit"
    models = [fn for fn in demo.fns.values() if fn.concurrency_id == "models"]
    assert {"run", "rerun", "generate", "generate_summary", "sweep", "batching"} <= {fn.name for fn in models}
    assert all(fn.concurrency_limit == 1 for fn in models)
    replay = next(fn for fn in demo.fns.values() if fn.name == "replay")
    assert replay.concurrency_id == "light" and replay.concurrency_limit >= 1


# --- each visitor's share --------------------------------------------------------------------------


def _event(session: str, address: str, forwarded: str = ""):
    return SimpleNamespace(concurrency_id="models", session_hash=session, request=_request(address, forwarded))


def _request(address: str = "127.0.0.1", forwarded: str = ""):
    headers = {"x-forwarded-for": forwarded} if forwarded else {}
    return SimpleNamespace(headers=headers, client=SimpleNamespace(host=address))


def _queue(waiting=(), running=()):
    return SimpleNamespace(
        event_queue_per_concurrency_id={"models": SimpleNamespace(queue=list(waiting))},
        active_jobs=[list(running), None],
    )


def test_a_visitor_at_the_limit_is_refused_in_one_line_and_others_are_not():
    queue = _queue(waiting=[_event("a", "127.0.0.1")], running=[_event("a", "127.0.0.1")])
    config = PageConfig(max_runs_per_visitor=2)
    assert visitors.refusal(queue, _request(), "a", config) == (
        "you have 2 model requests waiting or running; the limit is 2 per visitor (SPECVIZ_MAX_RUNS_PER_VISITOR)"
    )
    assert visitors.refusal(queue, _request(), "b", config) is None  # another session on a local page
    assert visitors.refusal(queue, _request(), "a", PageConfig(max_runs_per_visitor=3)) is None


def test_on_a_public_page_a_visitor_is_an_address():
    config = PageConfig(public=True, max_runs_per_visitor=1)
    queue = _queue(running=[_event("s1", "203.0.113.7")])
    assert visitors.refusal(queue, _request("203.0.113.7"), "s2", config)  # a new session from the same address
    assert visitors.refusal(queue, _request("198.51.100.1"), "s3", config) is None
    space = PageConfig(public=True, space=True, trusted_hops=1, max_runs_per_visitor=1)
    # The proxy appends the address it saw; what stands left of it the client wrote.
    behind = _queue(running=[_event("s1", "10.0.0.2", forwarded="6.6.6.6, 203.0.113.7")])
    assert visitors.refusal(behind, _request("10.0.0.3", forwarded="203.0.113.7"), "s2", space)  # the proxy names it
    assert visitors.refusal(behind, _request("10.0.0.2", forwarded="203.0.113.7, 198.51.100.1"), "s4", space) is None


def test_requests_sent_at_once_join_one_after_another_so_each_counts_the_others():
    config = PageConfig(max_runs_per_visitor=1)
    queue = _queue()
    fns = {0: SimpleNamespace(concurrency_id="models"), 1: SimpleNamespace(concurrency_id="light")}

    async def join(body, request, username):
        await asyncio.sleep(0.01)  # the queue's own join awaits before the request is queued
        if fns[body.fn_index].concurrency_id == "models":
            queue.event_queue_per_concurrency_id["models"].queue.append(_event(body.session_hash, "127.0.0.1"))
        return True, "id", "success"

    queue.push = join
    visitors.guard(SimpleNamespace(_queue=queue, fns=fns), config)

    async def both():
        body = SimpleNamespace(fn_index=0, session_hash="a")
        return await asyncio.gather(
            queue.push(body, _request(), None),
            queue.push(body, _request(), None),
            queue.push(SimpleNamespace(fn_index=0, session_hash="b"), _request(), None),
            queue.push(SimpleNamespace(fn_index=1, session_hash="a"), _request(), None),
        )

    first, second, other, light = asyncio.run(both())
    assert first[2] == "success" and other[2] == "success" and light[2] == "success"
    assert second[2] == "validator_error" and second[1][0]["message"].startswith("you have 1 model requests")


def test_a_body_sent_without_its_length_is_cut_off_at_the_limit():
    from specviz.app.request_size import RequestSize

    sent, read = [], []

    async def app(scope, receive, send):
        while True:
            message = await receive()
            read.append(len(message["body"]))
            if not message.get("more_body"):
                return

    async def chunks():
        return {"type": "http.request", "body": b"x" * 600, "more_body": True}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/gradio_api/queue/join", "headers": []}
    asyncio.run(RequestSize(app, max_bytes=1000)(scope, chunks, send))
    assert read == [600] and sent[0]["status"] == 413
    assert (
        b"the request is more than 1,200 bytes; the limit is 1,000 bytes (SPECVIZ_MAX_REQUEST_BYTES)" in sent[1]["body"]
    )
