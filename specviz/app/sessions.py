"""Sessions Gradio keeps that hold nothing of their own, forgotten once idle.

Gradio keeps a SessionState per session hash: a copy of the page's settings for every
component (about 0.2 MB here) and the last value each event read and wrote, the whole trace of
a `generate` call among them. Every API client, raw /call request and MCP call brings a new
session hash, and Gradio drops a session only when `state_session_capacity` newer ones push it
out, so a page serving API callers grows by a session's bytes per caller until that many are
held. A session that holds no gr.State value and whose components are still the page's own
(no event replaced one with an update) loses nothing when it goes: its next event, if any,
starts from the page's settings, as a new session does. Such a session is forgotten once it
has been idle for `IDLE_S` with no event waiting or running: a few seconds, since it holds the
last value each of its events read (a request's whole body, parsed) and a client that sends
every request as a new session would otherwise keep up to `state_session_capacity` of them. A
session holding a trace (a page tab after a run) stays until its gr.State expires or newer
sessions push it out, as before.

Gradio's queue also keeps a message queue per session, in an LRU of 2000 ordered by when each
session first joined: once 2000 newer sessions have joined (a client that sends each request
as a new session makes them fast), the oldest is dropped even while its client streams, which
then gets a 404 and loses its job. A session's message queue that has held nothing, with no
event of the session waiting or running, for QUEUE_IDLE_S goes too (`IdleQueues`), so sessions that
are done never push out one that is not; its next event makes a new one, as for a new session.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

IDLE_S = 5.0  # a page tab's timer ticks every second; an API caller's session is done by then
QUEUE_IDLE_S = 60.0  # an empty message queue: a client may still be about to read its next event
SWEEP_EVERY_S = 1.0


def untouched(session: Any, defaults: dict) -> bool:
    """Whether `session` (a SessionState) holds no gr.State value (Gradio fills in None for each
    State an event read) and only the page's own components (`defaults`: the page's id -> block)."""
    if any(v is not None for v in session.state_data.values()):
        return False
    blocks = session.blocks_config.blocks
    return len(blocks) == len(defaults) and all(defaults.get(k) is b for k, b in blocks.items())


def forget_idle(holder: Any, busy: Callable[[str], bool], *, idle_s: float | None = None, now=None) -> int:
    """Drop from `holder` (Gradio's StateHolder) the sessions idle for `idle_s` that are
    `untouched` and not `busy` (an event of theirs waiting or running); how many went."""
    now = now or datetime.datetime.now()
    idle_s = IDLE_S if idle_s is None else idle_s
    defaults = holder.blocks.default_config.blocks
    gone = []
    for session_hash, session in list(holder.session_data.items()):
        used = holder.time_last_used.get(session_hash)
        if used is not None and (now - used).total_seconds() < idle_s:
            continue
        if busy(session_hash) or not untouched(session, defaults):
            continue
        gone.append(session_hash)
    with holder.lock:
        for session_hash in gone:
            holder.session_data.pop(session_hash, None)
            holder.time_last_used.pop(session_hash, None)
    return len(gone)


class IdleQueues:
    """Drops the message queues of sessions idle for `idle_s`: empty, with no event pending."""

    def __init__(self) -> None:
        self.idle_since: dict[str, float] = {}

    def sweep(self, queue: Any, now: float, idle_s: float) -> int:
        pending = queue.pending_messages_per_session
        gone = 0
        for session_hash, messages in list(pending.items()):
            if messages.qsize() or queue.pending_event_ids_session.get(session_hash):
                self.idle_since.pop(session_hash, None)
            elif now - self.idle_since.setdefault(session_hash, now) >= idle_s:
                del pending[session_hash]
                gone += 1
        for session_hash in [s for s in self.idle_since if s not in pending]:
            del self.idle_since[session_hash]
        return gone


def keep_sessions_short(demo: Any) -> None:
    """Once `demo` is launched: forget idle untouched sessions and idle sessions' message
    queues every SWEEP_EVERY_S. The sweep
    runs where Gradio expires gr.State values, in the server's event loop once a second, so it
    never meets Gradio's own changes to the sessions half-way."""
    holder, queue = demo.state_holder, demo._queue
    expire = holder.delete_all_expired_state
    last = [time.monotonic()]
    queues = IdleQueues()

    def busy(session_hash: str) -> bool:
        return bool(queue.pending_event_ids_session.get(session_hash))

    def expire_then_forget() -> None:
        expire()
        if time.monotonic() - last[0] >= SWEEP_EVERY_S:
            last[0] = time.monotonic()
            forget_idle(holder, busy, idle_s=IDLE_S)
            queues.sweep(queue, last[0], QUEUE_IDLE_S)

    holder.delete_all_expired_state = expire_then_forget
