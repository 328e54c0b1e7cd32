"""`app.background.newest`: the run goes on in its own thread while the page handles an update."""

from __future__ import annotations

import contextvars
import threading
import time
from types import SimpleNamespace

import pytest

from specviz.app.background import newest

WAIT_S = 10.0  # generous: these tests wait for events, never for speed


def test_the_run_goes_on_while_the_caller_holds_an_update():
    taken, reached = threading.Event(), threading.Event()

    def run():
        yield 0
        taken.wait(WAIT_S)
        for i in range(1, 10):
            yield i
            if i == 5:
                reached.set()

    out = newest(run(), min_interval_s=0.0, stop=lambda: None)
    assert next(out) == 0
    taken.set()
    # The caller has not asked for the next update: a run iterated by the caller would stop here.
    assert reached.wait(WAIT_S)
    rest = list(out)
    assert rest[-1] == 9  # the last always goes out
    assert rest == sorted(set(rest)) and rest[0] > 0  # never one twice or out of order


def test_updates_the_caller_was_too_busy_for_are_merged_into_the_newest():
    go = threading.Event()

    def run():
        yield "first"
        go.wait(WAIT_S)
        yield from ("a", "b", "c", "last")

    out = newest(run(), min_interval_s=0.0, stop=lambda: None)
    assert next(out) == "first"
    go.set()
    time.sleep(0.5)  # the run produces all four while nobody asks
    assert list(out) == ["last"]


def test_updates_come_no_faster_than_the_interval_and_the_last_always_comes():
    interval = 0.2

    def run():
        for i in range(60):
            time.sleep(0.01)
            yield i

    start = time.monotonic()
    got = list(newest(run(), min_interval_s=interval, stop=lambda: None))
    elapsed = time.monotonic() - start
    assert got[-1] == 59
    assert len(got) <= 2 + elapsed / interval  # the first, one per interval, and the last


def test_an_interval_that_grows_with_the_update_spaces_updates_out_as_they_grow():
    # runner.stream's rule: a wait after each update that grows with what it held.
    def run():
        for i in range(100):
            time.sleep(0.01)
            yield i

    got, at = [], []
    for i in newest(run(), min_interval_s=lambda i: 0.005 * i, stop=lambda: None):
        got.append(i)
        at.append(time.monotonic())
    assert got[-1] == 99 and len(got) < 20  # at a fixed 0.05 s, about 20
    # Each update but the last (which comes at once) waited at least what the one before asked.
    assert all(t1 - t0 >= 0.005 * i - 0.002 for i, t0, t1 in zip(got, at, at[1:-1]))


def test_a_runs_updates_space_out_as_the_stream_grows_up_to_a_second():
    from specviz.app.runner import MIN_UPDATE_S, UPDATE_MAX_S, update_interval_s

    def trace(tokens: int):
        return SimpleNamespace(token_ids=[0] * tokens)

    assert update_interval_s(trace(1)) == MIN_UPDATE_S
    assert MIN_UPDATE_S < update_interval_s(trace(100)) < update_interval_s(trace(120)) < UPDATE_MAX_S
    assert update_interval_s(trace(4096)) == UPDATE_MAX_S == 1.0


def test_an_error_in_the_run_is_raised_to_the_caller_after_what_came_before():
    def run():
        yield 1
        raise ValueError("broken run")  # at once: the caller may not have taken 1 yet

    out = newest(run(), min_interval_s=0.0, stop=lambda: None)
    assert next(out) == 1
    with pytest.raises(ValueError, match="broken run"):
        next(out)


def test_closing_early_signals_the_stop_and_returns_without_waiting_for_the_run():
    """Closing runs inside Gradio's event loop: it must not wait for the run's pass to end."""
    stop, release, ended = threading.Event(), threading.Event(), threading.Event()

    def run():
        try:
            yield 1
            release.wait(WAIT_S)  # a pass that goes on after Stop
            while not stop.is_set():
                yield 2
        finally:
            ended.set()

    out = newest(run(), min_interval_s=0.0, stop=stop.set)
    assert next(out) == 1
    start = time.monotonic()
    out.close()
    closed_s = time.monotonic() - start
    assert stop.is_set() and not ended.is_set()  # told to stop; its pass still under way
    assert closed_s < 1.0  # a behaviour bound, generous: the pass above lasts until released
    release.set()
    assert ended.wait(WAIT_S)  # the run then sees its flag and ends by itself


