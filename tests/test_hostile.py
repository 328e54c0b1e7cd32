"""A hostile visitor against `python app.py`, launched for real as a public page on 127.0.0.1.

Every case a visitor can send to take the page down goes in through each door it has: the
named API endpoints (gradio_client), the page's own events by fn_index over raw HTTP (POST
/gradio_api/queue/join, then the /gradio_api/queue/data stream), the MCP tools and
/gradio_api/upload. Each must be refused in one line within REFUSAL_S, and a good request
must then succeed in the same process. The cases live in tests/hostile_cases.py (the soak's
hostile client sends the same ones), at crash size but bounded so this machine survives.

Cases whose fix lives elsewhere are here too, marked by what they cover, so that this module
is the one place to read them all: the prompt's size and the direct /run/ route (the public
page's queue), trace uploads (the trace schema), Stop during a long run. The measurements go
to test-artifacts/hostile.json.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import httpx
import pytest
from gradio_client import Client

import hostile_cases as hc
from app_server import ARTIFACTS, launched_app, save_tiny_pair

pytestmark = pytest.mark.app

REFUSAL_S = 1.0
MEASURED: list[dict] = []


@dataclass
class Answer:
    case: str
    door: str
    seconds: float
    size: int  # bytes of the answer as it came back
    error: str | None  # the refusal, or None where the request was served
    output: object = None


def record(case: str, door: str, r: hc.Reply) -> Answer:
    a = Answer(case, door, r.seconds, r.size, r.error, r.output)
    MEASURED.append({k: v for k, v in asdict(a).items() if k != "output"})
    return a


def refused(a: Answer, names: str | None = None) -> None:
    """One line, within REFUSAL_S, naming what it should; never a traceback."""
    assert a.error is not None, f"{a.case} ({a.door}) was not refused: {str(a.output)[:300]}"
    line = hc.detail(a.error).strip()
    assert hc.one_line(a.error), line[:500]
    assert names is None or names.lower() in line.lower(), line[:500]
    assert a.seconds < REFUSAL_S, f"{a.case} ({a.door}) took {a.seconds:.2f} s"


UPLOADS_MEMORY = 200_000_000  # SPECVIZ_MAX_UPLOADS_MEMORY here: the largest legal trace (18 MB) is over it


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> str:
    return save_tiny_pair(tmp_path_factory.mktemp("tiny-pair"))


@pytest.fixture(scope="module")
def app(spec):
    env = {
        "SPECVIZ_DEFAULT_PAIR": spec,
        "SPECVIZ_PRELOAD": "0",
        "SPECVIZ_PUBLIC": "1",
        "SPECVIZ_MCP": "1",
        "OMP_NUM_THREADS": "1",
        "SPECVIZ_MAX_UPLOADS_MEMORY": str(UPLOADS_MEMORY),
        # Each case's own refusal is what these tests read: no door after the first few
        # (app/strikes.py; tests/test_public_door.py).
        "SPECVIZ_MAX_REFUSED_PER_MINUTE": "0",
    }
    with launched_app(env, "app-hostile") as url:
        yield url
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "hostile.json").write_text(json.dumps(MEASURED, indent=1))


@pytest.fixture(scope="module")
def client(app):
    c = Client(app, verbose=False)
    still_serving(c)  # the first call of a fresh process imports and warms what the others then time
    return c


@pytest.fixture(scope="module")
def events(app) -> dict[str, int]:
    return hc.events(app)


def api(client: Client, case: str, name: str, **kw) -> Answer:
    return record(case, f"api /{name}", hc.api_reply(client, name, **kw))


def page(url: str, events: dict[str, int], case: str, name: str, data: list) -> Answer:
    return record(case, f"page {name}", hc.page_event(url, events[name], data))


def mcp_calls(url: str, calls: list[tuple[str, str, dict]]) -> list[Answer]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def talk():
        out = []
        async with streamable_http_client(f"{url}gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for case, tool, args in calls:
                    start = time.perf_counter()
                    got = await session.call_tool(tool, args)
                    text = "".join(getattr(c, "text", "") for c in got.content)
                    reply = hc.Reply(time.perf_counter() - start, len(text), text if got.isError else None, text)
                    out.append(record(case, f"mcp {tool}", reply))
        return out

    return asyncio.run(talk())


def still_serving(client: Client) -> None:
    """A good request, answered right, in the same process."""
    got = json.loads(client.predict(api_name="/speedup", **hc.GOOD_SPEEDUP))
    assert got["tokens_per_round"] == pytest.approx(3.3616)


# --- metrics payloads, k_max, speedup, the Lossless lab, the sweep, pair strings ----------------


@pytest.mark.parametrize("case, names, payload", hc.METRICS, ids=[c[0] for c in hc.METRICS])
def test_a_metrics_payload_is_refused_through_the_api_and_the_page(client, app, events, case, names, payload):
    refused(api(client, case, "read_metrics", payload=payload, target_ms=30.0), names)
    refused(page(app, events, case, "metrics_views", [payload, None, "typed", 30, 0, 0, None]), names)
    still_serving(client)


@pytest.mark.parametrize("case, tool, args, names", hc.TOOLS, ids=[c[0] for c in hc.TOOLS])
def test_a_tool_argument_over_its_limit_is_refused_through_the_api(client, case, tool, args, names):
    refused(api(client, case, tool, **args), names)
    still_serving(client)


def test_the_mcp_tools_refuse_the_same_cases(app, client):
    calls = [(c, "read_metrics", {"payload": p, "target_ms": 30.0}) for c, _, p in hc.METRICS]
    calls += [(c, t, a) for c, t, a, _ in hc.TOOLS]
    answers = mcp_calls(app, calls + [("good call", "speedup", hc.GOOD_SPEEDUP)])
    for a, names in zip(answers, [n for _, n, _ in hc.METRICS] + [n for *_, n in hc.TOOLS]):
        refused(a, names)
    assert answers[-1].error is None and json.loads(answers[-1].output)["speedup"] > 1
    still_serving(client)


@pytest.mark.parametrize("case, event, data, names", hc.PAGE, ids=[c[0] for c in hc.PAGE])
def test_the_page_events_refuse_the_lossless_and_sweep_cases(app, events, client, case, event, data, names):
    a = page(app, events, case, event, data)
    refused(a, names)
    short(a)
    still_serving(client)


def test_a_path_in_a_pair_gets_one_answer_whether_it_exists_or_not(client, tmp_path):
    there = tmp_path / "model"
    there.mkdir()
    (there / "config.json").write_text("{}")
    # Each existing path beside a missing one of the same length: the answers must match but for the path.
    for real, missing in ((str(there), str(tmp_path / "nodel")), ("/etc", "/etx"), ("/etc/passwd", "/etc/passwx")):
        answers = [
            api(client, f"export_settings with {what} path", "export_settings", format="vllm", pair=f"{p} -> {p}")
            for what, p in (("an existing", real), ("a missing", missing))
        ]
        for a in answers:
            refused(a)
        assert answers[0].error.replace(real, "X") == answers[1].error.replace(missing, "X"), answers
    still_serving(client)


def test_a_file_path_the_visitor_did_not_upload_is_not_read(app, events, client):
    a = page(
        app,
        events,
        "metrics file /etc/passwd",
        "metrics_views",
        [None, hc.uploaded("/etc/passwd"), "typed", 30, 0, 0, None],
    )
    refused(a)
    assert "root:" not in a.error
    still_serving(client)


def test_a_model_name_with_markup_reaches_the_figure_escaped(app, events):
    link = '<a href="https://example.invalid/x">click</a>'
    a = page(
        app,
        events,
        "model_name with a link",
        "metrics_views",
        [hc.per_position("1", model=link.replace('"', '\\"')), None, "typed", 30, 0, 0, None],
    )
    assert a.error is None, a.error
    figure = json.dumps(a.output[0])
    assert "&lt;a href=" in figure and "<a href" not in figure.replace("\\u003c", "<")


# --- others' cases: the prompt, the queue, trace uploads, Stop ------------------------------------


def test_prompt_size_is_refused_before_tokenizing(client):
    """The prompt's limit (a public page's): a 1 MB and a 20 MB prompt."""
    refused(
        api(client, "prompt of 1,000,000 characters", "generate", prompt="x" * 1_000_000, max_new_tokens=8),
        "SPECVIZ_MAX_PROMPT_CHARS",
    )
    # Past the request's own limit the body is refused before anything reads it.
    refused(
        api(client, "prompt of 20,000,000 characters", "generate", prompt="x" * 20_000_000, max_new_tokens=8),
        "SPECVIZ_MAX_",
    )
    still_serving(client)


def test_no_endpoint_answers_outside_the_queue(app, client):
    """POST /gradio_api/run/<endpoint> would skip the queue and its limits (api_open=False)."""
    for name in ("generate", "speedup", "best_k", "read_metrics", "lossless_check", "export_settings"):
        start = time.perf_counter()
        r = httpx.post(f"{app}gradio_api/run/{name}", json={"data": [0.8, 4, 30, 5]}, timeout=30)
        record(
            f"POST /run/{name}",
            "http",
            hc.Reply(time.perf_counter() - start, len(r.content), None if r.status_code == 200 else r.text),
        )
        assert r.status_code in (403, 404, 405), (name, r.status_code, r.text[:300])
    still_serving(client)


@pytest.mark.parametrize("case, content", hc.TRACES, ids=[c[0] for c in hc.TRACES])
def test_a_trace_upload_out_of_bounds_is_refused(app, events, client, case, content):
    """Trace uploads: the trace schema's bounds."""
    r, _ = hc.upload(app, "trace.json", content)
    assert r.status_code == 200, r.text[:300]
    refused(page(app, events, case, "read_upload", [hc.uploaded(r.json()[0])]))
    still_serving(client)


