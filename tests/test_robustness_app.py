"""Robustness and safety of the page, against `python app.py` launched for real on the tiny pair.

Issue items covered here (the CLI, models and engine are in test_robustness.py, the load
test on the bundled pair in test_robustness_load.py):
1. bad input through the `generate` API and the page gets a clear message, never a
   traceback, and the app keeps serving; bad uploads are refused in words;
2. hostile text in a prompt, an uploaded trace and an error message is shown as text in a
   real browser: no script runs, no markup renders, nothing overflows;
3. a user beyond the queue's size is told the app is busy;
4. Stop, a cancelled job and a client that disconnects all end the run, and the next run
   is served; the wall-time cap stops a run keeping its tokens and says so;
5. an exception inside one user's run reaches that user only;
6. a page user cannot make the server read a local path unless it is bound to localhost.
"""

from __future__ import annotations

import json
import re
import sys
import time

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError, ValidationError
from gradio_client.utils import QueueError, Status

from app_server import ARTIFACTS, ROOT, launched_app, save_tiny_pair

sys.path.insert(0, str(ROOT / "scripts"))
from soak import api_data  # noqa: E402 (the soak's raw calls, built from the app's API description)
from specviz.events import MAX_TRACE_BYTES, Trace

pytestmark = pytest.mark.app

PROMPT = "for i in range(10):"
# Greedy on the tiny pair (one thread), this prompt runs past 1024 tokens without an end-of-text token.
LONG_PROMPT = "hello range"
RUN_TIMEOUT_MS = 300_000  # a bound for a busy machine, not a speed requirement
HOSTILE = {
    "script": "<script>window.__pwned=1</script>",
    "img": '<img src=x onerror="window.__pwned=1">',
    "entity": "&amp;lt;",
    "rtl": "\u202eevil\u202c",
    "emoji": "\U0001f680",
    "zero-width": "a\u200bb",
    "control": "\x07\x1b[31m",
}


@pytest.fixture(scope="module")
def tiny_pair_spec(tmp_path_factory) -> str:
    return save_tiny_pair(tmp_path_factory.mktemp("tiny-pair"))


@pytest.fixture(scope="module")
def app(tiny_pair_spec):
    """(url, pair spec) of an app on the tiny pair with a queue of 2 waiting runs."""
    env = {
        "SPECVIZ_DEFAULT_PAIR": tiny_pair_spec,
        "SPECVIZ_PRELOAD": "0",
        "SPECVIZ_QUEUE_SIZE": "2",
        "OMP_NUM_THREADS": "1",
    }
    with launched_app(env, "app-robustness") as url:
        yield url, tiny_pair_spec


def generate(client: Client, **kw):
    return client.submit(api_name="/generate", **{"prompt": PROMPT, "max_new_tokens": 8, **kw})


def final(job) -> Trace:
    job.result()
    return Trace.from_json(job.outputs()[-1])


# --- 1. bad input through the API ---------------------------------------------------------

BAD_API_INPUT = [
    ({"prompt": ""}, "the prompt is empty"),
    ({"prompt": " \n\t "}, "the prompt is empty"),
    ({"prompt": "The quick brown fox jumps over the lazy dog. " * 300}, "context window"),
    ({"k": 0}, "k must be a whole number from 1 to 16"),
    ({"k": 17}, "k must be a whole number from 1 to 16"),
    ({"temperature": -0.1}, "temperature must be between 0 and 2"),
    ({"temperature": 2.1}, "temperature must be between 0 and 2"),
    ({"top_p": 0.0}, "top-p must be above 0 and at most 1"),
    ({"top_p": 1.1}, "top-p must be above 0 and at most 1"),
    ({"top_k": -1}, "top-k must be a whole number from 0 to 1048576"),
    ({"max_new_tokens": 0}, "max new tokens must be a whole number from 1 to 1024"),
    ({"max_new_tokens": 1025}, "max new tokens must be a whole number from 1 to 1024"),
    ({"seed": 1.5}, "seed must be a whole number"),
    ({"seed": "abc"}, "seed must be a whole number"),
    ({"pair": "no-such-preset"}, "unknown model pair 'no-such-preset'"),
    ({"pair": "someone/no-such-model -> someone/no-such-target"}, "not available offline|not reachable"),
]


@pytest.mark.parametrize(
    "bad, words",
    BAD_API_INPUT,
    ids=[next(iter(b)) + "=" + repr(v)[:20] for b, _ in BAD_API_INPUT for v in [next(iter(b.values()))]],
)
def test_bad_api_input_gets_a_clear_message(app, bad, words):
    url, _ = app
    with pytest.raises((AppError, ValidationError)) as err:  # a declared type is refused at the queue's door
        final(generate(Client(url, verbose=False), **bad))
    message = str(err.value)
    assert re.search(words, message), message
    assert "Traceback" not in message and 'File "' not in message


def test_a_good_run_after_bad_ones_is_served(app):
    url, _ = app
    client = Client(url, verbose=False)
    with pytest.raises(AppError):
        final(generate(client, k=99))
    trace = final(generate(client))
    assert trace.summary.new_tokens == 8 and trace.summary.stop_reason in ("max_new_tokens", "eos")


