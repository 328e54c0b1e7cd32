"""Fuzzing the live app: `python app.py` launched for real on the tiny pair.

Hypothesis draws 200 requests to the `generate` API (every parameter valid, at an edge, of
the wrong type or hostile) and 12 trace files uploaded through the page's Traces tab in a
real browser (a real trace with one part replaced, cut short, or bytes that are no JSON).
Every answer must be a finished trace or a one-line message, never a traceback, an
"unexpected error" or a hang; afterwards a good run is served with the tokens it had before.
Both are derandomized and bounded (no shrinking), so a run repeats and ends.
"""

from __future__ import annotations

import json
import time

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError, ValidationError
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from app_server import launched_app, save_tiny_pair
from specviz.events import Trace
from specviz.models.catalogue.presets import PRESETS

pytestmark = pytest.mark.app

PROMPT = "for i in range(10):"
GOOD = dict(prompt=PROMPT, k=3, temperature=0.0, max_new_tokens=12, seed=0, policy="fixed")
ANSWER_TIMEOUT_S = 60  # no answer by then is a hang (a fuzzed run makes at most 12 tokens on the tiny pair)
UNEXPECTED = "Something went wrong"  # shown_errors' words for an exception that is not a UserError
HOSTILE = [
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "\u202eevil\u202c",
    "a\u200bb",
    "\x00\x07\x1b[31m\r\n",
    "\U0001f680",
    "' OR 1=1 --",
    "{{7*7}}",
    "../../etc/passwd",
]
API = settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
UPLOADS = settings(API, max_examples=12)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """(url, pair spec, the good request's greedy tokens before any fuzzing)."""
    spec = save_tiny_pair(tmp_path_factory.mktemp("tiny-pair"))
    env = {"SPECVIZ_DEFAULT_PAIR": spec, "SPECVIZ_PRELOAD": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    with launched_app(env, "app-fuzz") as url:
        client = Client(url, verbose=False)
        before = finished(client.submit(api_name="/generate", pair=spec, **GOOD))
        client.close()
        yield url, spec, before


@pytest.fixture(scope="module")
def client(app):
    c = Client(app[0], verbose=False)
    yield c
    c.close()


def finished(job) -> Trace:
    job.result(timeout=ANSWER_TIMEOUT_S)
    return Trace.from_json(job.outputs()[-1])


# --- the generate API -----------------------------------------------------------------------

# JSON has no NaN or infinity: a client cannot send them.
weird = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**70), 2**70),
    st.text(max_size=12),
    st.sampled_from(HOSTILE),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


# Per parameter: values in range, and values at or past an edge of it (or of the wrong type).
VALID = {
    "drafter": ["model", "tree", "lookup", "early-exit"],
    "k": [1, 2, 4, 8, 16, 4.0],
    "temperature": [0.0, 0.7, 2.0, 1e-9, 0],
    "top_p": [1.0, 0.9, 1e-6],
    "top_k": [0, 1, 5, 10**6],
    # A fuzzed run makes at most 12 tokens: 1024 is exercised in test_robustness_app.py.
    "max_new_tokens": [1, 2, 12, 12.0],
    "seed": [0, 1, 2**63 - 1, 3.0],
    "mode": ["speculative", "plain"],
    "policy": ["fixed", "heuristic", "cost-aware"],
    "adaptive": [True, False, None],
    "raw": [True, False],
    "early_exit_layers": [0, 1, 3],
    "adaptive_threshold": [0.0, 0.4, 1.0],
    "tree_nodes": [1, 8, 64],
    "tree_width": [1, 2, 8],
    "vocab_method": ["auto", "text", "intersection"],
}
EDGE = {
    "drafter": ["Model", "", "oracle"],
    "k": [0, 17, -1, 4.5],
    "temperature": [-0.1, 2.0000001, 1e308],
    "top_p": [0.0, 1.5, -1.0],
    "top_k": [-1, 2**64],
    "max_new_tokens": [0, 1025, -5, 2.5],
    "seed": [-1, 2**63, 0.5],
    "mode": ["Plain", "", "tree"],
    "policy": ["adaptive", "FIXED", ""],
    "adaptive": [0, "yes"],
    "raw": [0, 1, "false"],
    "early_exit_layers": [4, 99, -1],
    "adaptive_threshold": [-0.1, 1.5],
    "tree_nodes": [0, 65],
    "tree_width": [0, 9],
    "vocab_method": ["none", "TEXT"],
}
good_prompts = st.one_of(
    st.sampled_from([PROMPT, "hello", "def reverse(s):", *HOSTILE[:4]]),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=60).filter(str.strip),
)
odd_prompts = st.one_of(st.sampled_from([" ", "", "\n\t", "The quick brown fox. " * 400]), st.text(max_size=80), weird)


