"""Sessions that hold nothing of their own are forgotten once idle (specviz/app/sessions.py),
against Gradio's own StateHolder and, launched, against API calls that each bring a session."""

from __future__ import annotations

import datetime
import time

import gradio as gr
import httpx
import pytest
from gradio.state_holder import StateHolder

from specviz.app import sessions

WAIT_S = 30.0  # generous: the test waits for the sweep, never for speed


def _page():
    with gr.Blocks() as demo:
        kept = gr.State(None)
        box = gr.Textbox()
        out = gr.Textbox()
        box.submit(lambda s: s, box, out, api_name="echo")
    return demo, kept, box


def test_idle_sessions_holding_nothing_are_forgotten_and_the_others_kept():
    demo, kept, box = _page()
    holder = StateHolder()
    holder.set_blocks(demo)
    holder["api"]  # an API caller's: the page's settings, nothing else
    holder["read"][kept._id]  # an event read the State: Gradio filled in its default, None
    holder["tab"][kept._id] = {"a": "trace"}  # a page tab after a run
    holder["updated"][box._id] = gr.Textbox(label="changed by an update", render=False)
    holder["recent"]
    holder["running"]
    old = datetime.datetime.now() - datetime.timedelta(seconds=sessions.IDLE_S + 1)
    for name in ("api", "read", "tab", "updated", "running"):
        holder.time_last_used[name] = old
    gone = sessions.forget_idle(holder, busy=lambda s: s == "running")
    assert gone == 2
    assert set(holder.session_data) == {"tab", "updated", "recent", "running"}
    assert set(holder.time_last_used) == {"tab", "updated", "recent", "running"}


def test_a_sessions_message_queue_goes_only_after_it_has_been_idle_for_a_while():
    import asyncio
    from types import SimpleNamespace

    from gradio.utils import LRUCache

    queues = {name: asyncio.Queue() for name in ("done", "unread", "running", "fresh")}
    queues["unread"].put_nowait("a message its client has not read")
    queue = SimpleNamespace(pending_messages_per_session=LRUCache(10), pending_event_ids_session={"running": {"e1"}})
    for name in ("done", "unread", "running"):
        queue.pending_messages_per_session[name] = queues[name]
    idle = sessions.IdleQueues()
    assert idle.sweep(queue, now=0.0, idle_s=60.0) == 0  # idle from now on, not before
    queue.pending_messages_per_session["fresh"] = queues["fresh"]
    assert idle.sweep(queue, now=59.0, idle_s=60.0) == 0
    assert idle.sweep(queue, now=61.0, idle_s=60.0) == 1
    assert set(queue.pending_messages_per_session) == {"unread", "running", "fresh"}
    assert idle.sweep(queue, now=121.0, idle_s=60.0) == 1  # "fresh", idle since 59 s
    assert set(queue.pending_messages_per_session) == {"unread", "running"}


@pytest.mark.app
def test_api_callers_sessions_do_not_pile_up_in_a_launched_page(monkeypatch):
    """Each raw /call is a session of its own; once idle they go, where before they stayed
    until SPECVIZ_MAX_SESSIONS newer ones pushed them out."""
    monkeypatch.setattr(sessions, "IDLE_S", 0.5)
    monkeypatch.setattr(sessions, "QUEUE_IDLE_S", 0.5)
    monkeypatch.setattr(sessions, "SWEEP_EVERY_S", 0.2)
    demo, _, _ = _page()
    demo.queue()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True)
    try:
        sessions.keep_sessions_short(demo)
        with httpx.Client(base_url=url, timeout=WAIT_S) as http:
            for i in range(8):
                event = http.post("gradio_api/call/echo", json={"data": [f"x{i}"]}).json()["event_id"]
                assert f"x{i}" in http.get(f"gradio_api/call/echo/{event}").text
        assert len(demo.state_holder.session_data) >= 8  # each call made one
        assert len(demo._queue.pending_messages_per_session) >= 8
        deadline = time.monotonic() + WAIT_S
        while (demo.state_holder.session_data or demo._queue.pending_messages_per_session) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert not demo.state_holder.session_data and not demo._queue.pending_messages_per_session
        with httpx.Client(base_url=url, timeout=WAIT_S) as http:  # a caller after the sweep is served
            event = http.post("gradio_api/call/echo", json={"data": ["again"]}).json()["event_id"]
            assert "again" in http.get(f"gradio_api/call/echo/{event}").text
    finally:
        demo.close()