def test_an_upload_too_large_is_refused_before_it_is_kept(app, client):
    """Uploads: Gradio's max_file_size."""
    r, seconds = hc.upload(app, "big.json", b" " * (60 << 20))
    record("upload of 60 MB", "upload", hc.Reply(seconds, len(r.content), None if r.status_code == 200 else r.text))
    assert r.status_code in (400, 413), (r.status_code, r.text[:300])
    assert seconds < 10 * REFUSAL_S  # the bytes themselves have to arrive first
    still_serving(client)


@contextmanager
def model_busy(client: Client):
    """A long run holding the model's one slot meanwhile."""
    job = client.submit(api_name="/generate", prompt="hello range", max_new_tokens=1024)
    deadline = time.monotonic() + 120
    while not job.outputs() and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        assert job.outputs() and not job.done(), "the long run should hold the model slot"
        yield
    finally:
        job.cancel()


def test_a_sweep_is_refused_without_waiting_behind_the_run_that_holds_the_model(app, events, client):
    """Events that run a model wait for its one slot: the sweep's temperatures are checked as
    its request asks to join the queue (a validator), not after the runs ahead of it."""
    with model_busy(client):
        refused(
            page(
                app,
                events,
                "sweep of 9 temperatures, model busy",
                "sweep",
                [None, None, ",".join(str(t / 10) for t in range(9))],
            ),
            "SPECVIZ_MAX_TEMPERATURES",
        )