def test_local_paths_are_refused_from_a_page_bound_beyond_localhost(tiny_pair_spec):
    from specviz.app import runner
    from specviz.app.config import PageConfig
    from specviz.errors import UserError
    from specviz.settings import GenerationSettings

    public = PageConfig(host="0.0.0.0", default_pair="qwen-coder")
    for spec in (tiny_pair_spec, "/etc -> /tmp", "../models -> x/y", "~/.ssh"):
        with pytest.raises(UserError, match="local"):
            runner.check_pair(spec, public)
    # Every run goes through runner.stream (the live tab, the API, the race against plain
    # decoding of an uploaded trace), which checks the pair before loading anything.
    with pytest.raises(UserError, match="local"):
        next(runner.stream(tiny_pair_spec, "Hello", GenerationSettings(max_new_tokens=2), "a-session", public))
    assert runner.check_pair("qwen-coder", public) == "qwen-coder"
    assert runner.check_pair("Qwen/Qwen2.5-0.5B-Instruct -> Qwen/Qwen2.5-1.5B-Instruct", public)
    local = PageConfig(host="127.0.0.1", default_pair="qwen-coder")
    assert runner.check_pair(tiny_pair_spec, local) == tiny_pair_spec
    operator = PageConfig(host="0.0.0.0", default_pair=tiny_pair_spec)  # the operator's own pair is fine
    assert runner.check_pair(tiny_pair_spec, operator) == tiny_pair_spec


# --- 3. busy ------------------------------------------------------------------------------


def test_users_beyond_the_queue_are_told_the_app_is_busy_and_the_rest_complete(app):
    url, _ = app
    long_run = generate(Client(url, verbose=False), max_new_tokens=1024, prompt=LONG_PROMPT)
    while long_run.status().code not in (Status.PROCESSING, Status.ITERATING):
        assert not long_run.done(), "the long run ended before the others queued: it must hold the models"
        time.sleep(0.05)
    waiting = [generate(Client(url, verbose=False)) for _ in range(2)]  # the queue holds 2
    while sum(j.status().code == Status.IN_QUEUE for j in waiting) < 2:
        time.sleep(0.05)
    ranks = {j.status().rank for j in waiting}
    refused = generate(Client(url, verbose=False))
    with pytest.raises((QueueError, AppError), match="(?i)queue is full|busy"):
        refused.result(timeout=60)
    long_run.cancel()
    assert all(final(j).summary.new_tokens == 8 for j in waiting)
    assert ranks == {0, 1}, "waiting users are told their place"


# --- 4. Stop, cancel, disconnect ----------------------------------------------------------


def test_a_cancelled_job_frees_the_models_for_the_next_user(app):
    url, _ = app
    job = generate(Client(url, verbose=False), max_new_tokens=1024, prompt=LONG_PROMPT)
    while len(job.outputs()) < 2:
        assert not job.done(), "the run ended before it could be cancelled"
        time.sleep(0.02)
    job.cancel()
    nxt = final(generate(Client(url, verbose=False)))
    assert nxt.summary.new_tokens == 8
    streamed = [Trace.from_json(o) for o in job.outputs()]
    assert streamed[-1].summary.new_tokens < 1024, "the cancelled run did not go on to the end"


def test_a_client_that_disconnects_mid_run_does_not_leave_it_running(app):
    url, spec = app
    # The endpoint's positional inputs, as a raw HTTP client sends them.
    body = {"data": api_data(url, {"prompt": LONG_PROMPT, "pair": spec, "max_new_tokens": 1024})}
    started = time.monotonic()
    whole = final(generate(Client(url, verbose=False), prompt=LONG_PROMPT, max_new_tokens=1024))
    whole_s = time.monotonic() - started
    assert whole.summary.new_tokens == 1024, "only a disconnect can end this run early"
    rounds_seen = 0
    with httpx.Client(base_url=url, timeout=120) as http:
        event_id = http.post("gradio_api/call/generate", json=body).json()["event_id"]
        with http.stream("GET", f"gradio_api/call/generate/{event_id}") as stream:
            for line in stream.iter_lines():
                if line.startswith("data:") and "token_ids" in line:
                    rounds_seen += 1
                    break  # one round arrived: go away
    assert rounds_seen == 1
    # The models are free again: the next user's 8 tokens come back in well under the time
    # the abandoned 1024-token run would still have held them.
    gone = time.monotonic()
    trace = final(generate(Client(url, verbose=False)))
    assert trace.summary.new_tokens == 8
    assert time.monotonic() - gone < whole_s / 2, (
        f"the next run waited as long as the whole abandoned run ({whole_s:.1f} s)"
    )


# --- 2. hostile text in a real browser ----------------------------------------------------