def test_the_run_sees_the_callers_context_variables():
    request = contextvars.ContextVar("request", default=None)
    request.set("the page request")

    def run():
        yield request.get()

    assert list(newest(run(), min_interval_s=0.0, stop=lambda: None)) == ["the page request"]


def test_a_client_that_stops_reading_ends_its_run():
    """An API job nobody reads would keep every update (each the whole trace so far) queued."""
    stop, ended = threading.Event(), threading.Event()
    queued = []
    now = [0.0]

    def run():
        try:
            while not stop.is_set():
                now[0] += 1.0  # a second of the run between updates
                yield len(queued)
                time.sleep(0.001)
        finally:
            ended.set()

    from specviz.app.background import while_read

    updates = while_read(
        newest(run(), min_interval_s=0.0, stop=stop.set), lambda: len(queued), unread_s=5.0, clock=lambda: now[0]
    )
    for update in updates:
        queued.append(update)  # queued for the client, never read
    assert queued == [0]  # the first went; the rest waited behind it unread, and none was queued
    assert stop.is_set() and ended.wait(WAIT_S)


def test_a_slow_reader_gets_the_newest_update_and_always_the_last():
    from specviz.app.background import while_read

    unread = iter([0, 1, 1, 0, 1, 1, 1])  # read after the third update, then not again before the end
    sent = list(while_read(iter(range(8)), lambda: next(unread, 1), unread_s=60.0))
    assert sent == [0, 3, 7]  # each sent when nothing waited unread; the last, 7, however the reader lags


def test_an_mcp_call_gets_the_last_update_alone():
    from types import SimpleNamespace

    from specviz.app.background import reads_only_the_result, while_read

    assert list(while_read(iter(range(50)), lambda: 0, only_last=True)) == [49]
    assert reads_only_the_result(SimpleNamespace(headers={"x-gradio-user": "mcp"}))
    assert not reads_only_the_result(SimpleNamespace(headers={"x-gradio-user": "api"}))
    assert not reads_only_the_result(None)


def test_unread_counts_the_sessions_queued_messages():
    import asyncio
    from types import SimpleNamespace

    from specviz.app.background import unread

    pending = asyncio.Queue()
    queue = SimpleNamespace(pending_messages_per_session={"s1": pending})
    app = SimpleNamespace(get_blocks=lambda: SimpleNamespace(_queue=queue))
    request = SimpleNamespace(session_hash="s1", request=SimpleNamespace(app=app))
    count = unread(request)
    assert count() == 0
    for i in range(3):
        pending.put_nowait(i)
    assert count() == 3
    assert unread(SimpleNamespace(session_hash="s1", request=None))() == 0  # no queue: never abandoned


def test_a_call_job_nobody_reads_is_stopped_by_a_real_gradio_queue():
    """Against Gradio's own queue: a job posted to /call/<api> and not read stops its run."""
    import gradio as gr
    import httpx

    from specviz.app.background import unread, while_read

    stop = threading.Event()

    def run():
        while not stop.is_set():
            yield str(time.monotonic())
            time.sleep(0.02)

    def handler(text, request):
        yield from while_read(newest(run(), min_interval_s=0.0, stop=stop.set), unread(request), unread_s=1.0)

    handler.__annotations__["request"] = gr.Request  # this module's annotations are strings

    with gr.Blocks() as demo:
        box, out = gr.Textbox(), gr.Textbox()
        box.submit(handler, box, out, api_name="gen")
    demo.queue(api_open=False)
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True)
    try:
        event = httpx.post(f"{url}gradio_api/call/gen", json={"data": ["x"]}, timeout=WAIT_S).json()["event_id"]
        deadline = time.monotonic() + WAIT_S
        while not stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stop.is_set()  # nobody read: the run was told to stop
        body = httpx.get(f"{url}gradio_api/call/gen/{event}", timeout=WAIT_S).text
        kinds = [line for line in body.splitlines() if line.startswith("event:")]
        # The first update, then nothing more was queued: not one update per 20 ms for a second.
        assert kinds[-1] == "event: complete" and len(kinds) <= 3
    finally:
        demo.close()
