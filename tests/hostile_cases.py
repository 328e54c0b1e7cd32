"""The hostile visitor's cases and doors, shared by tests/test_hostile.py and the soak's
hostile client (scripts/soak.py --hostile): one list, so both send the same requests.

Each case is sent at the size that used to cost the process gigabytes or hours (a position
label of 10^10, k_max of 4e8, a JSON nested a million deep), never at a size that would
take down the machine that sends it.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

import httpx

from viz_sample import spec_trace

GOOD_SPEEDUP = {"alpha": 0.8, "k": 4, "target_ms": 30.0, "draft_ms": 5.0}
PROM = (
    'vllm:spec_decode_num_drafts_total{{model_name="{m}"}} 10\n'
    'vllm:spec_decode_num_draft_tokens_total{{model_name="{m}"}} 40\n'
    'vllm:spec_decode_num_accepted_tokens_total{{model_name="{m}"}} 20\n'
)


def per_position(position: str, model: str = "m") -> str:
    return PROM.format(m=model) + (
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name="{model}",position="{position}"}} 3\n'
    )


def histogram(n: int) -> str:
    return json.dumps(
        {
            "metrics": {
                "speculative_decoding": {
                    "num_spec_steps": n,
                    "num_draft_tokens": n,
                    "num_accepted_draft_tokens": 0,
                    "acceptance_histogram": [1] * n,
                }
            }
        }
    )


# (case, what the refusal names, read_metrics' payload)
METRICS = [
    ("position label 10^10", "SPECVIZ_MAX_POSITIONS", per_position("10000000000")),
    ("position label 10^6", "SPECVIZ_MAX_POSITIONS", per_position("1000000")),
    (
        "label of 20,000 characters",
        "SPECVIZ_MAX_METRICS_LINE",
        PROM.format(m="m") + 'vllm:spec_decode_num_drafts_total{model_name="' + "a" * 20_000 + '"} 1\n',
    ),
    ("acceptance_histogram of 30,000 entries", "SPECVIZ_MAX_POSITIONS", histogram(30_000)),
    ("payload of 3 MB", "SPECVIZ_MAX_METRICS_BYTES", "#" + "x" * 3_000_000),
    ("JSON nested a million deep", "nests too deeply", "[" * 1_000_000 + "]" * 1_000_000),
]
# (case, tool, arguments, what the refusal names)
TOOLS = [
    (
        "best_k k_max 5,000,000",
        "best_k",
        {"alpha": 0.8, "target_ms": 30, "draft_ms": 5, "k_max": 5_000_000},
        "SPECVIZ_MAX_K",
    ),
    (
        "best_k k_max 4e8",
        "best_k",
        {"alpha": 0.8, "target_ms": 30, "draft_ms": 5, "k_max": 400_000_000},
        "SPECVIZ_MAX_K",
    ),
    ("speedup k 10^9", "speedup", {"alpha": 0.8, "k": 10**9, "target_ms": 30, "draft_ms": 5}, "SPECVIZ_MAX_K"),
    (
        "lossless p and q of 200,000 entries",
        "lossless_check",
        {"p": ",".join(["0.000005"] * 200_000), "q": ",".join(["0.000005"] * 200_000)},
        "SPECVIZ_MAX_DISTRIBUTION_CHARS",
    ),
    (
        "lossless p and q of 5,000 short entries",
        "lossless_check",
        {"p": ",".join(["0"] * 5_000), "q": "1"},
        "SPECVIZ_MAX_DISTRIBUTION",
    ),
    (
        "lossless 10^12 samples",
        "lossless_check",
        {"p": "0.5,0.5", "q": "0.9,0.1", "samples": 10**12},
        "SPECVIZ_MAX_SAMPLES",
    ),
    (
        "a pair of 100,000 characters",
        "export_settings",
        {"format": "vllm", "pair": "a/b" * 33_334},
        "SPECVIZ_MAX_PAIR_CHARS",
    ),
]


PAGE = [  # (case, event, its inputs, what the refusal names)
    (
        "lossless p of 200,000 entries",
        "simulate",
        [",".join(["0.000005"] * 200_000)] * 2 + [1_000_000, 0],
        "SPECVIZ_MAX_DISTRIBUTION_CHARS",
    ),
    (
        "bug gallery q of 5,000 entries",
        "simulate_bugs",
        ["1", ",".join(["0"] * 5_000), 1_000_000, 0, 0.7],
        "SPECVIZ_MAX_DISTRIBUTION",
    ),
    (
        "sweep of 9 temperatures",
        "sweep",
        [None, None, ",".join(str(t / 10) for t in range(9))],
        "SPECVIZ_MAX_TEMPERATURES",
    ),
    ("sweep list of 100,000 characters", "sweep", [None, None, "0," * 50_000], "SPECVIZ_MAX_TEMPERATURES_CHARS"),
    # Values of another type than the widget's: refused as the request joins the queue.
    ("theory alpha as a list of 400,000", "views", [[0.5] * 400_000, 4, 40, 4, None, None], "must be a number"),
    (
        "lossless draws as a string of 1,000,000",
        "simulate",
        ["0.5,0.5", "0.9,0.1", "9" * 1_000_000, 0],
        "must be one of",
    ),
    # Values outside a widget's own range or choices: Gradio refuses them before the handler.
    ("lossless 10^12 draws", "simulate", ["0.5,0.5", "0.9,0.1", 10**12, 0], None),
    ("theory k of 5,000,000", "views", [0.8, 5_000_000, 40, 4, None, None], "maximum value"),
    ("export format of 100,000 characters", "export_views", [None, "x" * 100_000], "must be one of"),
]


@dataclass
class Reply:
    seconds: float
    size: int  # bytes of the answer as it came back
    error: str | None  # the refusal, or None where the request was served
    output: object = None


# Headers every raw request below carries: the soak's hostile client names itself with the
# X-Forwarded-For entry a public page's trusted proxy would add (scripts/soak.py --public).
HEADERS: dict[str, str] = {}


def detail(text: str) -> str:
    """A refusal's message: an HTTP body's JSON detail, where it has one."""
    try:
        body = json.loads(text)
    except ValueError:
        return text
    found = body.get("detail", text) if isinstance(body, dict) else text
    if isinstance(found, list):  # a validator's verdicts, one per input: the refusals among them
        return "; ".join(v.get("message", "") for v in found if isinstance(v, dict) and v.get("is_valid") is False)
    return str(found)


def one_line(text: str) -> bool:
    line = detail(text).strip()
    return bool(line) and "\n" not in line and "Traceback" not in line


def api_reply(client, name: str, **kw) -> Reply:
    """A named API endpoint called through gradio_client."""
    from gradio_client.exceptions import AppError, ValidationError

    start = time.perf_counter()
    try:
        out = client.predict(api_name=f"/{name}", **kw)
        return Reply(time.perf_counter() - start, len(str(out)), None, out)
    except AppError as e:
        return Reply(time.perf_counter() - start, len(str(e)), str(e))
    except ValidationError as e:  # refused at the queue's door; the client heads its list of messages with a count
        lines = [line.split(": ", 1)[-1] for line in str(e).splitlines()[1:]]
        return Reply(time.perf_counter() - start, len(str(e)), "\n".join(lines))
    except httpx.HTTPStatusError as e:  # refused before the queue took it
        text = e.response.text or str(e.response.status_code)
        return Reply(time.perf_counter() - start, len(e.response.content), text)


def requests(url: str, client, fn_index: dict[str, int]) -> list[tuple[str, object]]:
    """Every case as (name, a call that sends it and returns its Reply), through the API and the
    page's events: what the soak's hostile client sends over and over."""
    out = []
    for case, _, payload in METRICS:
        out.append((case, lambda p=payload: api_reply(client, "read_metrics", payload=p, target_ms=30.0)))
        out.append(
            (case, lambda p=payload: page_event(url, fn_index["metrics_views"], [p, None, "typed", 30, 0, 0, None]))
        )
    out += [(case, lambda t=tool, a=args: api_reply(client, t, **a)) for case, tool, args, _ in TOOLS]
    out += [(case, lambda e=event, d=data: page_event(url, fn_index[e], d)) for case, event, data, _ in PAGE]
    for case, content in TRACES:
        out.append((case, lambda c=content: uploaded_trace(url, fn_index, c)))
    out.append(
        (
            "prompt of 1,000,000 characters",
            lambda: api_reply(client, "generate", prompt="x" * 1_000_000, max_new_tokens=8),
        )
    )
    return out


def events(url: str) -> dict[str, int]:
    """The page's events by name: fn_index, as the browser calls them."""
    config = httpx.get(f"{url}config", headers=HEADERS, timeout=30).json()
    return {d["api_name"]: d["id"] for d in config["dependencies"] if d.get("api_name")}


