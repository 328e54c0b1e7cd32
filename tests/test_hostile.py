"""A hostile visitor against `python app.py`, launched for real as a public page on 127.0.0.1.

Every case a visitor can send to take the page down goes in through each door it has: the
named API endpoints (gradio_client), the page's own events by fn_index over raw HTTP (POST
/gradio_api/queue/join, then the /gradio_api/queue/data stream), the MCP tools and
/gradio_api/upload. Each must be refused in one line within REFUSAL_S, and a good request
must then succeed in the same process. Crash-sized cases are sent at a size that would have
cost the process gigabytes or hours before the limits (a position label of 10^10, k_max of
4e8, a JSON nested a million deep), never at a size this machine cannot hold.

The cases whose fix lives elsewhere are marked by what they cover: the prompt's size and the
direct /run/ route (the public page's queue), trace uploads (the trace schema), Stop during a
long run. The measurements go to test-artifacts/hostile.json.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import asdict, dataclass

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from app_server import ARTIFACTS, launched_app, save_tiny_pair
from viz_sample import spec_trace

pytestmark = pytest.mark.app

REFUSAL_S = 1.0
GOOD_SPEEDUP = {"alpha": 0.8, "k": 4, "target_ms": 30.0, "draft_ms": 5.0}
MEASURED: list[dict] = []
PROM = ('vllm:spec_decode_num_drafts_total{{model_name="{m}"}} 10\n'
        'vllm:spec_decode_num_draft_tokens_total{{model_name="{m}"}} 40\n'
        'vllm:spec_decode_num_accepted_tokens_total{{model_name="{m}"}} 20\n')


def per_position(position: str, model: str = "m") -> str:
    return PROM.format(m=model) + (f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name="{model}",'
                                   f'position="{position}"}} 3\n')


def histogram(n: int) -> str:
    return json.dumps({"metrics": {"speculative_decoding": {"num_spec_steps": n, "num_draft_tokens": n,
                                                            "num_accepted_draft_tokens": 0,
                                                            "acceptance_histogram": [1] * n}}})


# (case, what the refusal names, read_metrics' payload)
METRICS = [
    ("position label 10^10", "SPECVIZ_MAX_POSITIONS", per_position("10000000000")),
    ("position label 10^6", "SPECVIZ_MAX_POSITIONS", per_position("1000000")),
    ("label of 20,000 characters", "SPECVIZ_MAX_METRICS_LINE",
     PROM.format(m="m") + 'vllm:spec_decode_num_drafts_total{model_name="' + "a" * 20_000 + '"} 1\n'),
    ("acceptance_histogram of 30,000 entries", "SPECVIZ_MAX_POSITIONS", histogram(30_000)),
    ("payload of 3 MB", "SPECVIZ_MAX_METRICS_BYTES", "#" + "x" * 3_000_000),
    ("JSON nested a million deep", "nests too deeply", "[" * 1_000_000 + "]" * 1_000_000),
]
# (case, tool, arguments, what the refusal names)
TOOLS = [
    ("best_k k_max 5,000,000", "best_k", {"alpha": 0.8, "target_ms": 30, "draft_ms": 5, "k_max": 5_000_000},
     "SPECVIZ_MAX_K"),
    ("best_k k_max 4e8", "best_k", {"alpha": 0.8, "target_ms": 30, "draft_ms": 5, "k_max": 400_000_000}, "SPECVIZ_MAX_K"),
    ("speedup k 10^9", "speedup", {"alpha": 0.8, "k": 10**9, "target_ms": 30, "draft_ms": 5}, "SPECVIZ_MAX_K"),
    ("lossless p and q of 200,000 entries", "lossless_check",
     {"p": ",".join(["0.000005"] * 200_000), "q": ",".join(["0.000005"] * 200_000)}, "SPECVIZ_MAX_DISTRIBUTION_CHARS"),
    ("lossless p and q of 5,000 short entries", "lossless_check", {"p": ",".join(["0"] * 5_000), "q": "1"},
     "SPECVIZ_MAX_DISTRIBUTION"),
    ("lossless 10^12 samples", "lossless_check", {"p": "0.5,0.5", "q": "0.9,0.1", "samples": 10**12}, "SPECVIZ_MAX_SAMPLES"),
    ("a pair of 100,000 characters", "export_settings", {"format": "vllm", "pair": "a/b" * 33_334},
     "SPECVIZ_MAX_PAIR_CHARS"),
]


@dataclass
class Answer:
    case: str
    door: str
    seconds: float
    size: int  # bytes of the answer as it came back
    error: str | None  # the refusal, or None where the request succeeded
    output: object = None


def record(a: Answer) -> Answer:
    MEASURED.append({k: v for k, v in asdict(a).items() if k != "output"})
    return a


def refused(a: Answer, names: str | None = None) -> None:
    """One line, within REFUSAL_S, naming what it should; never a traceback."""
    assert a.error is not None, f"{a.case} ({a.door}) was not refused: {str(a.output)[:300]}"
    line = detail(a.error).strip()
    assert "\n" not in line and "Traceback" not in line, line[:500]
    assert names is None or names.lower() in line.lower(), line[:500]
    assert a.seconds < REFUSAL_S, f"{a.case} ({a.door}) took {a.seconds:.2f} s"


def detail(text: str) -> str:
    """An HTTP refusal's message: the JSON body's detail, where it has one."""
    try:
        body = json.loads(text)
    except ValueError:
        return text
    return str(body.get("detail", text)) if isinstance(body, dict) else text


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    spec = save_tiny_pair(tmp_path_factory.mktemp("tiny-pair"))
    env = {"SPECVIZ_DEFAULT_PAIR": spec, "SPECVIZ_PRELOAD": "0", "SPECVIZ_PUBLIC": "1", "SPECVIZ_MCP": "1",
           "OMP_NUM_THREADS": "1"}
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
    """The page's events by name: fn_index, as the browser calls them."""
    config = httpx.get(f"{app}config", timeout=30).json()
    return {d["api_name"]: d["id"] for d in config["dependencies"] if d.get("api_name")}


