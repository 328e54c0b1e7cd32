"""Replayed rounds priced on a cost curve: predicted ms, tokens per second and speedup.

A round that verifies n candidate nodes beside r ride nodes is one target pass over 1 + r + n
tokens, V(1 + r + n), plus its drafting: a draft model's passes at D each (and, in the round
that first drafts, its read of the prompt), or a draft-free drafter's own work as timed in the
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


def round_ms(r: Round, cost: CostModel, draft_ms: float, *, free: bool) -> float:
    """One round's predicted ms; `free`: a drafter without a model, whose work is its own timed ms."""
    work = r.draft_ms if free else r.passes * draft_ms + r.setup_ms
    return cost.verify_ms(1 + r.drafted + r.ride) + work


def priced(rounds: Sequence[Round], cost: CostModel, draft_ms: float, *, free: bool) -> Priced:
    tokens = sum(r.tokens for r in rounds)
    ms = sum(round_ms(r, cost, draft_ms, free=free) for r in rounds)
    return Priced(ms, tokens, tokens * cost.verify_ms(1))


def plain(tokens: int, cost: CostModel) -> Priced:
    return Priced(tokens * cost.verify_ms(1), tokens, tokens * cost.verify_ms(1))