def test_a_prompt_is_refused_without_waiting_behind_the_run_that_holds_the_model(client):
    """The prompt's size (the public page's queue), as the sweep's temperatures above."""
    with model_busy(client):
        refused(
            api(
                client,
                "prompt of 1,000,000 characters, model busy",
                "generate",
                prompt="x" * 1_000_000,
                max_new_tokens=8,
            ),
            "prompt",
        )


def test_stop_ends_a_long_run_and_the_next_run_is_served(client):
    """Stop: a long run cancelled, then a good run of the same pair in the same process."""
    job = client.submit(api_name="/generate", prompt="hello range", max_new_tokens=1024)
    deadline = time.monotonic() + 120
    while not job.outputs() and time.monotonic() < deadline:
        time.sleep(0.1)
    job.cancel()
    start = time.perf_counter()
    out = client.predict(api_name="/generate_summary", prompt="for i in range(10):", max_new_tokens=8)
    record(
        "a run after a cancelled long run",
        "api /generate_summary",
        hc.Reply(time.perf_counter() - start, len(out), None),
    )
    assert json.loads(out)["summary"]["new_tokens"] >= 1


# --- declared types, uploads held in memory, server details ------------------------------------------


def short(a: Answer) -> None:
    """A refusal repeats at most 200 characters of what came: never the list or the text."""
    line = hc.detail(a.error)
    assert len(line) <= 200 and "0.5, 0.5" not in line and "9999" not in line, line[:300]