def api(client: Client, case: str, name: str, **kw) -> Answer:
    start = time.perf_counter()
    try:
        out = client.predict(api_name=f"/{name}", **kw)
        return record(Answer(case, f"api /{name}", time.perf_counter() - start, len(str(out)), None, out))
    except AppError as e:
        return record(Answer(case, f"api /{name}", time.perf_counter() - start, len(str(e)), str(e)))
    except httpx.HTTPStatusError as e:  # refused before the queue took it
        text = e.response.text or str(e.response.status_code)
        return record(Answer(case, f"api /{name}", time.perf_counter() - start, len(e.response.content), text))


def page(url: str, events: dict[str, int], case: str, name: str, data: list) -> Answer:
    """The page's event `name` called by fn_index, as any HTTP client can."""
    session = uuid.uuid4().hex
    start = time.perf_counter()
    with httpx.Client(base_url=f"{url}gradio_api/", timeout=60) as http:
        joined = http.post("queue/join", json={"data": data, "fn_index": events[name], "session_hash": session,
                                               "event_data": None, "trigger_id": None})
        if joined.status_code != 200:
            return record(Answer(case, f"page {name}", time.perf_counter() - start, len(joined.content),
                                 joined.text or str(joined.status_code)))
        body, last = b"", None
        with http.stream("GET", "queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                body += line.encode() + b"\n"
                if line.startswith("data:") and '"process_completed"' in line:
                    last = json.loads(line[5:])
                    break
    seconds = time.perf_counter() - start
    if last is None or not last.get("success"):
        error = ((last or {}).get("output") or {}).get("error") or "refused without a message"
        return record(Answer(case, f"page {name}", seconds, len(body), error))
    return record(Answer(case, f"page {name}", seconds, len(body), None, last["output"]["data"]))


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
                    out.append(record(Answer(case, f"mcp {tool}", time.perf_counter() - start, len(text),
                                             text if got.isError else None, text)))
        return out

    return asyncio.run(talk())


def still_serving(client: Client) -> None:
    """A good request, answered right, in the same process."""
    got = json.loads(client.predict(api_name="/speedup", **GOOD_SPEEDUP))
    assert got["tokens_per_round"] == pytest.approx(3.3616)


# --- metrics payloads, k_max, speedup, the Lossless lab, pair strings ----------------------------


@pytest.mark.parametrize("case, names, payload", METRICS, ids=[c[0] for c in METRICS])
def test_a_metrics_payload_is_refused_through_the_api_and_the_page(client, app, events, case, names, payload):
    refused(api(client, case, "read_metrics", payload=payload, target_ms=30.0), names)
    refused(page(app, events, case, "metrics_views", [payload, None, "typed", 30, 0, 0, None]), names)
    still_serving(client)


@pytest.mark.parametrize("case, tool, args, names", TOOLS, ids=[c[0] for c in TOOLS])
def test_a_tool_argument_over_its_limit_is_refused_through_the_api(client, case, tool, args, names):
    refused(api(client, case, tool, **args), names)
    still_serving(client)


def test_the_mcp_tools_refuse_the_same_cases(app, client):
    calls = [(c, "read_metrics", {"payload": p, "target_ms": 30.0}) for c, _, p in METRICS]
    calls += [(c, t, a) for c, t, a, _ in TOOLS]
    answers = mcp_calls(app, calls + [("good call", "speedup", GOOD_SPEEDUP)])
    names = [n for _, n, _ in METRICS] + [n for *_, n in TOOLS]
    for a, n in zip(answers, names):
        refused(a, n)
    assert answers[-1].error is None and json.loads(answers[-1].output)["speedup"] > 1
    still_serving(client)


def test_the_page_events_refuse_the_lossless_and_sweep_cases(app, events, client):
    many = ",".join(["0.000005"] * 200_000)
    refused(page(app, events, "lossless p of 200,000 entries", "simulate", [many, many, 1_000_000, 0]),
            "SPECVIZ_MAX_DISTRIBUTION_CHARS")
    refused(page(app, events, "bug gallery q of 5,000 entries", "simulate_bugs",
                 ["1", ",".join(["0"] * 5_000), 1_000_000, 0, 0.7]), "SPECVIZ_MAX_DISTRIBUTION")
    refused(page(app, events, "sweep of 9 temperatures", "sweep",
                 [None, None, ",".join(str(t / 10) for t in range(9))]), "SPECVIZ_MAX_TEMPERATURES")
    refused(page(app, events, "sweep list of 100,000 characters", "sweep", [None, None, "0," * 50_000]),
            "SPECVIZ_MAX_TEMPERATURES_CHARS")
    # Draws outside the page's own choices are refused as well (by the dropdown's choices or the limit).
    refused(page(app, events, "lossless 10^12 draws", "simulate", ["0.5,0.5", "0.9,0.1", 10**12, 0]))
    still_serving(client)


def test_a_path_in_a_pair_gets_one_answer_whether_it_exists_or_not(client, tmp_path):
    there = tmp_path / "model"
    there.mkdir()
    (there / "config.json").write_text("{}")
    # Each existing path beside a missing one of the same length: the answers must match but for the path.
    for real, missing in ((str(there), str(tmp_path / "nodel")), ("/etc", "/etx"), ("/etc/passwd", "/etc/passwx")):
        answers = [api(client, f"export_settings with {what} path", "export_settings", format="vllm",
                       pair=f"{p} -> {p}") for what, p in (("an existing", real), ("a missing", missing))]
        for a in answers:
            refused(a)
        assert answers[0].error.replace(real, "X") == answers[1].error.replace(missing, "X"), answers
    still_serving(client)


def test_a_file_path_the_visitor_did_not_upload_is_not_read(app, events, client):
    a = page(app, events, "metrics file /etc/passwd", "metrics_views",
             [None, {"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}, "typed", 30, 0, 0, None])
    refused(a)
    assert "root:" not in a.error
    still_serving(client)


def test_a_model_name_with_markup_reaches_the_figure_escaped(app, events):
    link = '<a href="https://example.invalid/x">click</a>'
    a = page(app, events, "model_name with a link", "metrics_views",
             [per_position("1", model=link.replace('"', '\\"')), None, "typed", 30, 0, 0, None])
    assert a.error is None, a.error
    figure = json.dumps(a.output[0])
    assert "&lt;a href=" in figure and "<a href" not in figure.replace("\\u003c", "<")


# --- others' cases: the prompt, the queue, trace uploads, Stop ------------------------------------


def test_prompt_size_is_refused_before_tokenizing(client):
    """The prompt's limit (a public page's): a 1 MB and a 20 MB prompt."""
    for size in (1_000_000, 20_000_000):
        refused(api(client, f"prompt of {size:,} characters", "generate", prompt="x" * size, max_new_tokens=8),
                "prompt")
    still_serving(client)


def test_no_endpoint_answers_outside_the_queue(app, events, client):
    """POST /gradio_api/run/<endpoint> would skip the queue and its limits (api_open=False)."""
    for name in ("generate", "speedup", "best_k", "read_metrics", "lossless_check", "export_settings"):
        start = time.perf_counter()
        r = httpx.post(f"{app}gradio_api/run/{name}", json={"data": [0.8, 4, 30, 5]}, timeout=30)
        record(Answer(f"POST /run/{name}", "http", time.perf_counter() - start, len(r.content),
                      None if r.status_code == 200 else r.text))
        assert r.status_code in (403, 404, 405), (name, r.status_code, r.text[:300])
    still_serving(client)


def upload(url: str, name: str, content: bytes) -> tuple[httpx.Response, float]:
    start = time.perf_counter()
    r = httpx.post(f"{url}gradio_api/upload", files={"files": (name, content, "application/json")}, timeout=60)
    return r, time.perf_counter() - start


def trace_with(tree_nodes: int = 0, depth: int = 1, t_end_s: float | None = None) -> bytes:
    trace = spec_trace().to_dict()
    first = trace["events"][0]
    if tree_nodes:
        first["tree"] = [{"parent": -1, "token": i + 1, "text": "a", "depth": 1, "q": 0.1, "p": None,
                          "decision": "unchecked"} for i in range(tree_nodes)]
    if depth > 1:
        first["tree"] = [{"parent": -1, "token": 1, "text": "a", "depth": depth, "q": 0.1, "p": None,
                          "decision": "unchecked"}]
    if t_end_s is not None:
        trace["events"][-1]["t_end_s"] = t_end_s
    return json.dumps(trace).encode()


@pytest.mark.parametrize("case, content", [
    ("a flat tree of 600 nodes", trace_with(tree_nodes=600)),
    ("one node at depth 2,000,000", trace_with(depth=2_000_000)),
    ("a round ending at 10^12 s", trace_with(t_end_s=1e12)),
], ids=["600 nodes", "depth 2e6", "t_end_s 1e12"])
def test_a_trace_upload_out_of_bounds_is_refused(app, events, client, case, content):
    """Trace uploads: the trace schema's bounds."""
    r, _ = upload(app, "trace.json", content)
    assert r.status_code == 200, r.text[:300]
    path = r.json()[0]
    a = page(app, events, case, "read_upload", [{"path": path, "orig_name": "trace.json",
                                               "meta": {"_type": "gradio.FileData"}}])
    refused(a)
    still_serving(client)


def test_an_upload_too_large_is_refused_before_it_is_kept(app, client):
    """Uploads: Gradio's max_file_size."""
    r, seconds = upload(app, "big.json", b" " * (60 << 20))
    record(Answer("upload of 60 MB", "upload", seconds, len(r.content), None if r.status_code == 200 else r.text))
    assert r.status_code in (400, 413), (r.status_code, r.text[:300])
    assert seconds < 10 * REFUSAL_S  # the bytes themselves have to arrive first
    still_serving(client)


def test_stop_ends_a_long_run_and_the_next_run_is_served(client):
    """Stop: a long run cancelled, then a good run of the same pair in the same process."""
    job = client.submit(api_name="/generate", prompt="hello range", max_new_tokens=1024)
    deadline = time.monotonic() + 120
    while not job.outputs() and time.monotonic() < deadline:
        time.sleep(0.1)
    job.cancel()
    start = time.perf_counter()
    out = client.predict(api_name="/generate_summary", prompt="for i in range(10):", max_new_tokens=8)
    record(Answer("a run after a cancelled long run", "api /generate_summary", time.perf_counter() - start,
                  len(out), None))
    assert json.loads(out)["summary"]["new_tokens"] >= 1
