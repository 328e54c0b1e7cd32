"""Prompt lookup: propose what followed the latest earlier occurrence of the last n tokens.

No second model. Code and edits repeat their context (names, whole lines), and there the
continuation of an n-gram match is often right. Each proposal is certain (q is a point
mass), and the acceptance rule still holds: a drafted token is then accepted with
probability p(x) and, if rejected, replaced from p with x removed.
"""

from __future__ import annotations

import time

import torch

from specviz.drafters.base import ChainDrafting, KeepGoing, Proposal, TreeBudget
from specviz.choices import LOOKUP


class LookupDrafter(ChainDrafting):
    name = LOOKUP

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram

    def begin(self, prompt_ids: torch.Tensor) -> None:
        pass

    def propose(self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None) -> Proposal:
        start = time.perf_counter()
        tokens = find_continuation(context, k, self.max_ngram, self.min_ngram)
        return Proposal(tokens=tokens, q=None, ms=(time.perf_counter() - start) * 1000, confidence=[1.0] * tokens.numel())

    def accepted(self, n: int) -> None:
        pass

    def unread(self, context_len: int) -> int:
        return 0


def find_continuation(context: torch.Tensor, k: int, max_ngram: int = 3, min_ngram: int = 1) -> torch.Tensor:
    """Up to k tokens that followed the latest earlier match of the context's last n tokens,
    trying the longest n first; empty when nothing matches."""
    length = context.numel()
    if k <= 0:
        return context[:0]
    for n in range(min(max_ngram, length - 1), min_ngram - 1, -1):
        windows = context[: length - 1].unfold(0, n, 1)  # every n-gram that has a successor
        hits = (windows == context[length - n :]).all(dim=1).nonzero()
        if hits.numel():
            start = int(hits[-1]) + n  # the latest match
            return context[start : start + k]
    return context[:0]


def make(pair, settings, *, generator=None, history=()) -> LookupDrafter:
    return LookupDrafter()