@pytest.mark.parametrize("case, name, args, param", hc.DECLARED, ids=[c[0] for c in hc.DECLARED])
def test_a_declared_number_refuses_anything_else_through_the_api_and_fn_index(
    app, client, events, case, name, args, param
):
    a = api(client, case, name, **args)
    refused(a, f"{param} must be")
    short(a)
    values = [args.get(p, d) for p, d in hc.defaults(client, name)]
    b = page(app, events, case, name, values)
    refused(b, f"{param} must be")
    short(b)
    still_serving(client)


def test_nan_and_infinity_written_by_hand_are_refused(app, client):
    for case, name, body, param in hc.RAW_DECLARED:
        a = record(case, f"http /call/{name}", hc.raw_call(app, name, body))
        refused(a, f"{param} must be")
    still_serving(client)


def test_the_mcp_tools_refuse_what_their_types_do_not_declare(app, client):
    cases = [c for c in hc.DECLARED if c[1] in ("speedup", "best_k", "read_metrics", "lossless_check")]
    answers = mcp_calls(app, [(c, t, a) for c, t, a, _ in cases])
    for a, (*_, param) in zip(answers, cases):
        refused(a, param)
        short(a)
    still_serving(client)


def test_a_declared_type_is_refused_without_waiting_behind_the_run_that_holds_the_model(client):
    with model_busy(client):
        a = api(
            client,
            "generate max_new_tokens as a list, model busy",
            "generate",
            prompt="hi",
            max_new_tokens=hc.LONG_LIST,
        )
        refused(a, "max_new_tokens must be")


@pytest.mark.parametrize("case, make, names", hc.UPLOADS, ids=[c[0] for c in hc.UPLOADS])
def test_an_upload_holding_more_than_its_schema_allows_is_refused(app, events, client, case, make, names):
    r, seconds = hc.upload(app, "trace.json", make())
    assert r.status_code == 200, r.text[:300]
    a = page(app, events, case, "read_upload", [hc.uploaded(r.json()[0])])
    refused(a, names)
    short(a)
    still_serving(client)


def test_an_upload_past_the_memory_all_uploads_may_hold_is_refused_before_it_is_read(app, events, client):
    data = hc.largest_run()
    assert 13 * len(data) > UPLOADS_MEMORY
    r, _ = hc.upload(app, "trace.json", data)
    assert r.status_code == 200, r.text[:300]
    a = page(
        app, events, "the largest legal trace, over the uploads' memory", "read_upload", [hc.uploaded(r.json()[0])]
    )
    refused(a, "SPECVIZ_MAX_UPLOADS_MEMORY")
    r, _ = hc.upload(app, "trace.json", hc.trace_with())  # a small one still loads
    assert page(app, events, "a small trace after it", "read_upload", [hc.uploaded(r.json()[0])]).error is None
    still_serving(client)


def test_a_public_page_names_no_server_paths_cpu_or_versions(app, client, spec):
    import torch
    import transformers

    from specviz.lm.timing import cpu_name

    run = client.predict(prompt="hello range", max_new_tokens=4, api_name="/generate")
    status = client.predict("", api_name="/status")
    components = httpx.get(f"{app}config", timeout=30).json()["components"]
    # The header: the pair selector names the operator's own default pair as the operator wrote it.
    header = next(json.dumps(c) for c in components if c.get("props", {}).get("elem_id") == "model-status")
    export = client.predict(format="vllm", pair=spec, api_name="/export_settings")
    error = api(client, "llama.cpp export of a folder pair", "export_settings", format="llamacpp", pair=spec).error
    folder = spec.split(" -> ")[0].rsplit("/", 1)[0]
    for what, text in (("trace", run), ("status", status), ("header", header), ("export", export), ("error", error)):
        for detail in (folder, cpu_name(), f"torch {torch.__version__}", torch.__version__, transformers.__version__):
            assert detail not in text, (what, detail)
    assert "tiny-target" in export  # named by its folder's name alone