@st.composite
def requests(draw, spec: str):
    """Some parameters set in range, then none, one or two of them (or the prompt, or the pair) made odd."""
    names = sorted(VALID)
    kw = {n: draw(st.sampled_from(VALID[n])) for n in draw(st.lists(st.sampled_from(names), unique=True, max_size=6))}
    kw.setdefault("max_new_tokens", draw(st.sampled_from(VALID["max_new_tokens"])))  # not the default 128
    for n in draw(st.lists(st.sampled_from(names), unique=True, max_size=2)):
        kw[n] = draw(st.one_of(st.sampled_from(EDGE[n]), weird))
    kw["prompt"] = draw(st.one_of(good_prompts, good_prompts, odd_prompts))
    odd_pairs = st.one_of(
        st.sampled_from(
            [
                f"  {spec} ",
                spec.replace(" -> ", "->"),
                "",
                "->",
                "no-such-pair",
                "a -> b",
                "/etc -> /tmp",
                "/ -> /",
                "Qwen/none-such -> Qwen/none-such-either",
                "qwen-coder -> x",
                spec.split(" -> ")[1],
                "<b>x</b> -> y",
            ]
        ),
        st.text(max_size=30).filter(lambda s: s.strip() not in PRESETS),
        weird,
    )
    choice = draw(st.integers(0, 5))  # left out (the default pair is the tiny pair too), the pair, or an odd one
    if choice in (1, 2, 3):
        kw["pair"] = spec
    elif choice == 4:
        kw["pair"] = draw(odd_pairs)
    return kw


def test_fuzzed_requests_get_a_trace_or_a_one_line_message(app, client):
    url, spec, _ = app
    seen = {"trace": 0, "message": 0}

    @API
    @given(kw=requests(spec))
    def one(kw):
        job = client.submit(api_name="/generate", **kw)
        try:
            job.result(timeout=ANSWER_TIMEOUT_S)  # TimeoutError: a hang
        except (AppError, ValidationError) as e:
            # Refused at the queue's door (a declared type), the client heads the refusal with a count.
            message = str(e).strip() if isinstance(e, AppError) else str(e).split("\n", 1)[-1].split(": ", 1)[-1]
            assert message and "\n" not in message and len(message) < 1000, f"not one line: {message[:500]!r}"
            assert "Traceback" not in message and 'File "' not in message, message
            assert UNEXPECTED not in message, f"an unexpected error for {kw!r}: {message}"
            seen["message"] += 1
            return
        trace = Trace.from_json(job.outputs()[-1])
        assert trace.summary.stop_reason in ("eos", "max_new_tokens"), trace.summary.stop_reason
        assert 1 <= trace.summary.new_tokens <= trace.settings["max_new_tokens"] <= 12
        assert trace.prompt == kw["prompt"]
        seen["trace"] += 1

    one()
    print(f"fuzzed requests: {seen}")
    # The drawn requests are a mix, not all refused or all served.
    assert seen["trace"] >= 20 and seen["message"] >= 20, seen


def test_after_the_fuzzing_a_good_run_is_served_with_the_tokens_it_had_before(app, client):
    _, spec, before = app
    again = finished(client.submit(api_name="/generate", pair=spec, **GOOD))
    plain = finished(client.submit(api_name="/generate", pair=spec, **{**GOOD, "mode": "plain"}))
    assert before.summary.new_tokens == 12 and again.token_ids == before.token_ids
    assert plain.mode == "plain" and plain.token_ids == before.token_ids, "greedy speculative is plain greedy"


