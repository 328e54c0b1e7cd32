"""A page session's earlier outputs, the suffix drafter's corpus beyond the request's own text.

Kept per browser session and per pair (token ids mean nothing under another tokenizer), a
few runs each, in this process only. The page's Live tab reads and adds; the API and the MCP
tools never do, so one caller's outputs never reach another's run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque

RUNS_KEPT = 8  # per session and pair: the newest
SESSIONS_KEPT = 256  # the most recently used


class SessionOutputs:
    def __init__(self, runs: int = RUNS_KEPT, sessions: int = SESSIONS_KEPT):
        self._runs = runs
        self._sessions = sessions
        self._by_session: OrderedDict[str, dict[str, deque[list[int]]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session: str, pair: str) -> list[list[int]]:
        with self._lock:
            kept = self._by_session.get(session, {}).get(pair)
            return [list(ids) for ids in kept] if kept else []

    def add(self, session: str, pair: str, ids: list[int]) -> None:
        if len(ids) < 2:
            return
        with self._lock:
            pairs = self._by_session.setdefault(session, {})
            self._by_session.move_to_end(session)
            pairs.setdefault(pair, deque(maxlen=self._runs)).append(list(ids))
            while len(self._by_session) > self._sessions:
                self._by_session.popitem(last=False)
