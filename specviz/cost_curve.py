"""V(n): what one target pass over n new tokens costs, from the pass sizes measured.

The one curve the cost model, the hindsight figures, the labs and the theory share:
- never cheaper with more tokens: each size costs at least what any smaller one did (a busy
  machine can time a larger pass as cheaper, and taken at face value that makes the draft
  length behind it look cheap);
- between measured sizes, linear interpolation;
- beyond the largest, extended along the last two measured sizes (never downward), or
  refused where the figures are a user's table that says nothing past its end.

A leaf: numbers in, numbers out, no models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from specviz.errors import UserError


def never_cheaper(measured: Mapping[int, float]) -> dict[int, float]:
    """The costs by size, each raised to the dearest smaller pass."""
    out, highest = {}, float("-inf")
    for n, v in sorted((int(n), float(v)) for n, v in measured.items()):
        highest = max(highest, v)
        out[n] = highest
    return out


class CostCurve:
    """V(n) in ms for any n >= 1 from `measured` {n: ms}."""

    def __init__(self, measured: Mapping[int, float], *, extrapolate: bool = True):
        costs = never_cheaper(measured)
        if not costs:
            raise UserError("a cost curve needs at least one measured pass size")
        self.sizes = list(costs)
        self.costs = list(costs.values())
        self.extrapolate = extrapolate
        s, c = self.sizes, self.costs
        self.slope = max((c[-1] - c[-2]) / (s[-1] - s[-2]), 0.0) if len(s) > 1 else 0.0

    def __call__(self, n: int) -> float:
        if n < 1:
            raise ValueError(f"a pass carries at least one token (got {n})")
        if self.sizes[0] <= n <= self.sizes[-1]:
            return float(np.interp(n, self.sizes, self.costs))
        if not self.extrapolate or n < self.sizes[0]:
            raise UserError(
                f"verify cost measured for {self.sizes[0]:g} to {self.sizes[-1]:g} tokens only; "
                f"a pass over {n} tokens was asked for"
            )
        return self.costs[-1] + self.slope * (n - self.sizes[-1])


@dataclass(frozen=True)
class PassCosts:
    """V(n) and D, one drafted token, as a run's cost model records them (`CostModel.to_dict()`)."""

    verify: CostCurve
    draft: float

    @classmethod
    def from_dict(cls, d: Mapping) -> "PassCosts":
        measured = {int(n): float(v) for n, v in dict(d["verify"]).items()}
        if 1 not in measured:
            raise ValueError("a cost model needs the cost of a one-token pass")
        return cls(CostCurve(measured), float(d["draft"]))

    def __call__(self, n: int) -> float:
        return self.verify(n)

    def round_ms(self, k: int) -> float:
        """A round that drafts k tokens: k drafted tokens and a verify pass over k + 1."""
        return k * self.draft + self(k + 1)