def page_event(url: str, fn_index: int, data: list) -> Reply:
    """A page event called by fn_index over raw HTTP, as any client can: join the queue, read
    the stream to the end of the event."""
    session = uuid.uuid4().hex
    start = time.perf_counter()
    with httpx.Client(base_url=f"{url}gradio_api/", headers=HEADERS, timeout=60) as http:
        joined = http.post(
            "queue/join",
            json={"data": data, "fn_index": fn_index, "session_hash": session, "event_data": None, "trigger_id": None},
        )
        if joined.status_code != 200:
            return Reply(time.perf_counter() - start, len(joined.content), joined.text or str(joined.status_code))
        body, last = b"", None
        with http.stream("GET", "queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                body += line.encode() + b"\n"
                if line.startswith("data:") and '"process_completed"' in line:
                    last = json.loads(line[5:])
                    break
    seconds = time.perf_counter() - start
    if last is None or not last.get("success"):
        return Reply(seconds, len(body), ((last or {}).get("output") or {}).get("error") or "refused without a message")
    return Reply(seconds, len(body), None, last["output"]["data"])


def upload(url: str, name: str, content: bytes) -> tuple[httpx.Response, float]:
    start = time.perf_counter()
    files = {"files": (name, content, "application/json")}
    r = httpx.post(f"{url}gradio_api/upload", files=files, headers=HEADERS, timeout=60)
    return r, time.perf_counter() - start


def trace_with(tree_nodes: int = 0, depth: int = 1, t_end_s: float | None = None) -> bytes:
    trace = spec_trace().to_dict()
    first = trace["events"][0]
    if tree_nodes:
        first["tree"] = [
            {"parent": -1, "token": i + 1, "text": "a", "depth": 1, "q": 0.1, "p": None, "decision": "unchecked"}
            for i in range(tree_nodes)
        ]
    if depth > 1:
        first["tree"] = [
            {"parent": -1, "token": 1, "text": "a", "depth": depth, "q": 0.1, "p": None, "decision": "unchecked"}
        ]
    if t_end_s is not None:
        trace["events"][-1]["t_end_s"] = t_end_s
    return json.dumps(trace).encode()


TRACES = [
    ("a flat tree of 600 nodes", trace_with(tree_nodes=600)),
    ("one node at depth 2,000,000", trace_with(depth=2_000_000)),
    ("a round ending at 10^12 s", trace_with(t_end_s=1e12)),
]


def uploaded_trace(url: str, fn_index: dict[str, int], content: bytes) -> Reply:
    """A trace uploaded, then read by the page's upload event."""
    r, seconds = upload(url, "trace.json", content)
    if r.status_code != 200:
        return Reply(seconds, len(r.content), r.text or str(r.status_code))
    reply = page_event(url, fn_index["read_upload"], [uploaded(r.json()[0])])
    return Reply(seconds + reply.seconds, reply.size, reply.error, reply.output)


def uploaded(path: str, name: str = "trace.json") -> dict:
    """An uploaded file as a page event takes it."""
    return {"path": path, "orig_name": name, "meta": {"_type": "gradio.FileData"}}


# --- declared types: a list, an object, a string, NaN or infinity where a number is declared ---

LONG_LIST = [0.5] * 400_000
# (case, endpoint, arguments, the parameter the refusal names); NaN and infinity, which a client's
# JSON writer refuses to send, go by raw HTTP (`raw_call`, RAW_DECLARED).
DECLARED = [
    ("best_k alpha as a list of 400,000", "best_k", {"alpha": LONG_LIST, "target_ms": 30.0, "draft_ms": 5.0}, "alpha"),
    (
        "speedup k as a list of 400,000",
        "speedup",
        {"alpha": 0.8, "k": LONG_LIST, "target_ms": 30.0, "draft_ms": 5.0},
        "k",
    ),
    (
        "speedup target_ms as an object",
        "speedup",
        {"alpha": 0.8, "k": 4, "target_ms": {"ms": 30}, "draft_ms": 5.0},
        "target_ms",
    ),
    (
        "read_metrics target_ms as a string of 1,000,000",
        "read_metrics",
        {"payload": "", "target_ms": "9" * 1_000_000},
        "target_ms",
    ),
    (
        "lossless_check samples as a list of 400,000",
        "lossless_check",
        {"p": "0.5,0.5", "q": "0.9,0.1", "samples": LONG_LIST},
        "samples",
    ),
    (
        "generate max_new_tokens as a list of 400,000",
        "generate",
        {"prompt": "hi", "max_new_tokens": LONG_LIST},
        "max_new_tokens",
    ),
    (
        "generate_summary temperature as a list of 400,000",
        "generate_summary",
        {"prompt": "hi", "temperature": LONG_LIST},
        "temperature",
    ),
]


# (case, endpoint, the body as written, the parameter the refusal names)
RAW_DECLARED = [
    ("speedup alpha NaN", "speedup", '{"data": [NaN, 4, 30, 5]}', "alpha"),
    ("speedup draft_ms Infinity", "speedup", '{"data": [0.8, 4, 30, Infinity]}', "draft_ms"),
    ("best_k target_ms -Infinity", "best_k", '{"data": [0.8, -Infinity, 5, 16]}', "target_ms"),
]


def raw_call(url: str, name: str, body: str) -> Reply:
    """An endpoint called over raw HTTP as any client can, with a body written by hand (NaN and
    Infinity are JSON to Python's reader): POST /call/<name>, then read its event stream."""
    start = time.perf_counter()
    with httpx.Client(base_url=f"{url}gradio_api/", headers=HEADERS, timeout=60) as http:
        r = http.post(f"call/{name}", content=body, headers={"content-type": "application/json"})
        if r.status_code != 200:
            return Reply(time.perf_counter() - start, len(r.content), r.text or str(r.status_code))
        got = http.get(f"call/{name}/{r.json()['event_id']}").text
    seconds = time.perf_counter() - start
    if "event: error" in got:
        return Reply(seconds, len(got), got.split("event: error", 1)[1].split("data:", 1)[-1].strip())
    return Reply(seconds, len(got), None, got)


# --- uploads: what a trace may hold, and the memory all uploads hold together --------------------


def compact(d: dict) -> bytes:
    return json.dumps(d, separators=(",", ":")).encode()


def with_metrics(n: int) -> bytes:
    """A trace whose metrics hold n short texts, each a Python object of its own once read."""
    trace = spec_trace().to_dict()
    trace["metrics"] = {"anything": [chr(65 + i % 26) + chr(65 + i // 26 % 26) for i in range(n)]}
    return compact(trace)


def with_note(text_chars: int) -> bytes:
    trace = spec_trace().to_dict()
    trace["meta"]["note"] = "x" * text_chars
    return compact(trace)


def largest_run() -> bytes:
    """A legal trace as large as the settings allow (tests/test_trace_limits.py's largest round,
    MAX_EVENTS times): about 18 MB."""
    word, top = "token_", [{"id": 1000 + i, "text": "token_", "p": 0.1, "q": 0.1} for i in range(10)]
    tree = [
        {"parent": -1 if d == 0 else i - 1, "token": 1000, "text": word, "depth": d + 1, "q": 0.5, "p": 0.25}
        | {"decision": "unchecked"}
        for i, d in enumerate(d for _ in range(16) for d in range(7))
    ]
    one = {
        "k": 7, "type": "round", "draft_ms": 10.5, "verify_ms": 100.25, "t_end_s": 100.5, "new_tokens": 1000,
        "emitted": {"id": 1000, "text": word, "p": 0.5, "kind": "bonus"},
        "drafted": [{"id": 1000, "text": word, "p": 0.5, "q": 1.0, "u": None, "decision": "accepted"}] * 7,
        "positions": [{"top": top, "overlap": 0.5, "top2_logit_gap": 1.5}] * 8, "tree": tree, "alignment": [],
        "source": {"method": "lookahead", "window": [[word] * 16] * 7, "ngrams": [[word] * 8] * 16,
                   "origins": ["context"] * len(tree), "window_on": True, "ride": 112},
    }  # fmt: skip
    trace = spec_trace().to_dict()
    trace["events"] = [one | {"index": i} for i in range(1024)]
    return compact(trace)


# (case, the file, what the refusal names)
UPLOADS = [
    # Refused by the count of its values, or by the uploads' memory where that bound is lower.
    ("metrics of 32 MB of short texts", lambda: with_metrics(6_400_000), "the limit is"),
    ("metrics of 100,000 short texts", lambda: with_metrics(100_000), "trace.metrics"),
    ("a note of 1,000,000 characters", lambda: with_note(1_000_000), "trace.meta.note"),
]


def defaults(client, name: str) -> list[tuple[str, object]]:
    """An endpoint's parameters and their defaults as its API info publishes them, in order."""
    info = client.view_api(print_info=False, return_format="dict")["named_endpoints"][f"/{name}"]
    return [(p["parameter_name"], p.get("parameter_default")) for p in info["parameters"]]


def most_objects() -> bytes:
    """A legal trace of as many small objects as its value count allows (rounds of 129
    positions of 32 top tokens each): the most memory a trace may hold, about 180 MB from 21 MB."""
    top = [{"id": 7, "text": "", "p": 0.5, "q": 0.5}] * 32
    one = {
        "k": 0, "type": "round", "draft_ms": 0, "verify_ms": 0, "t_end_s": 0, "new_tokens": 0, "emitted": None,
        "drafted": [], "positions": [{"top": top, "overlap": 0.5, "top2_logit_gap": 0.5}] * 129,
    }  # fmt: skip
    per_round = compact(one).count(b",") + 1
    trace = spec_trace().to_dict()
    trace["events"] = [one | {"index": i} for i in range((2_500_000 - 10_000) // per_round)]
    return compact(trace)
