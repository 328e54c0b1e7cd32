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


@pytest.mark.app
def test_api_callers_sessions_do_not_pile_up_in_a_launched_page(monkeypatch):
    """Each raw /call is a session of its own; once idle they go, where before they stayed
    until SPECVIZ_MAX_SESSIONS newer ones pushed them out."""
    monkeypatch.setattr(sessions, "IDLE_S", 0.5)
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
        deadline = time.monotonic() + WAIT_S
        while demo.state_holder.session_data and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not demo.state_holder.session_data
    finally:
        demo.close()
