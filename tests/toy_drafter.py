"""A drafter written the way docs/ARCHITECTURE.md says a new one is: one module and one
`DRAFTERS` entry, which states what its drafting costs (`draft_ms`, here). It guesses that the
last token repeats, a point mass each time."""

from __future__ import annotations

import time

import torch

from specviz.choices import Choice
from specviz.drafters.base import ChainDrafting, KeepGoing, Proposal, TreeBudget

ENTRY = Choice(
    "toy-repeat",
    "Toy: the last token again",
    "guesses that the last token repeats",
    "toy_drafter:make",
    draft_cost="toy_drafter:draft_ms",
)
# What the entry says a drafted token costs, in ms (a test may set it).
PRICE_MS = 0.0


def draft_ms(pair, settings) -> float:
    return PRICE_MS


class RepeatDrafter(ChainDrafting):
    name = ENTRY.name

    def begin(self, prompt_ids: torch.Tensor) -> None:
        pass

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        start = time.perf_counter()
        tokens = context[-1:].repeat(max(k, 0))
        return Proposal(
            tokens=tokens, q=None, ms=(time.perf_counter() - start) * 1000, confidence=[1.0] * tokens.numel()
        )

    def accepted(self, n: int) -> None:
        pass

    def unread(self, context_len: int) -> int:
        return 0


def make(pair, settings, *, generator=None, history=()) -> RepeatDrafter:
    return RepeatDrafter()
