"""Load progress: one callback `progress(fraction, message)` for the app, tqdm bars for a terminal.

A load is a sequence of steps of known relative cost (assemble, convert, load each model);
`Steps` maps each step's own 0..1 onto its share of the whole, so the caller sees one
fraction that only grows.
"""

from __future__ import annotations

from typing import Callable

from tqdm.auto import tqdm

Progress = Callable[[float, str], None]


class Steps:
    def __init__(self, callback: Progress | None, weights: dict[str, float]):
        self.callback = callback
        total = sum(weights.values()) or 1.0
        self.spans: dict[str, tuple[float, float]] = {}
        start = 0.0
        for name, w in weights.items():
            self.spans[name] = (start / total, (start + w) / total)
            start += w
        self.done = 0.0

    def step(self, name: str) -> Progress:
        """A progress function for one step; it also drives a tqdm bar (shown on a terminal only)."""
        lo, hi = self.spans[name]
        bar = tqdm(total=100, desc=name, unit="%", leave=False, disable=None)
        last = [0]

        def report(fraction: float, message: str) -> None:
            fraction = min(max(fraction, 0.0), 1.0)
            pct = int(fraction * 100)
            if pct > last[0]:
                bar.update(pct - last[0])
                last[0] = pct
            if pct == 100:
                bar.close()
            self.done = max(self.done, lo + (hi - lo) * fraction)
            if self.callback:
                self.callback(self.done, message)

        return report

    def finish(self, message: str) -> None:
        self.done = 1.0
        if self.callback:
            self.callback(1.0, message)
