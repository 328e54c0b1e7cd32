"""The public page's door (app/strikes.py): a visitor whose requests the page keeps refusing is
answered 429 in one line before its body is read, for the rest of the minute, whatever it
sends but reads; everyone else is served. The first tests read the pieces; the last sends raw HTTP to `python app.py` launched as
a public page behind one trusted proxy, as tests/test_public_edge.py does."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace

import httpx
import pytest

import hostile_cases as hc
from app_server import launched_app, save_tiny_pair
from gradio.server_messages import ProcessCompletedMessage, ProgressMessage
from specviz.app import visitor_key
from specviz.app.config import PageConfig
from specviz.app.request_size import RequestSize
from specviz.app.strikes import Strikes, watch

LIMIT = 3


def test_the_door_closes_at_the_limit_and_opens_when_the_oldest_refusals_leave_the_minute():
    strikes = Strikes(LIMIT)
    for t in (0.0, 10.0):
        strikes.strike("a", t)
    assert strikes.door("a", "POST", 10.0) is None  # two refusals: still below the limit
    strikes.strike("a", 20.0)
    why, wait_s = strikes.door("a", "POST", 30.0)
    assert why == (
        "the page refused 3 of your requests in the last minute; the limit is 3 per visitor "
        "(SPECVIZ_MAX_REFUSED_PER_MINUTE); it answers you again in 30 s"
    )
    assert wait_s == 30  # the first refusal (t = 0) leaves the minute at t = 60
    assert strikes.door("b", "POST", 30.0) is None  # another visitor
    assert strikes.door("a", "POST", 59.9) is not None
    assert strikes.door("a", "POST", 60.0) is None
    off = Strikes(0)
    for t in range(100):
        off.strike("a", float(t))
    assert off.door("a", "POST", 100.0) is None
    assert strikes.door("a", "GET", 30.0) is None  # reading stays open


def test_only_a_public_page_keeps_a_door():
    assert Strikes.of(PageConfig(public=True)).limit == PageConfig().max_refused_per_minute > 0
    assert Strikes.of(PageConfig(public=False)).limit == 0
    assert PageConfig.from_env({"SPECVIZ_MAX_REFUSED_PER_MINUTE": "0"}).max_refused_per_minute == 0


READ: list[int] = []  # the body bytes the app behind the middleware read, per request


async def _reading_app(scope, receive, send):
    message = await receive()
    READ.append(len(message.get("body", b"")))
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


def _sent(middleware: RequestSize, address: str, length: int) -> list[dict]:
    """One POST of `length` bytes from `address` through `middleware`: what it answered."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b" " * length, "more_body": False}

    async def send(message):
        sent.append(message)

    headers = [(b"content-length", str(length).encode())]
    scope = {"type": "http", "method": "POST", "path": "/gradio_api/queue/join", "headers": headers}
    asyncio.run(middleware({**scope, "client": (address, 1)}, receive, send))
    return sent


def test_the_middleware_counts_refusals_and_answers_at_the_door_before_reading():
    config = PageConfig(public=True, max_request_bytes=1_000, max_refused_per_minute=LIMIT)
    middleware = RequestSize(_reading_app, config)
    for _ in range(LIMIT):
        assert _sent(middleware, "192.0.2.1", 2_000)[0]["status"] == 413
    READ.clear()
    sent = _sent(middleware, "192.0.2.1", 10)  # a request within every bound, turned away unread
    assert sent[0]["status"] == 429 and READ == []
    assert dict(sent[0]["headers"])[b"retry-after"].isdigit()
    assert "SPECVIZ_MAX_REFUSED_PER_MINUTE" in json.loads(sent[1]["body"])["detail"]
    assert _sent(middleware, "192.0.2.2", 10)[0]["status"] == 200 and READ == [10]  # another visitor

    local = RequestSize(_reading_app, PageConfig(public=False, max_request_bytes=1_000))
    for _ in range(LIMIT + 2):
        assert _sent(local, "127.0.0.1", 2_000)[0]["status"] == 413
    assert _sent(local, "127.0.0.1", 10)[0]["status"] == 200


