"""The public page's edge, as a hostile visitor meets it: every body bounded (Gradio's file-upload
route matched exactly, with bounds of its own), each visitor's share of every queued event (MCP
calls included), and the visitor named by the address the proxy saw, never one the client wrote.

The first tests read the pieces (app/request_size.py, app/upload_bounds.py, app/visitor_key.py,
app/visitors.py). The others send raw HTTP, as any client can, to `python app.py` launched as a
public page behind one trusted proxy (SPECVIZ_TRUSTED_HOPS=1): the tests play that proxy, so
the rightmost X-Forwarded-For entry is the visitor's address and anything left of it is what a
client wrote. They send crash sizes (a 2 GB declared body, 40 MB streamed, 40 calls at once)
and write what they measured to test-artifacts/public_edge.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import socket
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import httpx
import psutil
import pytest

import hostile_cases as hc
from app_server import ARTIFACTS, launched_app, save_tiny_pair
from specviz.app import visitor_key, visitors
from specviz.app.config import PageConfig
from specviz.app.request_size import RequestSize
from specviz.app.upload_bounds import FormCount, Uploads

REFUSAL_S = 1.0
MEASURED: list[dict] = []
BOUNDARY = "specvizedge"


def multipart(*parts: tuple[str, str | None, bytes]) -> bytes:
    """A multipart/form-data body of (field name, filename or None for a plain field, content)."""
    out = b""
    for name, filename, content in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + content + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


# --- the pieces -------------------------------------------------------------------------------------


def test_the_visitor_is_the_entry_the_trusted_proxies_added():
    assert visitor_key.address("6.6.6.6, 203.0.113.7", "10.0.0.1", 1) == "203.0.113.7"
    assert visitor_key.address("6.6.6.6, 203.0.113.7, 10.0.0.9", "10.0.0.1", 2) == "203.0.113.7"
    assert visitor_key.address("6.6.6.6, 203.0.113.7", "10.0.0.1", 0) == "10.0.0.1"
    assert visitor_key.address("203.0.113.7", "10.0.0.1", 2) == "10.0.0.1"  # fewer entries than proxies
    assert visitor_key.address(None, "10.0.0.1", 1) == "10.0.0.1"


def test_a_forged_visitor_header_is_replaced_and_the_signed_one_kept():
    forged = (b"x-specviz-visitor", b"00000000000000000000000000000000 address:198.51.100.9")
    scope = {
        "headers": [forged, (b"x-forwarded-for", b"6.6.6.6"), (b"x-forwarded-for", b"203.0.113.7")],
        "client": ("10.0.0.1", 5000),
    }
    assert visitor_key.stamp(scope, 1) == "address:203.0.113.7"  # several lines read as one list
    stamped = [v for k, v in scope["headers"] if k == b"x-specviz-visitor"]
    assert len(stamped) == 1 and stamped[0].endswith(b" address:203.0.113.7")
    # The page's own loopback call on that visitor's behalf (Gradio's MCP client) keeps the signed name.
    loopback = {"headers": [(b"x-specviz-visitor", stamped[0])], "client": ("127.0.0.1", 6000)}
    assert visitor_key.stamp(loopback, 1) == "address:203.0.113.7"


def _event(pool: str, address: str, forwarded: str = ""):
    return SimpleNamespace(concurrency_id=pool, session_hash="s", request=_request(address, forwarded))


def _request(address: str, forwarded: str = ""):
    return SimpleNamespace(headers={"x-forwarded-for": forwarded}, client=SimpleNamespace(host=address))


def _queue(*events):
    return SimpleNamespace(
        event_queue_per_concurrency_id={"light": SimpleNamespace(queue=list(events))}, active_jobs=[]
    )


def test_a_visitor_holds_fewer_light_slots_than_there_are_and_forged_entries_change_nothing():
    config = PageConfig(public=True, trusted_hops=1)
    queue = _queue(*[_event("light", "10.0.0.1", f"6.6.6.{i}, 203.0.113.7") for i in range(3)])
    assert visitors.refusal(queue, _request("10.0.0.2", "7.7.7.7, 203.0.113.7"), "x", config, "light") == (
        "you have 3 light requests waiting or running; the limit is 3 per visitor (SPECVIZ_MAX_LIGHT_PER_VISITOR)"
    )
    # Writing that visitor's address on the left does not make another visitor them.
    assert visitors.refusal(queue, _request("10.0.0.2", "203.0.113.7, 198.51.100.4"), "x", config, "light") is None
    assert visitors.refusal(queue, _request("10.0.0.2", "7.7.7.7, 203.0.113.7"), "x", config, "models") is None


def test_every_queued_event_counts_toward_a_visitors_share():
    config = PageConfig(public=True, trusted_hops=1, max_events_per_visitor=4)
    queue = _queue(*[_event(pool, "10.0.0.1", "203.0.113.7") for pool in ("status", "status", "light", "models")])
    assert visitors.refusal(queue, _request("10.0.0.1", "203.0.113.7"), "x", config, "status") == (
        "you have 4 requests waiting or running; the limit is 4 per visitor (SPECVIZ_MAX_EVENTS_PER_VISITOR)"
    )


def _fed(body: bytes, config: PageConfig, step: int = 7) -> str | None:
    form = FormCount(f"multipart/form-data; boundary={BOUNDARY}".encode(), config)
    for i in range(0, len(body), step):  # a few bytes at a time: a boundary split across reads
        if (why := form.feed(body[i : i + step])) is not None:
            return why
    return None


def test_an_upload_is_bounded_in_files_and_in_fields_that_are_not_files():
    config = PageConfig(max_upload_files=4, max_upload_field_bytes=1_024)
    assert (
        _fed(multipart(*[("files", f"t{i}.json", b"{}") for i in range(4)], ("note", None, b"x" * 1_024)), config)
        is None
    )
    assert _fed(multipart(*[("files", f"t{i}.json", b"{}") for i in range(5)]), config) == (
        "the upload has more than 4 files; the limit is 4 (SPECVIZ_MAX_UPLOAD_FILES)"
    )
    assert _fed(multipart(("files", "t.json", b"{}"), ("note", None, b"x" * 1_025)), config) == (
        "a form field of the upload that is not a file is more than 1,024 bytes; "
        "the limit is 1,024 bytes (SPECVIZ_MAX_UPLOAD_FIELD_BYTES)"
    )


def test_uploads_per_visitor_per_minute():
    uploads = Uploads(3)
    assert [uploads.admit("a", t) for t in (0, 1, 2)] == [None] * 3
    assert uploads.admit("a", 30) == (
        "you have sent 3 uploads in the last minute; the limit is 3 per visitor (SPECVIZ_MAX_UPLOADS_PER_MINUTE)"
    )
    assert uploads.admit("b", 30) is None
    assert uploads.admit("a", 60.5) is None  # the first has left the minute


def _through(path: str, headers: list[tuple[bytes, bytes]], body: bytes = b"", config=None):
    """`body` sent to RequestSize in front of an app that reads it all: (answers sent, bytes the app read)."""
    sent, read = [], []

    async def app(scope, receive, send):
        while True:
            message = await receive()
            read.append(len(message.get("body", b"")))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def chunks():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "headers": headers, "client": ("127.0.0.1", 1)}
    asyncio.run(RequestSize(app, config or PageConfig())(scope, chunks, send))
    return sent, sum(read)


def test_only_gradios_upload_route_has_the_upload_limit():
    huge = [(b"content-length", b"2000000000"), (b"content-type", f"multipart/form-data; boundary={BOUNDARY}".encode())]
    sent, read = _through("/gradio_api/upload", huge)
    assert sent[0]["status"] == 413 and read == 0
    assert b"the limit is 33,619,968 bytes (SPECVIZ_MAX_UPLOAD_BYTES)" in sent[1]["body"]
    forty = [(b"content-length", b"40000000")]
    for path in ("/gradio_api/call/upload", "/upload", "/gradio_api/upload/"):
        sent, read = _through(path, forty)
        assert sent[0]["status"] == 413 and read == 0
        assert b"the limit is 16,000,000 bytes (SPECVIZ_MAX_REQUEST_BYTES)" in sent[1]["body"], path
    body = multipart(("files", "t.json", b" " * 20_000_000))
    sent, read = _through("/gradio_api/upload", [(b"content-type", huge[1][1])], body)
    assert sent[0]["status"] == 200 and read == len(body)  # within the upload's own limit


def test_a_public_page_closes_the_gradio_routes_it_does_not_use_and_a_local_page_keeps_them():
    public = PageConfig(public=True)
    for name in ("deep_link", "process_recording", "component_server"):
        for path in (f"/gradio_api/{name}", f"/gradio_api/{name}/"):
            sent, read = _through(path, [(b"content-length", b"10")], b"0123456789", public)
            assert sent[0]["status"] == 404 and read == 0, path
            assert json.loads(sent[1]["body"]) == {"detail": f"/gradio_api/{name} is not served on a public page"}
        sent, read = _through(f"/gradio_api/{name}", [(b"content-length", b"10")], b"0123456789", PageConfig())
        assert sent[0]["status"] == 200 and read == 10, name
    for path in ("/gradio_api/queue/join", "/gradio_api/upload", "/gradio_api/deep_links", "/deep_link"):
        sent, _ = _through(path, [(b"content-length", b"2")], b"{}", public)
        assert sent[0]["status"] == 200, path


# --- the launched public page -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    spec = save_tiny_pair(tmp_path_factory.mktemp("tiny-pair"))
    env = {
        "SPECVIZ_DEFAULT_PAIR": spec,
        "SPECVIZ_PRELOAD": "0",
        "SPECVIZ_PUBLIC": "1",
        "SPECVIZ_MCP": "1",
        "SPECVIZ_TRUSTED_HOPS": "1",
        "OMP_NUM_THREADS": "1",
        # Each bound's own refusal is what these tests read: no door after the first few
        # (app/strikes.py; tests/test_public_door.py).
        "SPECVIZ_MAX_REFUSED_PER_MINUTE": "0",
    }
    with launched_app(env, "app-public-edge") as url:
        yield url
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "public_edge.json").write_text(json.dumps(MEASURED, indent=1))


def app_rss_mb() -> float:
    procs = [p for p in psutil.Process().children(recursive=True) if "app.py" in " ".join(p.cmdline())]
    assert procs, "the app process is not running"
    return sum(p.memory_info().rss for p in procs) / 2**20


def raw(url: str, path: str, headers: dict[str, str], chunks) -> tuple[int, str, float, int]:
    """A request over a bare socket: its head, then `chunks` until the server answers.
    (status, the answer's body, seconds to the answer, bytes of body sent)."""
    host, port = url.split("//")[1].strip("/").split(":")
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    start, sent, reply = time.perf_counter(), 0, b""
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(head.encode() + b"\r\n")
        for chunk in chunks:
            if select.select([s], [], [], 0)[0]:
                break  # answered: stop sending
            try:
                s.sendall(chunk)
            except OSError:
                break
            sent += len(chunk)
        while b"\r\n\r\n" not in reply or len(reply.split(b"\r\n\r\n", 1)[1]) < _length(reply):
            try:
                got = s.recv(65536)
            except OSError:
                break
            if not got:
                break
            reply += got
    seconds = time.perf_counter() - start
    head_part, _, body = reply.partition(b"\r\n\r\n")
    status = int(head_part.split(b" ")[1]) if head_part else 0
    return status, body.decode(errors="replace"), seconds, sent


def _length(reply: bytes) -> int:
    for line in reply.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def chunked(total: int, piece: int = 65_536, first: bytes = b""):
    """`total` bytes as HTTP chunks (no Content-Length), `first` leading them."""
    data, sent = first, 0
    while sent < total:
        data += b" " * min(piece, total - sent)
        yield b"%x\r\n" % len(data) + data + b"\r\n"
        sent, data = sent + len(data), b""


def measured(case: str, status: int, text: str, seconds: float, sent: int, before: float, **more) -> None:
    MEASURED.append(
        {"case": case, "status": status, "seconds": round(seconds, 3), "bytes_sent": sent, "answer": text[:300]}
        | {"rss_before_mb": round(before, 1), "rss_after_mb": round(app_rss_mb(), 1)}
        | more
    )


def one_line_naming(text: str, env: str) -> None:
    line = hc.detail(text)
    assert hc.one_line(text) and env in line, text[:500]
    assert len(line) < 300, line


def still_serving(url: str, forwarded: str = "192.0.2.200") -> None:
    got = call_result(url, "speedup", [0.8, 4, 30.0, 5.0], forwarded)
    assert json.loads(got)["tokens_per_round"] == pytest.approx(3.3616)


UPLOAD_HEAD = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
FILE_HEAD = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="files"; filename="t.json"\r\n\r\n'.encode()


def opening(path: str) -> tuple[dict[str, str], bytes]:
    """A body's head and first bytes as the route takes them: a file to the upload route, else JSON."""
    if path == "/gradio_api/upload":
        return UPLOAD_HEAD, FILE_HEAD
    return {"Content-Type": "application/json"}, b'{"data": ["'


@pytest.mark.app
@pytest.mark.parametrize(
    "path, env",
    [
        ("/gradio_api/upload", "SPECVIZ_MAX_UPLOAD_BYTES"),
        ("/gradio_api/call/upload", "SPECVIZ_MAX_REQUEST_BYTES"),
        ("/gradio_api/queue/join", "SPECVIZ_MAX_REQUEST_BYTES"),
    ],
)
def test_a_2_gb_body_is_refused_before_it_is_read(edge, path, env):
    before = app_rss_mb()
    head, first = opening(path)
    head = {**head, "Content-Length": "2000000000", "X-Forwarded-For": "192.0.2.1"}
    status, text, seconds, sent = raw(edge, path, head, [first + b" " * 65_536])
    measured(f"2 GB declared to {path}", status, text, seconds, sent, before, declared_bytes=2_000_000_000)
    assert status == 413 and seconds < REFUSAL_S
    one_line_naming(text, env)
    still_serving(edge)


@pytest.mark.app
@pytest.mark.parametrize(
    "path, env",
    [("/gradio_api/upload", "SPECVIZ_MAX_UPLOAD_BYTES"), ("/gradio_api/call/upload", "SPECVIZ_MAX_REQUEST_BYTES")],
)
def test_a_40_mb_body_sent_without_its_length_is_cut_off_at_the_limit(edge, path, env):
    before, kept = app_rss_mb(), upload_files()
    head, first = opening(path)
    head = {**head, "Transfer-Encoding": "chunked", "X-Forwarded-For": "192.0.2.2"}
    status, text, seconds, sent = raw(edge, path, head, chunked(40_000_000, first=first))
    measured(f"40 MB streamed to {path}", status, text, seconds, sent, before)
    assert status == 413 and sent < 40_000_000
    one_line_naming(text, env)
    assert seconds < 10 * REFUSAL_S  # the bytes up to the limit have to arrive first
    still_serving(edge)
    assert upload_files() <= kept  # the part of the file written before the cut is gone


def upload_files() -> set[str]:
    """The files Gradio's upload route is writing or has left in its folder (GRADIO_TEMP_DIR)."""
    folder = Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio")
    return {p.name for p in folder.glob("tmp*") if p.is_file()} if folder.is_dir() else set()


@pytest.mark.app
def test_an_upload_left_half_sent_leaves_no_file_behind(edge):
    kept = upload_files()
    host, port = edge.split("//")[1].strip("/").split(":")
    head = {**UPLOAD_HEAD, "Content-Length": "30000000", "X-Forwarded-For": "192.0.2.10"}
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(f"POST /gradio_api/upload HTTP/1.1\r\nHost: {host}\r\n".encode())
        s.sendall("".join(f"{k}: {v}\r\n" for k, v in head.items()).encode() + b"\r\n" + FILE_HEAD)
        s.sendall(b" " * 10_000_000)  # a third of it, then the visitor leaves
    deadline = time.monotonic() + 30  # a bound for a busy machine: the app notices the closed connection
    while upload_files() - kept and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not upload_files() - kept
    still_serving(edge)


@pytest.mark.app
def test_an_upload_of_many_files_or_a_large_plain_field_is_refused_as_it_streams(edge):
    cases = [
        ("5 files", multipart(*[("files", f"t{i}.json", b"{}") for i in range(5)]), "SPECVIZ_MAX_UPLOAD_FILES"),
        (
            "a plain field of 10 MB",
            multipart(("files", "t.json", b"{}"), ("note", None, b"x" * 10_000_000)),
            "SPECVIZ_MAX_UPLOAD_FIELD_BYTES",
        ),
    ]
    for case, body, env in cases:
        before = app_rss_mb()
        head = {**UPLOAD_HEAD, "Content-Length": str(len(body)), "X-Forwarded-For": "192.0.2.3"}
        pieces = [body[i : i + 65_536] for i in range(0, len(body), 65_536)]
        status, text, seconds, sent = raw(edge, "/gradio_api/upload", head, pieces)
        measured(f"upload: {case}", status, text, seconds, sent, before)
        assert status == 413 and seconds < REFUSAL_S, (case, status, seconds)
        one_line_naming(text, env)
    still_serving(edge)


def upload(url: str, forwarded: str) -> httpx.Response:
    files = {"files": ("t.json", b"{}", "application/json")}
    return httpx.post(f"{url}gradio_api/upload", files=files, headers={"X-Forwarded-For": forwarded}, timeout=30)


@pytest.mark.app
def test_a_visitors_uploads_per_minute_are_bounded_whatever_it_writes_on_the_left(edge):
    limit = PageConfig().max_uploads_per_minute
    answers = [upload(edge, f"10.9.9.{i}, 192.0.2.4").status_code for i in range(limit)]
    assert answers == [200] * limit
    start = time.perf_counter()
    r = upload(edge, "10.9.9.99, 192.0.2.4")
    seconds = time.perf_counter() - start
    MEASURED.append({"case": f"upload {limit + 1} in a minute", "status": r.status_code, "seconds": round(seconds, 3)})
    assert r.status_code == 429 and seconds < REFUSAL_S
    one_line_naming(r.text, "SPECVIZ_MAX_UPLOADS_PER_MINUTE")
    assert upload(edge, "192.0.2.4, 192.0.2.5").status_code == 200  # its address written by another


HTTP = httpx.Client(timeout=120, limits=httpx.Limits(max_connections=64))  # one pool for every call


def call(url: str, name: str, data: list, forwarded: str) -> tuple[httpx.Response, float]:
    start = time.perf_counter()
    r = HTTP.post(f"{url}gradio_api/call/{name}", json={"data": data}, headers={"X-Forwarded-For": forwarded})
    return r, time.perf_counter() - start


def call_result(url: str, name: str, data: list, forwarded: str) -> str:
    """An API call over /call, as a visitor behind the proxy; its answer."""
    r, _ = call(url, name, data, forwarded)
    assert r.status_code == 200, r.text[:300]
    stream = HTTP.get(f"{url}gradio_api/call/{name}/{r.json()['event_id']}")
    event = None
    for line in stream.text.splitlines():
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:") and event in ("complete", "error"):
            assert event == "complete", line[:300]
            return json.loads(line[5:])[0]
    raise AssertionError(stream.text[:300])


# The Lossless lab at its most entries and draws: seconds of work a call.
SLOW_CHECK = [",".join([repr(1 / 1024)] * 1024), ",".join(repr((i + 1) / 524_800) for i in range(1024)), 20_000_000, 0]


def flood(url: str, address: str, n: int = 40) -> list[tuple[httpx.Response, float]]:
    """`n` slow calls at once from one visitor, each with a new address written on the left."""
    with ThreadPoolExecutor(n) as pool:
        jobs = [pool.submit(call, url, "lossless_check", SLOW_CHECK, f"10.{i}.0.1, {address}") for i in range(n)]
        return [j.result() for j in jobs]


@pytest.mark.app
def test_a_flood_from_one_visitor_leaves_another_visitors_light_call_answered(edge):
    before = app_rss_mb()
    start = time.perf_counter()
    with ThreadPoolExecutor(1) as other:
        flooding = other.submit(flood, edge, "192.0.2.6")
        time.sleep(0.2)  # the flood under way
        honest_start = time.perf_counter()
        # The honest visitor writes the flooder's address on the left: that does not make it the flooder.
        got = call_result(edge, "speedup", [0.8, 4, 30.0, 5.0], "192.0.2.6, 192.0.2.7")
        honest_s = time.perf_counter() - honest_start
        answers = flooding.result()
    refused = [(r, s) for r, s in answers if r.status_code != 200]
    measured(
        "40 lossless_check calls at once from one visitor",
        422 if refused else 200,
        refused[0][0].text if refused else "",
        max((s for _, s in refused), default=0.0),
        0,
        before,
        refused=len(refused),
        admitted=len(answers) - len(refused),
        honest_speedup_s=round(honest_s, 3),
        flood_s=round(time.perf_counter() - start, 3),
    )
    assert json.loads(got)["tokens_per_round"] == pytest.approx(3.3616)
    assert len(answers) - len(refused) <= PageConfig().max_light_per_visitor
    for r, seconds in refused:
        assert r.status_code == 422 and seconds < REFUSAL_S, (r.status_code, seconds)
        one_line_naming(r.text, "SPECVIZ_MAX_LIGHT_PER_VISITOR")


def mcp_call(url: str, forwarded: str, tool: str, args: dict) -> tuple[bool, str, float]:
    """One MCP tool call from a visitor behind the proxy: (refused, its text, seconds of the call)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def talk():
        async with create_mcp_http_client(headers={"X-Forwarded-For": forwarded}) as http:
            async with streamable_http_client(f"{url}gradio_api/mcp/", http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    start = time.perf_counter()
                    got = await session.call_tool(tool, args)
                    seconds = time.perf_counter() - start
                    return got.isError, "".join(getattr(c, "text", "") for c in got.content), seconds

    return asyncio.run(talk())


@pytest.mark.app
def test_an_mcp_call_counts_as_its_callers_request(edge):
    slow = dict(zip(("p", "q", "samples", "seed"), SLOW_CHECK))
    with ThreadPoolExecutor(3) as pool:  # the visitor's light share taken by calls that run a while
        held = [pool.submit(call, edge, "lossless_check", SLOW_CHECK, "192.0.2.8") for _ in range(3)]
        assert all(h.result()[0].status_code == 200 for h in held)
        refused, text, seconds = mcp_call(edge, "10.1.1.1, 192.0.2.8", "lossless_check", slow)
        MEASURED.append({"case": "MCP call over its caller's share", "refused": refused, "seconds": round(seconds, 3)})
        assert refused and seconds < REFUSAL_S, (refused, seconds)
        one_line_naming(text, "SPECVIZ_MAX_LIGHT_PER_VISITOR")
        failed, answer, _ = mcp_call(edge, "192.0.2.8, 192.0.2.9", "speedup", hc.GOOD_SPEEDUP)
        assert not failed and json.loads(answer)["speedup"] > 1, answer[:300]
    still_serving(edge)


@pytest.mark.app
def test_the_routes_a_public_page_does_not_use_write_nothing(edge):
    """A session that ran an event, asked for its deep link (which writes every value it holds
    to a new file) and a posted screen recording (copied to disk, run through ffmpeg): each is
    refused at once in one line, and no deep-link file is written."""
    folder = Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio") / "deep_links"
    kept = set(folder.iterdir()) if folder.is_dir() else set()
    config = HTTP.get(f"{edge}config").json()
    fn = next(d.get("id", i) for i, d in enumerate(config["dependencies"]) if d.get("api_name") == "speedup")
    join = {"data": [0.8, 4, 30.0, 5.0], "fn_index": fn, "session_hash": "edge-deep-link", "trigger_id": None}
    head = {"X-Forwarded-For": "192.0.2.30"}
    assert HTTP.post(f"{edge}gradio_api/queue/join", json=join, headers=head).status_code == 200
    time.sleep(1.0)  # the event ran: the session is held
    asked = [
        ("deep_link", lambda: HTTP.get(f"{edge}gradio_api/deep_link", params={"session_hash": "edge-deep-link"})),
        (
            "process_recording",
            lambda: HTTP.post(
                f"{edge}gradio_api/process_recording",
                content=multipart(("video", "r.mp4", b"\0" * 100_000)),
                headers={**UPLOAD_HEAD, **head},
            ),
        ),
        ("component_server", lambda: HTTP.post(f"{edge}gradio_api/component_server", json={}, headers=head)),
    ]
    for name, send in asked:
        start = time.perf_counter()
        r = send()
        seconds = time.perf_counter() - start
        assert r.status_code == 404 and seconds < REFUSAL_S, (name, r.status_code, r.text[:300])
        assert r.json() == {"detail": f"/gradio_api/{name} is not served on a public page"}
    assert (set(folder.iterdir()) if folder.is_dir() else set()) == kept
    still_serving(edge)
