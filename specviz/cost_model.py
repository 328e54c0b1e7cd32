"""`CostModel`: V(n), what one target pass over n new tokens costs, from the pass sizes
measured, with D (one drafted token): the one cost type, whose `round_ms` is the one place a
round's cost k*D + V(k+1) is written.

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

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from specviz.errors import UserError, shown

# Drafting pays only where, every draft accepted, it beats plain decoding by this (docs/COST_AWARE.md).
BREAK_EVEN_MARGIN = 0.05


def never_cheaper(measured: Mapping[int, float]) -> dict[int, float]:
    """The costs by size, each raised to the dearest smaller pass."""
    out, highest = {}, float("-inf")
    for n, v in sorted((int(n), float(v)) for n, v in measured.items()):
        highest = max(highest, v)
        out[n] = highest
    return out


@dataclass
class CostModel:
    """V(n) and D in ms, the one type every cost in specviz has: measured at load
    (`costs.measure`), read back from a trace (`from_dict`) or a user's table.

    `verify[n]` is one target pass over n new tokens (sizes between measured ones are
    interpolated, larger ones extrapolated unless `extrapolate` is False: a table that says
    nothing past its end), `draft` one drafted token."""

    verify: dict[int, float]
    draft: float
    source: str = "measured"
    meta: dict = field(default_factory=dict)
    extrapolate: bool = True

    def __post_init__(self) -> None:
        for n, ms in self.verify.items():
            if not float(ms) > 0:
                raise UserError(f"a verify pass over {n} tokens must cost more than 0 ms (got {shown(ms)})")
        if not 0 <= float(self.draft) < float("inf"):
            raise UserError(f"draft_ms must be 0 or more and finite (got {shown(self.draft)})")
        self.verify = never_cheaper(self.verify)
        if 1 not in self.verify:
            raise UserError("a cost model needs the cost of a one-token pass")
        self.draft = float(self.draft)

    def verify_ms(self, n: int) -> float:
        """V(n): a target pass over n new tokens, on the curve the module's docstring describes."""
        return float(self.verify_ms_of(np.asarray([n]))[0])

    def verify_ms_of(self, n) -> np.ndarray:
        """V(n) for each pass size in `n` at once (a policy prices every draft length each round)."""
        n, sizes, costs = np.asarray(n, dtype=float), list(self.verify), list(self.verify.values())
        if n.size and n.min() < 1:
            raise ValueError(f"a pass carries at least one token (got {n.min():g})")
        if n.size and n.max() > sizes[-1] and not self.extrapolate:
            too_many = f"a pass over {n.max():g} tokens was asked for"
            raise UserError(f"verify cost measured for {sizes[0]:g} to {sizes[-1]:g} tokens only; {too_many}")
        slope = max((costs[-1] - costs[-2]) / (sizes[-1] - sizes[-2]), 0.0) if len(sizes) > 1 else 0.0
        return np.where(n <= sizes[-1], np.interp(n, sizes, costs), costs[-1] + slope * (n - sizes[-1]))

    def round_ms(self, k, forced: int = 0):
        """A round that drafts k tokens: k drafted tokens and a verify pass over k + 1, and over
        the `forced` tokens an output format forces, which no one drafts (an array of k: each)."""
        ms = np.asarray(k) * self.draft + self.verify_ms_of(np.asarray(k) + 1 + forced)
        return float(ms) if np.ndim(k) == 0 else ms

    @property
    def target(self) -> float:
        """T: one plain-decoding step."""
        return self.verify[1]

    @property
    def busy(self) -> bool:
        """Timed at a busy moment: this load is priced as the machine was then, and the cache
        kept the undisturbed costs (`costs.measure.load_or_measure` marks it "cache_kept")."""
        return bool(self.meta.get("cache_kept"))

    def with_draft(self, draft_ms: float) -> "CostModel":
        """The same V(n) with another D (a drafter that is not the draft model), a copy."""
        return replace(self, verify=dict(self.verify), draft=draft_ms, meta=dict(self.meta))

    def to_dict(self) -> dict:
        return {
            "verify": {str(n): v for n, v in self.verify.items()},
            "draft": self.draft,
            "source": self.source,
            "meta": copy.deepcopy(self.meta),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "CostModel":
        return cls(
            verify={int(n): float(v) for n, v in dict(d["verify"]).items()},
            draft=float(d["draft"]),
            source=d.get("source", "measured"),
            meta=dict(d.get("meta") or {}),
        )


def older_shape(d):
    """Costs kept as {"V": {n: ms}, "D": ms} (a runtime's, before they took `to_dict`'s
    shape) as `to_dict`'s; anything else as it is."""
    if isinstance(d, Mapping) and "V" in d and "verify" not in d:
        return {"verify": d["V"], **({"draft": d["D"]} if d.get("D") is not None else {})}
    return d


def kept(d) -> CostModel | None:
    """A cost model from its kept dict (either shape); None where it is not one, or prices no
    one-token pass (traces from before runs kept one)."""
    try:
        return CostModel.from_dict(older_shape(d)) if isinstance(d, Mapping) else None
    except (KeyError, TypeError, ValueError):
        return None


def recorded(meta: Mapping | None) -> CostModel | None:
    """The costs a trace recorded (`meta["cost_model"]`)."""
    return kept((meta or {}).get("cost_model"))