def test_a_failed_event_in_the_queue_is_a_strike_for_its_visitor():
    config = PageConfig(public=True, max_refused_per_minute=LIMIT)
    strikes, kept = Strikes.of(config), []
    demo = SimpleNamespace(_queue=SimpleNamespace(send_message=lambda event, message: kept.append(message)))
    watch(demo, config, strikes)
    headers = {visitor_key.HEADER: visitor_key.signed("address:192.0.2.9")}
    event = SimpleNamespace(request=SimpleNamespace(headers=headers, client=None), session_hash="s")
    for _ in range(LIMIT):
        demo._queue.send_message(event, ProgressMessage(progress_data=[]))
        demo._queue.send_message(event, ProcessCompletedMessage(output={"data": []}, success=True))
    assert strikes.door("address:192.0.2.9", "POST", time.monotonic()) is None
    for _ in range(LIMIT):
        demo._queue.send_message(event, ProcessCompletedMessage(output={"error": "no"}, success=False))
    assert strikes.door("address:192.0.2.9", "POST", time.monotonic()) is not None
    assert len(kept) == 3 * LIMIT  # every message still sent


@pytest.fixture(scope="module")
def door(tmp_path_factory):
    spec = save_tiny_pair(tmp_path_factory.mktemp("tiny-pair"))
    env = {
        "SPECVIZ_DEFAULT_PAIR": spec,
        "SPECVIZ_PRELOAD": "0",
        "SPECVIZ_PUBLIC": "1",
        "SPECVIZ_TRUSTED_HOPS": "1",
        "SPECVIZ_MAX_REFUSED_PER_MINUTE": str(LIMIT),
        "OMP_NUM_THREADS": "1",
    }
    with launched_app(env, "app-public-door") as url:
        yield url


def _call(url: str, name: str, data: list, address: str) -> tuple[httpx.Response, float]:
    start = time.perf_counter()
    r = httpx.post(
        f"{url}gradio_api/call/{name}", json={"data": data}, headers={"X-Forwarded-For": address}, timeout=60
    )
    return r, time.perf_counter() - start


def _outcome(url: str, name: str, event_id: str) -> str:
    """The event's end as the /call stream says it: 'complete' or 'error'."""
    text = httpx.get(f"{url}gradio_api/call/{name}/{event_id}", timeout=60).text
    return [line[6:].strip() for line in text.splitlines() if line.startswith("event:")][-1]


@pytest.mark.app
def test_a_visitor_the_page_keeps_refusing_is_turned_away_at_the_door_and_others_are_served(door):
    # Refused as they join (a list where a number is declared: 422), then a good call, turned away.
    for _ in range(LIMIT):
        r, _ = _call(door, "speedup", [[0.5] * 1_000, 4, 30.0, 5.0], "10.0.0.1, 192.0.2.1")
        assert r.status_code == 422, r.text[:300]
    r, seconds = _call(door, "speedup", [0.5, 4, 30.0, 5.0], "192.0.2.1")
    assert r.status_code == 429 and seconds < 1.0, r.text[:300]
    assert hc.one_line(r.text) and "SPECVIZ_MAX_REFUSED_PER_MINUTE" in r.text
    assert int(r.headers["retry-after"]) > 0
    # Writing a new address on the left changes nothing; reading the page stays open.
    r, _ = _call(door, "speedup", [0.5, 4, 30.0, 5.0], "10.9.9.9, 192.0.2.1")
    assert r.status_code == 429
    assert httpx.get(f"{door}config", headers={"X-Forwarded-For": "192.0.2.1"}, timeout=30).status_code == 200

    # Refused by the handler (an answer of 200 to the join, an error at the end) counts the same.
    for _ in range(LIMIT):
        r, _ = _call(door, "speedup", [2.0, 4, 30.0, 5.0], "192.0.2.2")
        assert r.status_code == 200 and _outcome(door, "speedup", r.json()["event_id"]) == "error"
    assert _call(door, "speedup", [0.5, 4, 30.0, 5.0], "192.0.2.2")[0].status_code == 429

    # Another visitor's call is served.
    r, seconds = _call(door, "speedup", [0.8, 4, 30.0, 5.0], "192.0.2.3")
    assert r.status_code == 200 and _outcome(door, "speedup", r.json()["event_id"]) == "complete"
