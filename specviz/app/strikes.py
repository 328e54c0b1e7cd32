"""A public page's door, closed for a while to a visitor whose requests it keeps refusing.

Each refusal still costs the page the reading and checking of the request, and a hostile client
sends nothing else: bodies of megabytes parsed one after another take the cores the honest runs
need, and the peaks of their parsing stay with the allocator. So a visitor's refused requests
are counted over the last minute: a 400, 413 or 422 answer, a closed route, a handler's error.
Once `max_refused_per_minute` of them (SPECVIZ_MAX_REFUSED_PER_MINUTE; 0 turns the door off)
fall within a minute, every request of that visitor that sends the page something to work on
(any method but GET, HEAD and OPTIONS) is answered 429 in one line before its body is read, until
fewer than that many are under a minute old. Reading stays open: the page itself, and the
streams of requests joined before the door closed, whose answers are already owed. Answers at the door are not
counted, so the door opens again a minute after the last refusal however hard the visitor
knocks. Public pages only: every request of a local page comes from this machine.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from gradio.server_messages import ProcessCompletedMessage

from specviz.app.config import PageConfig
from specviz.app.per_minute import WINDOW_S, PerMinute
from specviz.app.visitors import visitor_of

ENV = "SPECVIZ_MAX_REFUSED_PER_MINUTE"
STATUSES = frozenset({400, 413, 422})  # a request the page refused as it stood
READING = frozenset({"GET", "HEAD", "OPTIONS"})  # methods the door lets through


class Strikes:
    """Refused requests per visitor; `door` says why a visitor is turned away, or None."""

    def __init__(self, limit: int):
        self.limit, self.refused, self.lock = limit, PerMinute(), threading.Lock()

    @classmethod
    def of(cls, config: PageConfig) -> "Strikes":
        return cls(config.max_refused_per_minute if config.public else 0)

    def strike(self, visitor: str, now: float) -> None:
        if self.limit:
            with self.lock:
                self.refused.add(visitor, now)

    def door(self, visitor: str, method: str, now: float) -> tuple[str, int] | None:
        """Why `visitor`'s request by `method` is turned away at `now`, and in how many seconds
        it is answered again; or None."""
        if not self.limit or method in READING:
            return None
        with self.lock:
            times = self.refused.recent(visitor, now)
            if len(times) < self.limit:
                return None
            wait = max(1, round(WINDOW_S - (now - times[-self.limit])))
        why = (
            f"the page refused {len(times)} of your requests in the last minute; the limit is {self.limit} "
            f"per visitor ({ENV}); it answers you again in {wait} s"
        )
        return why, wait


def watch(demo: Any, config: PageConfig, strikes: Strikes) -> None:
    """Count a strike for each event of `demo`'s queue that ends in an error (a handler's refusal
    reaches its visitor as a failed completion, after an answer of 200 to its join)."""
    queue = demo._queue
    send = queue.send_message

    def sending(event, message):
        if isinstance(message, ProcessCompletedMessage) and not message.success:
            strikes.strike(visitor_of(event.request, event.session_hash, config), time.monotonic())
        return send(event, message)

    queue.send_message = sending