# --- trace files through the page, in a real browser -----------------------------------------


def places(node, prefix=()):
    """Every key / index path in a JSON value, the root included."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += places(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += places(value, (*prefix, i))
    return out


def replaced(node, path, value):
    if not path:
        return value
    node = json.loads(json.dumps(node))
    parent = node
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return node


MARKER = "upload-marker-000000"  # the prompt of a generated file; each upload gets its own in its place


@st.composite
def trace_files(draw, base: dict):
    """(kind, bytes): a real trace with one part replaced or its text made hostile, cut short, or no JSON."""
    kind = draw(st.sampled_from(["replaced", "replaced", "hostile", "cut", "bytes"]))
    d = {**base, "prompt": MARKER}
    if kind == "replaced":
        path = draw(st.sampled_from([p for p in places(d) if p and p[0] != "prompt"]))
        d = replaced(d, path, draw(weird))
    elif kind == "hostile":
        path = draw(st.sampled_from([p for p in places(d) if p and p[-1] == "text"]))
        d = replaced(d, path, draw(st.sampled_from(HOSTILE)))
    data = json.dumps(d).encode()
    if kind == "cut":  # any proper prefix of a JSON object is no JSON
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif kind == "bytes":
        data = draw(st.binary(min_size=1, max_size=64))
    return kind, data


@pytest.mark.browser
def test_fuzzed_trace_uploads_replay_or_are_refused_in_one_line(app, browser, tmp_path_factory):
    url, _, before = app
    folder = tmp_path_factory.mktemp("uploads")
    base = before.to_dict()
    outcomes = []

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.get_by_role("tab", name="Traces").click()

    @UPLOADS
    @given(upload=trace_files(base))
    def one(upload):
        kind, data = upload
        marker = f"upload-marker-{len(outcomes):06d}"  # as long as MARKER: a cut stays where it was drawn
        path = folder / f"{marker}.json"
        path.write_bytes(data.replace(MARKER.encode(), marker.encode()))
        # One page takes every file: the last one's toast closed, the file shown cleared.
        for close in page.locator("[data-testid=toast-close]").all():
            close.click()
        page.wait_for_function("!document.querySelector('[data-testid=toast-text]')")
        if page.locator("#trace-upload button[aria-label=Clear]").count():
            page.click("#trace-upload button[aria-label=Clear]")
        page.set_input_files("#trace-upload input[type=file]", str(path))
        page.wait_for_function(
            "([m]) => document.querySelector('#trace-summary').innerText.includes(m) || "
            "document.querySelector('[data-testid=toast-text]')",
            arg=[marker],
            timeout=60_000,
        )
        time.sleep(0.5)  # an error later in the upload's chain would show by now
        toasts = [t.strip() for t in page.locator("[data-testid=toast-text]").all_inner_texts()]
        replayed = marker in page.inner_text("#trace-summary")
        assert page.evaluate("window.__pwned") is None, "a script from the file ran"
        if replayed:
            assert toasts == [], f"a replayed trace also raised {toasts}"
        else:
            assert len(toasts) == 1, toasts
            assert "\n" not in toasts[0] and "Traceback" not in toasts[0] and UNEXPECTED not in toasts[0], toasts[0]
        if kind in ("cut", "bytes"):
            assert not replayed, f"a {kind} file replayed"
        if kind == "hostile":
            assert replayed, f"a real trace with hostile token text was refused: {toasts}"
        outcomes.append(replayed)

    one()
    print(f"uploads: {outcomes.count(True)} replayed, {outcomes.count(False)} refused")
    assert True in outcomes and False in outcomes, "the files were a mix of replayable and refused ones"

    # The same page still serves a run.
    page.get_by_role("tab", name="Live run").click()
    page.fill("#prompt textarea", PROMPT)
    page.click("#run")
    page.wait_for_selector("#tokens [data-state=done]", timeout=120_000)
    page.close()
