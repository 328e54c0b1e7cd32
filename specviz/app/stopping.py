"""Stop for each browser session: every run gets its own flag, and Stop sets it.

A new run in the same session sets the previous run's flag first, so re-running on a slider
release never leaves the old run going. The engine polls the flag between (and inside) rounds.
"""

from __future__ import annotations

import threading

NO_SESSION = "no-session"  # a request without a browser session: its outputs are never kept


def session_of(request) -> str:
    """The browser session a Gradio request comes from (each has its own Stop)."""
    return getattr(request, "session_hash", None) or NO_SESSION


class StopFlags:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: dict[str, threading.Event] = {}

    def begin(self, session: str) -> threading.Event:
        """A fresh flag for a new run of `session`; the session's previous run is told to stop."""
        flag = threading.Event()
        with self._lock:
            previous = self._current.get(session)
            self._current[session] = flag
        if previous is not None:
            previous.set()
        return flag

    def current(self, session: str) -> threading.Event | None:
        with self._lock:
            return self._current.get(session)

    def stop(self, session: str) -> None:
        with self._lock:
            flag = self._current.get(session)
        if flag is not None:
            flag.set()

    def finish(self, session: str, flag: threading.Event) -> None:
        with self._lock:
            if self._current.get(session) is flag:
                del self._current[session]