def hostile_trace(url: str, tmp_path) -> str:
    """A real trace from the app whose every token text, prompt and output is hostile."""
    trace = final(generate(Client(url, verbose=False), max_new_tokens=24, k=3))
    d = trace.to_dict()
    texts = list(HOSTILE.values())
    # The tokens the stream always shows (accepted drafts, emitted tokens) cycle through every
    # hostile text on their own count, so each is in the stream whatever the trace's shape.
    shown, other = 0, 0
    for event in d["events"]:
        for part in event["drafted"] + ([event["emitted"]] if event["emitted"] else []):
            if part is event["emitted"] or part["decision"] == "accepted":
                part["text"] = texts[shown % len(texts)]
                shown += 1
            else:
                part["text"] = texts[other % len(texts)]
                other += 1
        for pos in event["positions"]:
            for top in pos["top"]:
                top["text"] = texts[other % len(texts)]
                other += 1
    assert shown >= len(texts), "the trace is too short to show every hostile text"
    d["prompt"] = " ".join(texts)
    d["text"] = "".join(texts)
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    return str(path)


@pytest.mark.browser
def test_hostile_text_is_shown_as_text_in_a_real_browser(app, browser, tmp_path):
    url, _ = app
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.wait_for_selector("#run", timeout=60_000)

    # A hostile prompt, run for real.
    prompt = " ".join(HOSTILE.values())
    page.fill("#prompt textarea", prompt)
    page.click("#run")
    page.wait_for_selector("#tokens [data-state=done]", timeout=RUN_TIMEOUT_MS)
    page.get_by_role("tab", name="Traces").click()
    page.wait_for_selector("#trace-summary td")
    shown = page.inner_text("#trace-summary")
    assert HOSTILE["script"] in shown and HOSTILE["img"] in shown and HOSTILE["entity"] in shown

    # A trace whose token texts are hostile, uploaded.
    page.set_input_files("#trace-upload input[type=file]", hostile_trace(url, tmp_path))
    page.wait_for_function(
        "document.querySelector('#trace-summary').innerText.includes('\u202e') || "
        "document.querySelector('#trace-summary').innerText.includes('\\\\u202e')"
    )
    page.get_by_role("tab", name="Live run").click()
    # The stream shows the uploaded trace once the upload's replay has redrawn it.
    page.wait_for_function("document.querySelector('#tokens').innerText.includes(%s)" % json.dumps(HOSTILE["script"]))
    stream = page.inner_text("#tokens")
    assert HOSTILE["script"] in stream and HOSTILE["img"] in stream and HOSTILE["entity"] in stream
    assert "\\u202e" in stream and "\\u200b" in stream and "\\x07" in stream and HOSTILE["emoji"] in stream
    page.locator("#tokens .tok").nth(1).click()  # the inspector draws the hostile candidates too
    page.wait_for_selector("#position-bars .js-plotly-plot")
    page.get_by_role("tab", name="Live run").click()

    # A hostile model pair: the error message shows the name as typed.
    page.fill("#pair input", HOSTILE["img"] + "<b id=bold>bold</b>")
    page.keyboard.press("Enter")
    page.click("#run")
    toast = page.wait_for_selector("[data-testid=toast-text]", timeout=60_000)
    assert "<b id=bold>" in toast.inner_text()

    assert page.evaluate("window.__pwned") is None, "a script from the text ran"
    # Gradio's own inline scripts sit outside <gradio-app>; nothing from the text may appear inside it.
    injected = page.evaluate(
        "[...document.querySelectorAll('#bold, img[src=x], gradio-app script')].map(e => e.outerHTML.slice(0, 80))"
    )
    assert injected == [], injected
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), "the layout broke"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "hostile-text.png"), full_page=True)
    page.close()


@pytest.mark.browser
@pytest.mark.parametrize(
    "name, content, words",
    [
        ("notes.json", b"this is not json", "not JSON"),
        ("binary.json", bytes(range(256)) * 4, "not UTF-8"),
        ("other.json", b'{"hello": "world"}', "missing events"),
        ("typed.json", None, "expected a whole number"),
    ],
)
def test_bad_uploads_are_refused_in_words_and_the_page_keeps_serving(app, browser, tmp_path, name, content, words):
    url, _ = app
    if content is None:
        d = final(generate(Client(url, verbose=False))).to_dict()
        d["events"][0]["index"] = '0" onmouseover="window.__pwned=1'
        content = json.dumps(d).encode()
    path = tmp_path / name
    path.write_bytes(content)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.get_by_role("tab", name="Traces").click()
    page.set_input_files("#trace-upload input[type=file]", str(path))
    toast = page.wait_for_selector("[data-testid=toast-text]", timeout=60_000)
    assert words in toast.inner_text()
    assert page.evaluate("window.__pwned") is None
    page.get_by_role("tab", name="Live run").click()
    page.click("#run")
    page.wait_for_selector("#tokens [data-state=done]", timeout=RUN_TIMEOUT_MS)
    page.close()


def test_an_upload_over_the_size_cap_is_refused_before_it_is_stored(app):
    url, _ = app
    big = b" " * (MAX_TRACE_BYTES + (1 << 20))
    response = httpx.post(
        url + "gradio_api/upload", files={"files": ("big.json", big, "application/json")}, timeout=120
    )
    assert response.status_code == 413, response.text[:200]
