"""What a run's rounds cost now: the load-time V(n) and D (`measure`), moved by the run's own
timed rounds, so that a policy prices its rounds on the machine as it is, not as it was.

Each timed round tells one of:
- a round that drafted nothing: V(1) now, and what the round cost beyond its target pass (the
  engine's own work per round, O);
- a round that drafted m tokens: V(m + 1) now, and a drafted token's cost now,
  (round - target pass - O - the draft's catch-up) / m.

V(1) now over V(1) at load is the machine's level L: a busier or quieter machine moves every
cost alike. A one-token pass counts as at most OUTLIER times the fastest of the last few (the
load's timing among them until WINDOW have come): a page drawing its first update slows a run's
first passes, and a level set by them would make V(1) dearer than the V(2) timed after, so
that one-token drafts look like they pay. A larger pass keeps its own shape (V(n) now over
V(n) at load, over L) and the draft its D over L, so a cost that moves apart from the rest (a
draft slower in this run than at load, a pass size the load timed wrongly) is seen as such,
while a run that decodes plainly still tracks the level and prices drafting at it. A run that
drafts every round times no one-token pass: after STALE rounds of it, the draft's passes set
the level instead.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from specviz.cost_model import CostModel

# Weight of one timed round in each running figure.
WEIGHT = 0.3
STALE = 16
OUTLIER = 1.5
WINDOW = 4


class RunCosts:
    """V(n) for n = 1..k_max + 1 and D as this run measures them, so that `round_ms(m)` is a
    whole round (its V(n) includes O); `now` is them as a cost model."""

    def __init__(self, cost: CostModel, k_max: int, draft_ms: float | None = None):
        self.load = cost
        self._load_v = cost.verify_ms_of(np.arange(1, k_max + 2))  # the load's curve, read once
        self.level = 1.0
        self.shape = np.ones(k_max + 1)  # by pass size n - 1
        self.draft = cost.draft if draft_ms is None else float(draft_ms)  # over the level
        self.overhead = 0.0
        self._plain_ago = 0  # rounds since a one-token pass was timed
        self._recent = deque([1.0], maxlen=WINDOW)  # the last one-token passes over the load's
        self._timed: set[int] = set()
        self._priced()

    def observe(self, drafted: int, round_ms: float, target_ms: float, catch_up_ms: float | None = 0.0) -> None:
        """A timed round: `drafted` tokens, `round_ms` in all (less what the run pays once),
        `target_ms` its target pass, `catch_up_ms` the draft's reading before it drafted (None:
        not known, so the round says nothing about D)."""
        n = drafted + 1
        ratio = target_ms / (self._load_v[n - 1] if n <= len(self._load_v) else self.load.verify_ms(n))
        if drafted == 0:
            if self._plain_ago > STALE:  # the draft's passes have set the level since: start from it
                self._recent = deque([self.level], maxlen=WINDOW)
            self._recent.append(ratio)
            ratio = min(ratio, OUTLIER * min(self._recent))
            self.level += WEIGHT * (ratio - self.level)
            self.overhead += WEIGHT * (max(0.0, round_ms - target_ms) - self.overhead)
            self._plain_ago = 0
        else:
            self._plain_ago += 1
            d = None if catch_up_ms is None else max(0.0, round_ms - target_ms - self.overhead - catch_up_ms) / drafted
            if d is not None and self._plain_ago > STALE and self.draft > 0:
                self.level += WEIGHT * (d / self.draft - self.level)
            elif d is not None:
                self.draft += WEIGHT * (d / self.level - self.draft)
            if n <= len(self.shape):  # a size's first timing replaces the load's, later ones move it
                w = WEIGHT if n in self._timed else 1.0
                self.shape[n - 1] += w * (ratio / self.level - self.shape[n - 1])
                self._timed.add(n)
        self._priced()

    def _priced(self) -> None:
        # Every round prices every draft length: arrays, never cheaper with size as a CostModel's V(n) is.
        self._v = np.maximum.accumulate(self.level * self.shape * self._load_v + self.overhead)
        self._now: CostModel | None = None

    def round_ms(self, ks: np.ndarray, forced: int = 0) -> np.ndarray:
        """C(k) for each draft length in `ks`: k drafted tokens and a pass over k + 1 + `forced`."""
        if forced or ks.max() >= len(self._v):
            return self.now.round_ms(ks, forced)
        return ks * (self.level * self.draft) + self._v[ks]

    @property
    def now(self) -> CostModel:
        if self._now is None:
            verify = {n: float(v) for n, v in enumerate(self._v, 1)}
            self._now = CostModel(verify=verify, draft=self.level * self.draft, source="this run")
        return self._now
