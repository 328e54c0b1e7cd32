"""Replayed rounds priced on a cost curve: predicted ms, tokens per second and speedup.

A round that verifies n candidate nodes beside r ride nodes is one target pass over 1 + r + n
tokens, V(1 + r + n), plus its drafting: a draft model's passes at D each (and, in the round
that first drafts, its read of the prompt, as a run's draft reads it then), or a draft-free drafter's own work as timed in the
replay (the same code a run runs, on this machine). A round that drafts nothing is V(1).
Plain decoding makes the same tokens at V(1) each. Both leave out the prompt's prefill and the
first token it gives, which are the same with or without drafting.

A tree pass is priced as the chain pass of the same size V(n) measures; on llama.cpp a tree
costs more (a sequence per node), so a tree's figure is an upper bound of its speed there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from specviz.cost_model import CostModel
from specviz.workshop.tournament.replay import Round


@dataclass(frozen=True)
class Priced:
    ms: float  # the rounds' predicted wall time
    tokens: int  # the tokens they make
    plain_ms: float  # the same tokens decoded plainly

    @property
    def tokens_per_s(self) -> float:
        return 1000 * self.tokens / self.ms if self.ms > 0 else 0.0

    @property
    def speedup(self) -> float:
        return self.plain_ms / self.ms if self.ms > 0 else 0.0

    def to_dict(self) -> dict:
        return {"tokens_per_s": round(self.tokens_per_s, 3), "speedup": round(self.speedup, 4), "ms": round(self.ms, 2)}


class Prices:
    """One drafter's round prices on one curve: V(n) read once per size, D, and what its first
    drafting round pays to read the prompt (a draft model's; nothing for a draft-free drafter)."""

    def __init__(self, cost: CostModel, draft_ms: float, *, free: bool, prefill_ms: float = 0.0):
        self.cost, self.draft_ms, self.free, self.prefill_ms = cost, draft_ms, free, prefill_ms
        self._v: dict[int, float] = {}
        self.paid = False  # whether a round has drafted yet, in the run being priced

    def v(self, n: int) -> float:
        if n not in self._v:
            self._v[n] = self.cost.verify_ms(n)
        return self._v[n]

    def round_ms(self, r: Round) -> float:
        """One round's predicted ms; the first round that drafts with a model also reads the prompt."""
        if self.free:
            return self.v(1 + r.drafted + r.ride) + r.draft_ms
        setup = self.prefill_ms if r.passes and not self.paid else 0.0
        self.paid = self.paid or r.passes > 0
        return self.v(1 + r.drafted + r.ride) + r.passes * self.draft_ms + setup

    def run(self, rounds: Sequence[Round]) -> Priced:
        self.paid = False
        tokens = sum(r.tokens for r in rounds)
        ms = sum(self.round_ms(r) for r in rounds)
        self.paid = False
        return Priced(ms, tokens, tokens * self.v(1))


def plain(tokens: int, cost: CostModel) -> Priced:
    return Priced(tokens * cost.verify_ms(1), tokens, tokens * cost.verify_ms(1))
