"""Events per visitor over the last minute: uploads (`upload_bounds`), refused requests (`strikes`)."""

from __future__ import annotations

from collections import deque

WINDOW_S = 60.0
VISITORS_KEPT = 4_096  # visitors whose times are kept before the expired ones are dropped


class PerMinute:
    """Each visitor's events over the last minute (`WINDOW_S`)."""

    def __init__(self):
        self.times: dict[str, deque[float]] = {}

    def recent(self, visitor: str, now: float) -> deque[float]:
        """`visitor`'s events within the last minute, oldest first."""
        times = self.times.get(visitor) or deque()
        while times and now - times[0] >= WINDOW_S:
            times.popleft()
        return times

    def add(self, visitor: str, now: float) -> None:
        self.times[visitor] = times = self.recent(visitor, now)
        times.append(now)
        if len(self.times) > VISITORS_KEPT:
            self.times = {k: t for k, t in self.times.items() if t and now - t[-1] < WINDOW_S}
